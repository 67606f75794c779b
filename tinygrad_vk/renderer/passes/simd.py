"""Fill a SIMD vector with invocations on a driver that packs them along local x only (Mesa llvmpipe), for every renderer.

llvmpipe runs a workgroup one SIMD vector of MIN_LANES (8 on AVX2) invocations at a time, taken along x: local size (2, 16) runs
16 vectors of 2 live lanes, 4x the work of (16, 2) (scripts/load_cost.py). tinygrad shapes local dims for GPUs, where x may be 2.
`fill_x` (SINK_PASSES, after hoist.py and loops.py, which reason about the kernel's own local dims) merges all local
dims into x when x is narrower than a vector, x still moving fastest: the invocations and their shared memory stay the same, only
their packing changes. When even all of them are fewer than a vector and the kernel shares no memory (independent invocations),
f neighbouring workgroups along gidx0 join x too (f divides their number; where the "wide" flag is on, widen joins them instead).
Only with the "fillx" flag (VULKAN_DISABLE=fillx).

`lanes_x` (before fill_x) picks which local dim runs along x: the one along which the fewest memory accesses scatter. A vector of
8 lanes whose addresses are a cache line or more apart costs 8 cache lines (and often 8 pages) per gather, where neighbouring or
equal addresses cost one or two. tinygrad puts the output's rows on local x in a matmul and a conv (its local dims follow axis
order), so A's reads scatter across rows while B's are one address; with the columns on x B's are neighbours and A's one address:
GEMM 1024 ran 1.02-1.08x and conv2d b8 32->64 3x3 64x64 1.02-1.03x faster, paired. Invocations are only renumbered within their workgroup:
the same set runs, with its shared memory and barriers. Only with the "lanex" flag (VULKAN_DISABLE=lanex).

`widen` (last of SINK_PASSES, on the kernel the others made) joins f neighbouring workgroups of a kernel that shares no memory along
x, up to WIDE invocations: llvmpipe takes each workgroup from its thread pool as a task of its own, ~50 ns apiece on Mesa 22.3 here,
which an elementwise kernel of 32 invocations a workgroup pays again and again (tinygrad's E_40696_32_3, BERT's zero_grad and LAMB
updates of its 30522x128 embedding: 4.6 -> 2.8 ms). When local x is whole vectors, every vector keeps its lanes (each lies in one
old workgroup), so only the tasks change. Where no divisor of the workgroup count comes within half of WIDE, the count is rounded
up: the extra invocations compute with the last workgroup's index and store nothing (E_30001_32_4: 3.0 -> 1.9 ms; tinygrad gives a
1-D kernel of 976705 workgroups no local dims, 8x the vectors: 57 -> 2.6 ms; BERT's decoder logits r_5_5087_2_2_3_4_32_4, half-empty
vectors of 4 invocations, 5087 x 5 workgroups: 33 -> 17 ms), except in a kernel of fewer than ROUND_MIN invocations (the whole grid)
or with a buffer reached in pieces. Only with the "wide" flag (VULKAN_DISABLE=wide); workgroups enough for the
driver's threads stay.
"""
from __future__ import annotations
from tinygrad.uop.ops import Ops, UOp
from tinygrad.dtype import AddrSpace
from tinygrad.helpers import prod, ceildiv
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.abi import pieced, numel
from tinygrad_vk.renderer.passes.loops import MIN_LANES, iconst, special, dims, unflatten

LINE = 64   # bytes: accesses of neighbouring lanes this far apart touch a cache line each
def _moves(idx:UOp, l:UOp, dep:dict[UOp, frozenset[UOp]]) -> int|None:
  """Elements idx moves when local id l grows by one: its coefficient among idx's terms (None: l sits deeper in some term)."""
  out = 0
  for t in idx.split_uop(Ops.ADD):
    if t is l: out += 1
    elif t.op is Ops.MUL and l in t.src and (c := t.src[1] if t.src[0] is l else t.src[0]).op is Ops.CONST: out += int(c.arg)
    elif t.op is Ops.SHL and t.src[0] is l and t.src[1].op is Ops.CONST: out += 1 << int(t.src[1].arg)
    elif l in dep.get(t, frozenset()): return None
  return out

def scatter(topo:list[UOp], loc:dict[str, UOp]) -> dict[str, int]:
  """Per local dim, the global accesses whose lanes along it lie a cache line or more apart (or at no constant distance), a vector
  access counted by its lanes and one inside a loop 16 times."""
  in_loop: dict[UOp, bool] = {}
  dep: dict[UOp, frozenset[UOp]] = {}   # the local ids each UOp reads, found in one walk
  ids, none = frozenset(loc.values()), frozenset[UOp]()
  for u in topo:
    in_loop[u] = u.op is Ops.RANGE or any(in_loop[s] for s in u.src)
    dep[u] = frozenset((u,)) if u in ids else none.union(*(dep[s] for s in u.src)) if u.src else none
  out = dict.fromkeys(loc, 0)
  for u in topo:
    if u.op not in (Ops.LOAD, Ops.STORE) or (b := u.src[0]).op not in (Ops.INDEX, Ops.SHRINK) or b.src[0].addrspace != AddrSpace.GLOBAL: continue
    # SHRINK(buffer, index, n): a vector of n lanes (its shape's size, read from the CONST: max_numel would build the shape)
    lanes = int(b.src[2].arg) if b.op is Ops.SHRINK and len(b.src) > 2 and b.src[2].op is Ops.CONST else 1
    idx, weight = b.src[1], lanes * (16 if in_loop[b] else 1)
    for name, l in loc.items():
      if l in dep[idx] and ((m := _moves(idx, l, dep)) is None or abs(m) * b.dtype.itemsize >= LINE): out[name] += weight
  return out

