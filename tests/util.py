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
  """The source (GLSL, or the SPIR-V renderer's assembly) of every kernel that realizing t would run, from the renderer DEV picks.
  Consumes t: scheduling it leaves running the schedule to the caller."""
  return [to_program(c.src[0], Device[device].renderer).src[2].arg for c in t.linear_with_vars()[0].src if c.src[0].op is Ops.SINK]

def run_python(code:str, env:dict|None=None, timeout=600) -> subprocess.CompletedProcess:
  """Run code in a fresh interpreter (device switches are read once per process), on this run's DEV (and so its renderer)."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                        env={"DEV": "VULKAN", **os.environ, **(env or {})})

def is_spirv(src:str) -> bool: return src.startswith("; tinygrad_vk SPIR-V")

# what a kernel's source shows of a lowering path, in GLSL and in the SPIR-V renderer's assembly
MARKS = {"shared": (("shared ", "barrier();"), (" Workgroup", "OpControlBarrier")),     # shared memory and barriers
         "vec4": (("vec4(",), ("OpCompositeConstruct %v4",)),                            # 4-lane vector values
         "vec4_var": (("_v4[",), ("_v4",))}                                              # a vec4 declaration of a binding
def shows(src:str, what:str) -> bool: return all(m in src for m in MARKS[what][is_spirv(src)])

def run_kernel(stores:list[UOp], bufs:list) -> None:
  """Run one kernel given as UOp stores over PARAMs 0..n-1, bound to `bufs` (tinygrad Buffers, views included: tinygrad would
  fold most tensor slices into index arithmetic, a Buffer.view is bound at its offset)."""
  buf_uops = [UOp.new_buffer(b.device, b.size, b.dtype) for b in bufs]
  for u, b in zip(buf_uops, bufs): buffers[u] = b
  with Context(SPEC=2):
    run_linear(UOp(Ops.LINEAR, src=(UOp.sink(*stores, arg=KernelInfo()).call(*buf_uops),)))
