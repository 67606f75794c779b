"""Shared test helpers."""
import os, subprocess, sys
import numpy as np
import pytest
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

def missing(*dts) -> str:
  """'' when VULKAN has these dtypes (natively or packed in 32-bit words), else which it has not and the Vulkan feature each
  needs: under VULKAN_PROFILE or VULKAN_DISABLE a dtype may be emulated by tinygrad or refused."""
  from tinygrad_vk.caps import DTYPE_RULES, FLAGS, dtype_support
  names = [repr(d)[len("dtypes."):] for d in dts]
  return ", ".join(f"needs {n} ({FLAGS[DTYPE_RULES[n][0]]})" for n in names
                   if dtype_support(n, Device["VULKAN"].caps) not in ("native", "packed"))

def needs(*dts): return pytest.mark.skipif(bool(m := missing(*dts)), reason=m)

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
