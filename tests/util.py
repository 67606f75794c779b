"""Shared test helpers."""
import os, subprocess, sys, zlib
from dataclasses import replace
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import TinyELF
from tinygrad.uop.ops import Ops, UOp, KernelInfo, buffers
from tinygrad.codegen import to_program
from tinygrad.engine.realize import run_linear
from tinygrad.helpers import Context, Target, diskcache_get, diskcache_put

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

class PerTestRng:
  """numpy's Generator, reseeded from each test's id before the test runs (conftest.py): a test draws the same data whichever
  tests ran before it, in one process or under pytest -n 2."""
  def __init__(self): self.seed("")
  def seed(self, name:str): self.gen = np.random.default_rng(zlib.crc32(name.encode()))
  def __getattr__(self, name): return getattr(self.gen, name)
rng = PerTestRng()

def data(shape, dtype=np.float32, lo=-3.0, hi=3.0) -> np.ndarray:
  """Nonuniform data: never all zeros or all ones."""
  if np.dtype(dtype) == np.bool_: return rng.random(shape) < 0.4
  if np.issubdtype(dtype, np.integer):
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dtype)
  return rng.uniform(lo, hi, size=shape).astype(dtype)

def flushed(x:np.ndarray) -> np.ndarray:
  """x as float32 arithmetic leaves it on this device: where probe.py measured that the driver flushes denormals (no "denorm" flag;
  no driver here promises either behaviour), a denormal is a zero of its sign."""
  if "denorm" in Device["VULKAN"].caps: return x
  return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x).astype(x.dtype)

def in_words(dt) -> bool:
  """half without shaderFloat16: computed in float, rounded where stored or cast to half (renderer/passes/half.py); no vector accesses of it."""
  from tinygrad import dtypes
  return dt == dtypes.half and "f16" not in Device["VULKAN"].caps

def missing(*dts) -> str:
  """'' when VULKAN has these dtypes (natively, packed in 32-bit words or as int pairs), else which it has not and the Vulkan
  feature each needs: under VULKAN_PROFILE or VULKAN_DISABLE a dtype may be refused (double) or emulated by tinygrad (fp8)."""
  from tinygrad_vk.caps import DTYPE_RULES, FLAGS, SUPPORTED, dtype_support
  names = [repr(d)[len("dtypes."):] for d in dts]
  return ", ".join(f"needs {n} ({FLAGS[DTYPE_RULES[n][0]]})" for n in names
                   if dtype_support(n, Device["VULKAN"].caps) not in SUPPORTED)

def needs(*dts): return pytest.mark.skipif(bool(m := missing(*dts)), reason=m)

def vectors(nbytes:int) -> bool:
  """Whether float4 accesses of a buffer of nbytes read a vecN declaration: with flag vec, through a descriptor (past
  maxStorageBufferRange, by address, they go lane by lane: renderer/plan.py KernelPlan.vector)."""
  caps = Device["VULKAN"].caps
  return "vec" in caps and nbytes <= caps.range

def renderer_with(**caps):
  """The device's renderer (the one DEV picks) with some capabilities changed (caps.py Caps fields: flags=..., smem=...)."""
  ren = Device["VULKAN"].renderer
  return type(ren)(replace(ren.target, arch=replace(ren.caps, **caps).encode()))

def kernel_programs(t:Tensor, device="VULKAN", ren=None) -> list[UOp]:
  """The PROGRAM of every kernel that realizing t would run, from the renderer DEV picks (or ren): `.arg` is its ProgramInfo
  (launch dims), `.src[2].arg` its source. Consumes t: scheduling it leaves running the schedule to the caller."""
  return [to_program(c.src[0], ren or Device[device].renderer) for c in t.linear_with_vars()[0].src if c.src[0].op is Ops.SINK]

def kernel_sources(t:Tensor, device="VULKAN", ren=None) -> list[str]:
  """The source (GLSL, or the SPIR-V renderer's assembly) of every kernel that realizing t would run (see kernel_programs)."""
  return [p.src[2].arg for p in kernel_programs(t, device, ren)]

def grouped_sources(t:Tensor) -> list[str]:
  """kernel_sources as tinygrad's heuristic shapes the kernels, reductions GROUPed through shared memory where it would: without
  the "rows" flag (renderer/opts.py), which on llvmpipe runs most of them whole on each lane instead."""
  return kernel_sources(t, ren=renderer_with(flags=Device["VULKAN"].renderer.caps.flags - {"rows"}))

# a guard against a hang (a deadlock, a lost device) for the tests whose failure would be one: far past what the slowest driver here
# (SwiftShader) needs. Every other subprocess runs to its end: a slower driver is not a failure.
HANG_S = 900

