"""Bigger register tiles for reductions on a driver whose loads are dearer than its arithmetic (llvmpipe), for every renderer.

tinygrad's heuristic stops at 4x4 outputs per invocation and its optimizer has no hook for a backend's tile size. On llvmpipe a
load costs a SIMD vector several FMAs, so a matmul is bound by its loads per output, which an 8x8 tile halves (docs/capabilities.md
"register tiles"). `tile` (last of SINK_PASSES) makes an invocation (gidx_d = 2x + c) do the work of two, c = 0 and
1, in one body: loads that do not depend on gidx_d become one (the graph is hash-consed), each copy has its own REG accumulators
and both share each loop (one END). It doubles along the launch dim whose loads the copies share most, while the accumulators fit
TILE_REGS and enough workgroups stay for the driver's threads, in kernels of TILE_MIN_WORK accumulator updates or more. The code after
the loops that uses the accumulators (an epilogue fused in, a GELU of each output) would be doubled too, for no fewer loads: where it
outweighs the loop bodies it runs once, in a loop over the copies, each copy's accumulators picked by the loop index. Only with
the "tile" flag (VULKAN_DISABLE=tile); kernels with shared memory or barriers are left alone: their workgroups share memory by gidx.
"""
from __future__ import annotations
from dataclasses import replace
from tinygrad.uop.ops import Ops, UOp, AxisType
from tinygrad.dtype import AddrSpace, dtypes
from tinygrad.helpers import prod
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.passes.loops import iconst, special, passes_bound, next_axis

