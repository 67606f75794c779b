#!/usr/bin/env python3
"""The minimal behavioural path of tinygrad_vk, as its own program.

Nonuniform host data (a size that is not a multiple of the workgroup size) -> device, one elementwise kernel, completion,
device -> host, every element compared with a numpy reference. Prints the device, the compile time and the run time
separately; exits 1 on any mismatch.

  python scripts/roundtrip.py [--size N] [--device I]
"""
import argparse, os, sys, time
os.environ.setdefault("DEV", "VULKAN")
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program
from tinygrad_vk.vk import version_str

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--size", type=int, default=999_999, help="elements (default 999999 = 3^3*7*11*13*37: no power-of-two workgroup divides it)")
  ap.add_argument("--device", type=int, default=0, help="Vulkan device index: VULKAN:<index>")
  args = ap.parse_args()
  name = f"VULKAN:{args.device}" if args.device else "VULKAN"
  dev = Device[name]
  print(f"device   {name}: {dev.phys.name} ({dev.phys.driver}), Vulkan {version_str(dev.phys.api_version)}")

  # the kernel: out = a * b + sqrt(|a|) - 0.5, built by tinygrad's scheduler and code generator
  a_t, b_t = Tensor.empty(args.size, device=name), Tensor.empty(args.size, device=name)
  call = next(c for c in (a_t * b_t + a_t.abs().sqrt() - 0.5).schedule_linear().src if c.src[0].op is Ops.SINK)
  st = time.perf_counter()
  prg = to_program(call.src[0], dev.renderer)     # UOps -> SPIR-V (DEV=VULKAN:GLSL: GLSL -> glslang), with its renderer's compiler
  t_compile = time.perf_counter() - st
  st = time.perf_counter()
  runtime = dev.runtime(prg.to_elf())             # shader module + compute pipeline
  t_pipeline = time.perf_counter() - st

  rng = np.random.default_rng(0)
  a, b = rng.standard_normal(args.size, dtype=np.float32), rng.uniform(-3, 3, args.size).astype(np.float32)
  out_buf = Buffer(name, args.size, dtypes.float32).allocate()
  a_buf, b_buf = (Buffer(name, args.size, dtypes.float32, initial_value=x.tobytes()) for x in (a, b))   # host -> device
  global_size, local_size = prg.arg.launch_dims({})
  runs = []   # the first dispatch also pays for drivers that compile the pipeline lazily (lavapipe does)
  for _ in range(2):
    st = time.perf_counter()
    gpu_s = runtime(out_buf._buf, a_buf._buf, b_buf._buf, global_size=global_size, local_size=local_size, wait=True)
    runs.append((gpu_s, time.perf_counter() - st))
  out = np.frombuffer(out_buf.as_memoryview(), dtype=np.float32)                                       # device -> host

  ref = a * b + np.sqrt(np.abs(a)) - np.float32(0.5)
  bad = np.flatnonzero(~np.isclose(out, ref, rtol=1e-5, atol=1e-6))
  print(f"kernel   {prg.arg.function_name}: {args.size} elements, local size {local_size}, {global_size} workgroups")
  how = 'GLSL -> glslang' if 'GLSL' in type(dev.renderer).__name__ else 'SPIR-V assembly -> in-process assembler'
  print(f"compile  {t_compile*1e3:8.2f} ms  (tinygrad codegen + {how})")
  print(f"pipeline {t_pipeline*1e3:8.2f} ms  (vkCreateShaderModule + vkCreateComputePipelines)")
  for what, (gpu_s, wall_s) in zip(("first run", "run"), runs):
    print(f"{what:9s}{gpu_s*1e3:8.3f} ms GPU  ({wall_s*1e3:.3f} ms wall, record to fence)")
  if len(bad):
    print(f"MISMATCH in {len(bad)} of {args.size} elements, first at {bad[0]}: got {out[bad[0]]}, expected {ref[bad[0]]}")
    return 1
  print(f"OK: all {args.size} elements match numpy")
  return 0

if __name__ == "__main__": sys.exit(main())