def run_python(code:str, env:dict|None=None, timeout:float|None=None) -> subprocess.CompletedProcess:
  """Run code in a fresh interpreter (device switches are read once per process), on this run's DEV (and so its renderer)."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                        env={"DEV": "VULKAN", **os.environ, **(env or {})})

def switched(*allowed:str) -> list[str]:
  """What this run switches from the default pass of scripts/test.sh: VULKAN_* variables (but spirv-val and `allowed`), DEV other
  than VULKAN. A test that sets its own profile or device runs where this is empty."""
  return [k for k in os.environ if k.startswith("VULKAN_") and k not in ("VULKAN_VALIDATE_SPIRV", *allowed)] + \
         (["DEV"] if os.environ.get("DEV", "VULKAN") != "VULKAN" else [])

def is_spirv(src:str) -> bool: return src.startswith("; tinygrad_vk SPIR-V")

# what a kernel's source shows of a lowering path, in GLSL and in the SPIR-V renderer's assembly
MARKS = {"shared": (("shared ", "barrier();"), (" Workgroup", "OpControlBarrier")),     # shared memory and barriers
         "vec4": (("vec4(",), ("OpCompositeConstruct %v4",)),                            # 4-lane vector values
         "vec4_var": (("vec4[",), ("_v4",)),                                              # a vec4 declaration of a binding
         "address": (("buffer_reference",), ("PhysicalStorageBuffer",)),                 # a buffer passed by device address
         "address64": (("_at(", "uint64_t(_p"), ("%at64_",)),                            # its element address computed in 64 bits
         "atomic": (("atomicAnd(",), ("OpAtomicAnd",))}                                  # a read-modify-write store of a packed field
def shows(src:str, what:str) -> bool: return all(m in src for m in MARKS[what][is_spirv(src)])

def kernel_source(stores:list[UOp]) -> str:
  """The source (GLSL, or the SPIR-V renderer's assembly) that run_kernel runs for these stores, from the renderer DEV picks."""
  return to_program(UOp.sink(*stores, arg=KernelInfo()), Device["VULKAN"].renderer).src[2].arg

def run_kernel(stores:list[UOp], bufs:list) -> None:
  """Run one kernel given as UOp stores over PARAMs 0..n-1, bound to `bufs` (tinygrad Buffers, views included: tinygrad would
  fold most tensor slices into index arithmetic, a Buffer.view is bound at its offset)."""
  buf_uops = [UOp.new_buffer(b.device, b.size, b.dtype) for b in bufs]
  for u, b in zip(buf_uops, bufs): buffers[u] = b
  with Context(SPEC=2):
    run_linear(UOp(Ops.LINEAR, src=(UOp.sink(*stores, arg=KernelInfo()).call(*buf_uops),)))

# a one-workgroup kernel written by hand: for the runtime's own checks, without tinygrad's scheduler in between
SIMPLE_GLSL = """#version 450
layout(local_size_x=1) in;
layout(set=0, binding=0, std430) buffer B0 { float data0[]; };
void main() {
  float x = 1.0;
  data0[0] = x;
}
"""

def glsl_compiler(device="VULKAN"):
  """glslang for the SPIR-V version the device takes (1.3 on Vulkan 1.1: a 1.5 module is a validation error there)."""
  from tinygrad_vk.compiler import GLSLCompiler
  from tinygrad_vk.caps import spirv_target
  return GLSLCompiler(target=spirv_target(Device[device].caps))

def glsl_program(glsl:str, nbufs=1, device="VULKAN", name="test"):
  return Device[device].runtime(TinyELF(glsl_compiler(device).compile(glsl), name, Target("VULKAN"),
                                        tuple((None, i, dtypes.float, (4,)) for i in range(nbufs))))

class LibHooks(dict):
  """Stands in for the `vulkan` cffi lib in the runtime modules: a call of `name` goes to self[name](real_function, *args) when a
  test set a hook, otherwise to the real function. How the fault tests inject Vulkan errors. With `calls` set to a list, every
  function looked up is appended to it."""
  def __init__(self, real):
    super().__init__()
    self.real, self.calls = real, None
  def __getattr__(self, name:str):
    if self.calls is not None: self.calls.append(name)
    fn = getattr(self.real, name)
    if (hook := self.get(name)) is None: return fn
    return lambda *args: hook(fn, *args)

_next_device = iter(range(8, 16))
def fresh_device() -> str:
  """A logical device no other test uses (VULKAN:n past the physical devices opens another logical device): for faults that
  leave a device lost for the rest of the process."""
  return f"VULKAN:{next(_next_device)}"

def bind_align() -> int:
  """minStorageBufferOffsetAlignment: a view at or past it is bound at a non-zero descriptor offset."""
  return Device["VULKAN"].caps.align

class BindSpy:
  """Records every VulkanProgram.pack (eager launches and graphs): per slot the offset bound (the descriptor offset, or for a buffer
  passed by address the view offset folded into the address), and which pipeline it launches with (the alignment key of the views'
  element offsets: all VEC_ALIGN for the pipeline built first, anything else for a variant)."""
  def __init__(self, monkeypatch):
    from tinygrad_vk.program import VulkanProgram
    from tinygrad_vk import windows
    self.binds: list[tuple[list[int], tuple[int, ...], tuple[int, ...]]] = []   # (offsets, key, aligned key)
    self.words: set[int] = set()   # the slots reached in 32-bit words (renderer/abi.py WORD_VIEW)
    self.moved: set[int] = set()   # the slots whose view was moved to a whole word (windows.py realign)
    orig, orig_realign = VulkanProgram.pack, windows.realign
    def pack(prg, bufs, vals, win=None):
      pc, pipe = orig(prg, bufs, vals, win)
      offs = [prg.infos[bd].offset if bd is not None else b.offset for b, bd in zip(bufs, prg.abi.binding)]
      self.binds.append((offs, next(k for k, p in prg.pipelines.items() if p == pipe), prg.aligned))
      self.words |= prg.words
      return pc, pipe
    def realign(prg, bufs):
      if (ra := orig_realign(prg, bufs)) is not None: self.moved |= {i for i, a, b in zip(prg.slots, bufs, ra.bufs) if a is not b}
      return ra
    monkeypatch.setattr(VulkanProgram, "pack", pack)
    monkeypatch.setattr(windows, "realign", realign)
  def offset_bound(self, slot:int) -> bool: return any(offs[slot] > 0 for offs, _, _ in self.binds)
  def variant_used(self, slot:int) -> bool: return any(key[slot] != aligned[slot] for _, key, aligned in self.binds)

# ---- damaged SPIR-V disk-cache entries

DAMAGE = ["zero_word_count", "bit_flip", "truncated", "truncated_odd", "garbage"]

def damage(spv:bytes, how:str) -> bytes:
  w = bytearray(spv)
  if how == "zero_word_count": w[5*4+2:5*4+4] = b"\0\0"         # the first instruction's word count
  elif how == "bit_flip": w[len(w) // 2] ^= 0x10                  # an operand in the middle of the module
  elif how == "truncated": w = w[:len(w) // 2]
  elif how == "truncated_odd": w = w[:len(w) - 6]
  elif how == "garbage": w = bytearray(os.urandom(len(w)))
  return bytes(w)

def damage_entry(table:str, src:str, how:str):
  """Damage the SPIR-V of a disk-cache entry in place, whatever else the entry holds."""
  entry = diskcache_get(table, src)
  assert entry is not None, "the kernel should be in the disk cache"
  if isinstance(entry, tuple): diskcache_put(table, src, tuple(damage(e, how) if i == len(entry) - 1 else e for i, e in enumerate(entry)))
  else: diskcache_put(table, src, damage(entry, how))

class MemoryCount:
  """Live VkDeviceMemory objects and bytes of a module's allocations (and their peaks), counted by wrapping
  vkAllocateMemory/vkFreeMemory; `fail` makes the next vkAllocateMemory calls return an error while it is > 0."""
  def __init__(self, monkeypatch, module):
    from tinygrad_vk.vk import vk
    self.live, self.bytes, self.peak, self.peak_bytes, self.fail, self.sizes = 0, 0, 0, 0, 0, {}
    self.oom = vk.VK_ERROR_OUT_OF_DEVICE_MEMORY
    hooks = LibHooks(module.lib)
    hooks.update(vkAllocateMemory=self._alloc, vkFreeMemory=self._free)
    monkeypatch.setattr(module, "lib", hooks)
  def _alloc(self, fn, dev, info, cb, out):
    if self.fail:
      self.fail -= 1
      return self.oom
    if (res := fn(dev, info, cb, out)) == 0:
      self.live, self.bytes, self.sizes[out[0]] = self.live + 1, self.bytes + info.allocationSize, info.allocationSize
      self.peak, self.peak_bytes = max(self.peak, self.live), max(self.peak_bytes, self.bytes)
    return res
  def _free(self, fn, dev, mem, cb):
    if mem in self.sizes: self.live, self.bytes = self.live - 1, self.bytes - self.sizes.pop(mem)
    return fn(dev, mem, cb)