# accumulator elements per invocation at most (an 8x8 tile): tinygrad's eager launch walks the whole program's UOps on every call
# (lower_and_compile's substitute), so a bigger kernel costs each call more host time
TILE_REGS = 64
MAX_UOPS = 6000      # a kernel this big is not doubled again: compile time grows with it
# a kernel of fewer accumulator updates than this (bound: invocations x loop passes x accumulators) is not doubled: its first launch would
# pay more (tinygrad's linearizer and the driver's compile on a kernel up to 4x the size) than a training run wins back. BERT tiny on
# lavapipe 22.3, cold: first step 20.5 -> 17.6 s, steady step 0.256 -> 0.246 s (noise); at 1 << 24 the small attention matmuls
# lose their tiles and the steady step gets 10% slower (scripts/train_timing.py). That holds where a TinyJit graph replays the kernel
# (Caps.jit). Launched eagerly, a kernel costs tinygrad host time at every launch in proportion to its UOps (lower_and_compile
# substitutes each call's program) and is launched a few times: LLaMA's 64-token prefill (512 wide, 8 layers; matmuls of 2^22 to
# 2^23.4 updates) ran 683-775 ms warm tiled, 561-633 untiled (its kernels 242 against 283 ms), and its cold first prefill took
# 3.95-4.01 s against 3.02-3.03 (paired; tinygrad CPU 3.0). GEMM 512 (2^25) still wins tiled eagerly (21.1 -> 24.4 GFLOP/s)
TILE_MIN_WORK = {0: 1 << 25, 1: 1 << 22}   # by Caps.jit
def _flat(srcs) -> tuple[UOp, ...]: return tuple(dict.fromkeys(x for s in srcs for x in (s.src if s.op is Ops.GROUP else (s,))))
def coarsen(sink:UOp, g:UOp, regs:list[UOp]) -> UOp:
  """Each invocation does the work of two along g: gidx = 2 * gidx' + c for c = 0, 1."""
  half = special(g.arg, int(g.src[0].arg) // 2)
  base = max(r.arg.slot for r in regs) + 1
  fresh = {r: r.replace(arg=replace(r.arg, slot=base + i)) for i, r in enumerate(regs)}
  topo = list(sink.toposort())
  dep: dict[UOp, bool] = {}
  for u in topo: dep[u] = u is g or u in fresh or any(dep[s] for s in u.src)
  new: list[dict[UOp, UOp]] = [{}, {}]
  for u in topo:
    if u is sink: break
    for c in (0, 1):
      if not dep[u]: new[c][u] = u
      elif u is g: new[c][u] = half * iconst(2) + iconst(c) if c else half * iconst(2)
      elif u in fresh: new[c][u] = fresh[u] if c else u
      elif u.op is Ops.END:   # both copies' bodies close the same loop
        new[c][u] = new[0][u] if c else u.replace(src=(UOp(Ops.GROUP, dtypes.void, _flat(new[k][u.src[0]] for k in (0, 1))),
                                                       *(new[0][s] for s in u.src[1:])))
      # a gated load whose gate the copy pins false is its alternative: its index may now lie wholly outside the buffer, which
      # tinygrad cannot size (a matmul fused with a pad: copy 1 of the rows past the padding read nothing)
      elif u.op is Ops.LOAD and len(u.src) == 3 and not new[c][u.src[2]].vmax: new[c][u] = new[c][u.src[1]]
      else: new[c][u] = u.replace(src=tuple(new[c][s] for s in u.src))
  stores = _flat(sink.src)
  after, outer = _epilogue(topo, regs, dep)
  if not after: return sink.replace(src=(UOp(Ops.GROUP, dtypes.void, _flat(new[c][s] for c in (0, 1) for s in stores)),))
  # the epilogue once, in a loop over the copies: copy c's accumulators picked by c, its launch index 2x + c
  c = UOp.range(iconst(2), next_axis(topo), AxisType.LOOP, dtype=dtypes.int)
  first = c.alu(Ops.CMPLT, iconst(1))
  epi: dict[UOp, UOp] = {}
  for u in topo:
    if u is sink: break
    if _final(u, regs): epi[u] = first.where(new[0][u], new[1][u])
    elif u is g: epi[u] = half * iconst(2) + c
    elif u in after or (dep[u] and u not in fresh and u.ranges.keys() <= outer): epi[u] = u.replace(src=tuple(epi.get(s, s) for s in u.src))
  copied = _flat(new[k][s] for k in (0, 1) for s in stores if s not in after)
  return sink.replace(src=(UOp(Ops.GROUP, dtypes.void, (*copied, UOp(Ops.GROUP, dtypes.void, tuple(epi[s] for s in stores if s in after)).end(c))),))

def _final(u:UOp, regs:list[UOp]) -> bool:
  """u reads an accumulator's final value: a load of a REG buffer outside every loop."""
  return u.op is Ops.LOAD and not u.ranges and u.src[0].op is Ops.INDEX and u.src[0].src[0].buf_uop in regs
def _epilogue(topo:list[UOp], regs:list[UOp], dep:dict[UOp, bool]) -> tuple[set[UOp], set[UOp]]:
  """What a kernel computes from its accumulators' final values (their loads after the loops, and all that uses them), and the loops
  it is in (an earlier doubling's), where the code after the reduction loops outweighs their bodies and writes no accumulator (a
  second reduction over the first's result): else nothing."""
  after: set[UOp] = set()
  for u in topo:
    if u.op is Ops.SINK: break
    if _final(u, regs) or any(s in after for s in u.src): after.add(u)
  if not after or any(u.op is Ops.STORE and u.src[0].addrspace == AddrSpace.REG for u in after): return set(), set()
  outer = {r for u in after for r in u.ranges}
  # the loop bodies, and what they read (index math before them): doubled in any case
  loops = {u for u in topo if not u.ranges.keys() <= outer}
  for u in reversed(topo):
    if u in loops: loops.update(u.src)
  return (after, outer) if sum(1 for u in topo if (u in after or dep[u]) and u not in loops) > len(loops) else (set(), set())

def tile(sink:UOp, caps:Caps) -> UOp|None:
  topo = list(sink.toposort())
  if len(topo) > MAX_UOPS or any(u.op is Ops.BARRIER or (u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL) for u in topo): return None
  regs = [u for u in topo if u.op is Ops.BUFFER and u.addrspace == AddrSpace.REG]
  if not regs or 2 * sum(r.max_numel() for r in regs) > TILE_REGS: return None
  glob = [u for u in topo if u.op is Ops.SPECIAL and u.arg.startswith("gidx")]
  groups = prod(int(u.src[0].vmax) for u in glob)
  lanes = prod(int(u.src[0].vmax) for u in topo if u.op is Ops.SPECIAL and u.arg.startswith("lidx"))
  if groups * lanes * passes_bound(topo) * sum(r.max_numel() for r in regs) < TILE_MIN_WORK[caps.jit]: return None
  # the global loads inside loops, a vector load counted by its lanes
  in_loop: dict[UOp, bool] = {}
  for u in topo: in_loop[u] = u.op is Ops.RANGE or any(in_loop[s] for s in u.src)
  loads = [u for u in topo if u.op is Ops.LOAD and in_loop[u.src[0]] and u.src[0].addrspace == AddrSpace.GLOBAL]
  best, shared = None, 0
  for g in glob:
    if g.src[0].op is not Ops.CONST or int(g.src[0].arg) % 2 or groups // 2 < 2 * max(caps.threads, 1): continue
    # a loop whose trip count depends on g would be two loops, not one shared by both copies; a store gated by g might not be
    # made at all by one copy
    if any(u.op is Ops.RANGE and g in u.backward_slice or u.op is Ops.STORE and len(u.src) == 3 and g in u.src[2].backward_slice
           for u in topo): continue
    if (n := sum(l.src[0].max_numel() for l in loads if g not in l.backward_slice)) > shared: best, shared = g, n
  return None if best is None else coarsen(sink, best, regs)