def lanes_x(sink:UOp, caps:Caps) -> UOp|None:
  topo = list(sink.toposort())
  loc, sizes = dims(topo, "l")
  # reductions only (loops): where the choice was measured, and the pass's walk costs compile time on every other kernel too
  if "lidx0" not in loc or sum(s > 1 for s in sizes) < 2 or not any(u.op is Ops.RANGE for u in topo): return None
  cost = scatter(topo, loc)
  best = min((d for d in range(1, 3) if f"lidx{d}" in loc and sizes[d] <= caps.wgsize[0] and sizes[0] <= caps.wgsize[d]),
             key=lambda d: cost[f"lidx{d}"], default=None)
  if best is None or cost[f"lidx{best}"] >= cost["lidx0"]: return None
  # through placeholder names: a new SPECIAL of the same name and size is the old one (UOps are hash-consed)
  tmp = {loc["lidx0"]: special("lanes_x0", sizes[0]), loc[f"lidx{best}"]: special("lanes_x1", sizes[best])}
  out = sink.substitute(tmp, walk=True)
  return out.substitute({tmp[loc["lidx0"]]: special(f"lidx{best}", sizes[0]), tmp[loc[f"lidx{best}"]]: special("lidx0", sizes[best])}, walk=True)

def _independent(topo) -> bool: return not any(u.op is Ops.BARRIER or (u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL) for u in topo)
def _groups(topo) -> tuple[UOp|None, int]:
  g = next((u for u in topo if u.op is Ops.SPECIAL and u.arg == "gidx0"), None)
  return g, int(g.src[0].vmax) if g is not None and g.src[0].vmin == g.src[0].vmax else 0
def _join(sink:UOp, loc:dict[str, UOp], sizes:list[int], g:UOp|None, G:int, f:int) -> UOp:
  """The local dims flattened into x (dim 0 fastest), and f neighbouring workgroups along gidx0 with them (rounded up where f does
  not divide G: the invocations past it take the last workgroup's index and every store is gated off for them)."""
  L = prod(sizes)
  x = special("lidx0", L * f)
  sub = unflatten(x, loc, "l", sizes, L * f)
  if f == 1 or g is None: return sink.substitute(sub, walk=True)
  raw = special("gidx0", ceildiv(G, f)) * iconst(f) + (x.alu(Ops.CDIV, iconst(L)) if L > 1 else x)
  if G % f == 0: return sink.substitute({**sub, g: raw}, walk=True)
  live = raw < iconst(G)
  out = sink.substitute({**sub, g: live.where(raw, iconst(G - 1))}, walk=True)
  return out.substitute({u: u.replace(src=(*u.src[:2], u.src[2] & live if len(u.src) > 2 else live))
                         for u in out.toposort() if u.op is Ops.STORE}, walk=True)

def fill_x(sink:UOp, caps:Caps) -> UOp|None:
  topo = sink.toposort()
  loc, sizes = dims(topo, "l")
  if sizes[0] >= MIN_LANES: return None
  L, f = prod(sizes), 1
  g, G = _groups(topo)
  # workgroups are joined once, by widen where it runs (one join: nested ones would add index arithmetic)
  if L < MIN_LANES and G and _independent(topo) and "wide" not in caps:
    f = next((f for f in range(ceildiv(MIN_LANES, L), G + 1) if G % f == 0 and L * f <= min(caps.wgsize[0], caps.wginv)), 1)
  if f == 1 and L == sizes[0]: return None
  return _join(sink, loc, sizes, g, G, f)

WIDE = 256   # invocations a workgroup: a zero fill as E_40696_32_3 ran 4.6 ms at 32, 3.2 at 64, 3.0 at 128, 2.8 at 256
def enough_groups(caps:Caps) -> int: return 4 * max(caps.threads, 1)   # workgroups a kernel keeps for the driver's threads
ROUND_MIN = 1 << 16   # invocations a kernel needs before its workgroups are rounded up (~2 us of tasks to win below)
def widen(sink:UOp, caps:Caps) -> UOp|None:
  topo = sink.toposort()
  loc, sizes = dims(topo, "l")
  g, G = _groups(topo)
  L, top = prod(sizes), min(WIDE, caps.wgsize[0], caps.wginv)
  # a vector's lanes stay where they were only when x is whole vectors (or all of the workgroup: fill_x ran first)
  if not G or L * 2 > top or (sizes[0] % MIN_LANES and L != sizes[0]) or not _independent(topo): return None
  most = min(top // L, G // enough_groups(caps))   # joined at most: within the aim, workgroups enough for the driver's threads
  f = max((f for f in range(2, most + 1) if G % f == 0), default=1)
  if L * f < MIN_LANES: f = next((f for f in range(2, top // L + 1) if G % f == 0 and L * f >= MIN_LANES), f)   # whole vectors first
  # no divisor within half of the aim: the count rounded up, in a kernel big enough to pay for the gates (a small one keeps its
  # stores ungated, as tinygrad's tests expect) and with no buffer reached in pieces, whose windows need each index affine in gidx0
  if 2 * L * f <= top and most > f and L * prod(dims(topo, "g")[1]) >= ROUND_MIN and \
     not any(pieced(caps, u.dtype.itemsize, numel(u._shape)) for u in topo if u.op is Ops.PARAM and u.addrspace == AddrSpace.GLOBAL):
    f = most
  return None if f == 1 else _join(sink, loc, sizes, g, G, f)
