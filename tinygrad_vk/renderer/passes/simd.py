"""Fill a SIMD vector with invocations on a driver that packs them along local x only (Mesa llvmpipe), for every renderer.

llvmpipe runs a workgroup one SIMD vector of MIN_LANES (8 on AVX2) invocations at a time, taken along x: local size (2, 16) runs
16 vectors of 2 live lanes, 4x the work of (16, 2) (scripts/load_cost.py). tinygrad shapes local dims for GPUs, where x may be 2.
`fill_x` (SINK_PASSES, after hoist.py and loops.py, which reason about the kernel's own local dims) merges all local
dims into x when x is narrower than a vector, x still moving fastest: the invocations and their shared memory stay the same, only
their packing changes. When even all of them are fewer than a vector and the kernel shares no memory (independent invocations),
f neighbouring workgroups along gidx0 join x too (f divides their number). Only with the "fillx" flag (VULKAN_DISABLE=fillx).
"""
from __future__ import annotations
from tinygrad.uop.ops import Ops, UOp
from tinygrad.dtype import AddrSpace
from tinygrad.helpers import prod, ceildiv
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.passes.loops import MIN_LANES, iconst, special, dims, unflatten

def fill_x(sink:UOp, caps:Caps) -> UOp|None:
  topo = sink.toposort()
  loc, sizes = dims(topo, "l")
  if sizes[0] >= MIN_LANES: return None
  L, f = prod(sizes), 1
  g = next((u for u in topo if u.op is Ops.SPECIAL and u.arg == "gidx0"), None)
  if L < MIN_LANES and g is not None and g.src[0].vmin == g.src[0].vmax and \
     not any(u.op is Ops.BARRIER or (u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL) for u in topo):
    G = int(g.src[0].vmax)
    f = next((f for f in range(ceildiv(MIN_LANES, L), G + 1) if G % f == 0 and L * f <= min(caps.wgsize[0], caps.wginv)), 1)
  if f == 1 and L == sizes[0]: return None
  x = special("lidx0", L * f)
  sub = unflatten(x, loc, "l", sizes, L * f)
  if f > 1 and g is not None: sub[g] = special("gidx0", int(g.src[0].vmax) // f) * iconst(f) + (x.alu(Ops.CDIV, iconst(L)) if L > 1 else x)
  return sink.substitute(sub, walk=True)
