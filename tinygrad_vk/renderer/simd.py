"""Fill a SIMD vector with invocations on a driver that packs them along local x only (Mesa llvmpipe), for every renderer.

llvmpipe runs a workgroup's invocations one SIMD vector of MIN_LANES (8 on AVX2) at a time, taken along x: a workgroup of
local size (2, 16) runs 16 vectors with 2 live lanes each, 4x the work of (16, 2) (scripts/load_cost.py shows what a vector
costs). tinygrad shapes local dims for GPUs, where x may be as small as 2. `fill_x` (in kernel.py's SINK_PASSES, after
hoist.py and loops.py, which reason about the kernel's own local dims) merges all local dims into x when x alone is narrower than a
vector: x keeps moving fastest (lidx0 = x % L0, lidx1 = x / L0 % L1, lidx2 = x / (L0 L1)), so the invocations and their shared memory
are the same, only their packing changes. When all of them are still fewer than a vector and the kernel shares no memory (its
invocations are independent), f neighbouring workgroups along gidx0 join x too (f divides their number). Only on devices with the
"fillx" flag (llvmpipe); `VULKAN_DISABLE=fillx` turns it off.
"""
from __future__ import annotations
from tinygrad.uop.ops import Ops, UOp
from tinygrad.dtype import AddrSpace
from tinygrad.helpers import prod, ceildiv
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.loops import MIN_LANES, iconst, special, rebuild

def fill_x(sink:UOp, caps:Caps) -> UOp|None:
  topo = sink.toposort()
  loc = {u.arg: u for u in topo if u.op is Ops.SPECIAL and u.arg[0] == "l"}
  sizes = [int(loc[f"lidx{d}"].src[0].vmax) if f"lidx{d}" in loc else 1 for d in range(3)]
  L = prod(sizes)
  if sizes[0] >= MIN_LANES: return None
  # too few invocations even merged: a kernel whose invocations share no memory takes f of its workgroups along x into one
  g = next((u for u in topo if u.op is Ops.SPECIAL and u.arg == "gidx0"), None)
  f = 1
  if L < MIN_LANES and g is not None and g.src[0].vmin == g.src[0].vmax and \
     not any(u.op is Ops.BARRIER or (u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL) for u in topo):
    G = int(g.src[0].vmax)
    f = next((f for f in range(ceildiv(MIN_LANES, L), G + 1) if G % f == 0 and L * f <= min(caps.wgsize[0], caps.wginv)), 1)
  if f == 1 and L == sizes[0]: return None
  x, sub, stride = special("lidx0", L * f), {}, 1
  for d in range(3):
    if f"lidx{d}" not in loc: continue
    i = x.alu(Ops.CDIV, iconst(stride)) if stride > 1 else x
    sub[loc[f"lidx{d}"]] = i.alu(Ops.CMOD, iconst(sizes[d])) if stride * sizes[d] < L * f else i
    stride *= sizes[d]
  if f > 1 and g is not None: sub[g] = special("gidx0", int(g.src[0].vmax) // f) * iconst(f) + (x.alu(Ops.CDIV, iconst(L)) if L > 1 else x)
  return rebuild(sink, sub)
