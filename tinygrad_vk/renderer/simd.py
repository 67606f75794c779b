"""Fill a SIMD vector with invocations on a driver that packs them along local x only (Mesa llvmpipe), for every renderer.

llvmpipe runs a workgroup's invocations one SIMD vector of MIN_LANES (8 on AVX2) at a time, taken along x: a workgroup of
local size (2, 16) runs 16 vectors with 2 live lanes each, 4x the work of (16, 2) (scripts/load_cost.py shows what a vector
costs). tinygrad shapes local dims for GPUs, where x may be as small as 2. `pm_fill_x` (for the renderer's `extra_matcher`, after
hoist.py and loops.py, which reason about the kernel's own local dims) merges all local dims into x when x alone is narrower than a
vector: x keeps moving fastest (lidx0 = x % L0, lidx1 = x / L0 % L1, lidx2 = x / (L0 L1)), so the invocations and their shared memory
are the same, only their packing changes. Only on devices with the "fillx" flag (llvmpipe); `VULKAN_DISABLE=fillx` turns it off.
"""
from __future__ import annotations
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher
from tinygrad.helpers import prod
from tinygrad_vk.renderer.loops import MIN_LANES, _int, _special, _rebuild

def fill_x(sink:UOp) -> UOp|None:
  loc = {u.arg: u for u in sink.toposort() if u.op is Ops.SPECIAL and u.arg[0] == "l"}
  sizes = [int(loc[f"lidx{d}"].src[0].vmax) if f"lidx{d}" in loc else 1 for d in range(3)]
  if sizes[0] >= MIN_LANES or prod(sizes) == sizes[0]: return None
  x, sub, stride = _special("lidx0", prod(sizes)), {}, 1
  for d in range(3):
    if f"lidx{d}" not in loc: continue
    i = x.alu(Ops.CDIV, _int(stride)) if stride > 1 else x
    sub[loc[f"lidx{d}"]] = i.alu(Ops.CMOD, _int(sizes[d])) if stride * sizes[d] < prod(sizes) else i
    stride *= sizes[d]
  return _rebuild(sink, sub)

pm_fill_x = PatternMatcher([
  (UPat(Ops.SINK, name="sink"), lambda ctx, sink: fill_x(sink) if "fillx" in ctx.caps else None),
])
