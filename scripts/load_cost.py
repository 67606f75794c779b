#!/usr/bin/env python3
"""What one storage-buffer load costs a SIMD vector of invocations on this Vulkan driver, inside a loop and in straight-line code,
at an address every lane shares (uniform) or one per lane; beside an FMA and a storage texel buffer load (imageLoad of R32_UINT).
Explains the "texel" path (renderer/plan.py texel_slots): on llvmpipe (lavapipe) a storage-buffer load is a scalar load per
lane, each behind a branch and a bounds check (gallivm emit_load_mem), except a uniform one outside control flow; a texel
buffer load is one gather, about 10x cheaper.

  python scripts/load_cost.py [--groups 64]
"""
import argparse
from tinygrad import Device, dtypes
from tinygrad.device import Buffer, TinyELF
from tinygrad.helpers import Target
from tinygrad_vk.compiler import GLSLCompiler

N, LANES = 1 << 20, 8    # floats read; invocations per workgroup (one llvmpipe SIMD vector)

def run(body:str, groups:int, reps:int=5) -> float:
  """Device seconds of `groups` workgroups running body (which adds into acc; `l` is the lane; `a` a storage buffer, `t` a texel
  buffer over the same floats), the fastest of reps."""
  decl = "layout(set=0, binding=1, r32ui) uniform readonly uimageBuffer t;" if "imageLoad" in body else \
         "layout(set=0, binding=1, std430) readonly buffer B1 { float a[]; };"
  src = f"""#version 450
layout(local_size_x={LANES}) in;
layout(set=0, binding=0, std430) buffer B0 {{ float out_[]; }};
{decl}
void main() {{ int l = int(gl_LocalInvocationID.x), g = int(gl_WorkGroupID.x); float acc = 0.0;
{body}
out_[g * {LANES} + l] = acc; }}"""
  out, a = Buffer("VULKAN", groups * LANES, dtypes.float).allocate(), Buffer("VULKAN", N, dtypes.float).allocate()
  sig = ((None, 0, dtypes.float, ()), (None, 1, dtypes.float, ()))
  prg = Device["VULKAN"].runtime(TinyELF(GLSLCompiler().compile(src), "load_cost", Target("VULKAN"), sig))
  return min(prg(out._buf, a._buf, global_size=(groups, 1, 1), local_size=(LANES, 1, 1), wait=True) for _ in range(reps))

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--groups", type=int, default=64)
  g, n = ap.parse_args().groups, 1024
  cases = [("loop: uniform load", f"for (int k = 0; k < {n}; k++) acc += a[k];"),
           ("loop: per-lane load", f"for (int k = 0; k < {n}; k++) acc += a[k * {LANES} + l];"),
           ("loop: FMA, no load", f"for (int k = 0; k < {n}; k++) acc = acc * 1.0001 + float(k);"),
           ("straight: uniform load", "".join(f"acc += a[{k}];" for k in range(n))),
           ("straight: per-lane load", "".join(f"acc += a[{k * LANES} + l];" for k in range(n))),
           ("straight: FMA", "".join(f"acc = acc * 1.0001 + {k}.0;" for k in range(n)))]
  if "texel" in Device["VULKAN"].caps:
    cases += [("loop: texel, uniform", f"for (int k = 0; k < {n}; k++) acc += uintBitsToFloat(imageLoad(t, k).x);"),
              ("loop: texel, per-lane", f"for (int k = 0; k < {n}; k++) acc += uintBitsToFloat(imageLoad(t, k * {LANES} + l).x);")]
  print(f"{Device['VULKAN'].phys.name}: {g} workgroups of {LANES}, {n} per invocation; ns per vector and step")
  for name, body in cases: print(f"  {name:<26} {run(body, g) / g / n * 1e9:7.2f}")

if __name__ == "__main__": main()
