"""Shared test helpers."""
import os, subprocess, sys
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.uop.ops import Ops, UOp, KernelInfo, buffers
from tinygrad.codegen import to_program
from tinygrad.engine.realize import run_linear
from tinygrad.helpers import Context

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(1234)

def data(shape, dtype=np.float32, lo=-3.0, hi=3.0) -> np.ndarray:
  """Nonuniform data: never all zeros or all ones."""
  if np.dtype(dtype) == np.bool_: return rng.random(shape) < 0.4
  if np.issubdtype(dtype, np.integer):
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dtype)
  return rng.uniform(lo, hi, size=shape).astype(dtype)

def kernel_sources(t:Tensor, device="VULKAN") -> list[str]:
  """The GLSL of every kernel that realizing t would run. Consumes t: schedule_linear() leaves running the schedule to the caller."""
  return [to_program(c.src[0], Device[device].renderer).src[2].arg for c in t.schedule_linear().src if c.src[0].op is Ops.SINK]

def run_python(code:str, env:dict|None=None, timeout=600) -> subprocess.CompletedProcess:
  """Run code in a fresh interpreter (device switches are read once per process)."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                        env={**os.environ, "DEV": "VULKAN", **(env or {})})

def run_kernel(stores:list[UOp], bufs:list) -> None:
  """Run one kernel given as UOp stores over PARAMs 0..n-1, bound to `bufs` (tinygrad Buffers, views included: tinygrad would
  fold most tensor slices into index arithmetic, a Buffer.view is bound at its offset)."""
  buf_uops = [UOp.new_buffer(b.device, b.size, b.dtype) for b in bufs]
  for u, b in zip(buf_uops, bufs): buffers[u] = b
  with Context(SPEC=2):
    run_linear(UOp(Ops.LINEAR, src=(UOp.sink(*stores, arg=KernelInfo()).call(*buf_uops),)))

class VkCalls:
  """Stands in for the cffi `lib` of a tinygrad_vk module (cffi functions cannot be patched): calls named in `wrap` go through
  wrap[name](real_function, *args), everything else straight to Vulkan."""
  def __init__(self, real, wrap:dict): self._real, self._wrap = real, wrap
  def __getattr__(self, name):
    fn = getattr(self._real, name)
    return (lambda *args: self._wrap[name](fn, *args)) if name in self._wrap else fn

class MemoryCount:
  """Live VkDeviceMemory objects and bytes of a module's allocations (and their peaks), counted by wrapping
  vkAllocateMemory/vkFreeMemory; `fail` makes the next vkAllocateMemory calls return an error while it is > 0."""
  def __init__(self, monkeypatch, module):
    from tinygrad_vk.vk import vk
    self.live, self.bytes, self.peak, self.peak_bytes, self.fail, self.sizes = 0, 0, 0, 0, 0, {}
    self.oom = vk.VK_ERROR_OUT_OF_DEVICE_MEMORY
    monkeypatch.setattr(module, "lib", VkCalls(module.lib, {"vkAllocateMemory": self._alloc, "vkFreeMemory": self._free}))
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
