"""Shared test helpers."""
import os, subprocess, sys
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program

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
