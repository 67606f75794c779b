"""Keep every kernel under a driver's budget of loop passes (Mesa llvmpipe's loop limiter), for every renderer.

llvmpipe (lavapipe) runs a compute shader one SIMD vector of invocations (8 lanes along x) at a time and gives each vector one
counter, gallivm's LP_MAX_TGSI_LOOP_ITERATIONS = 65535: every pass through the end of any loop decrements it (lp_exec_endloop),
and once it is 0 every loop exits after its current pass, so a longer reduction is silently cut short. Measured on Mesa 22.3
(tests/test_loops.py): a loop of n iterations costs n+1 passes (the pass that leaves it counts), the loops of an invocation add
up, a vector pays for its slowest lane, and the counter belongs to the vector, not the workgroup: more lanes means more budget.

Two entry points, used by both renderers (the renderer is the ctx: `caps`, `local_max`, `shared_max`):
  * `pm_loop_budget`, for the renderer's `extra_matcher`: a kernel that may run over `caps.maxloop` passes gets its long
    reduction loops spread over L more invocations of the workgroup (local x becomes x*L). Lane j of the L runs iterations j,
    j+L, j+2L, ... into its own accumulators, the partials meet in shared memory, every lane combines them (same values on every
    lane from there on) and only lane 0 stores. It is tinygrad's GROUP reduction, applied to the final UOps because tinygrad's
    optimizer has no hook for a loop budget, and it needs no divisibility: a lane's trip count is ceil((N - j) / L).
  * `check_loop_budget`, for `render`: counts the passes of the linearized kernel exactly and refuses (CompileError) one still
    over the budget, so no kernel ever runs cut short.
What cannot be spread is refused with the reason: a long loop that is not a reduction into registers (it stores to memory,
touches shared memory or has a barrier), or a reduction needing more than maxComputeWorkGroupInvocations x budget passes.
`VULKAN_DISABLE=spread` turns spreading off (over-budget kernels are then refused).
"""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher, AxisType, identity_element
from tinygrad.dtype import dtypes, AddrSpace, DType
from tinygrad.device import CompileError
from tinygrad.helpers import DEBUG, prod

MIN_LANES = 8          # one llvmpipe SIMD vector: fewer lanes along x would leave vector lanes idle
UNROLL_COMBINE = 64    # partials (accumulator elements x lanes) combined in straight-line code rather than a loop

@dataclass(frozen=True)
class Loop:
  rng: UOp                  # the RANGE
  end: UOp                  # the END that closes it
  outer: tuple[UOp, ...]    # the RANGEs it runs inside

@dataclass(frozen=True)
class Acc:
  buf: UOp                  # the REG accumulator
  op: Ops                   # how iterations combine: ADD, MUL, MAX, OR, AND
  exits: tuple[UOp, ...]    # AFTER(buf, ...END...) nodes: where the value is read once the loop is done

def _trip(r:UOp) -> int: return int(r.src[0].vmax)
def _counted(r:UOp) -> bool: return r.op is Ops.RANGE and r.dtype != dtypes.void   # void RANGEs are unbounded loops: not counted

def loop_passes(uops:list[UOp]) -> int:
  """The passes one invocation of the linearized kernel makes through loop ends, the leaving pass of each loop included."""
  total, mult = 0, [1]
  for u in uops:
    if _counted(u):
      total += mult[-1] * (_trip(u) + 1)
      mult.append(mult[-1] * _trip(u))
    elif u.op is Ops.END and _counted(u.src[1]): mult.pop()
  return total

def check_loop_budget(uops:list[UOp], budget:int, name:str) -> None:
  """Refuse a linearized kernel that would run over the budget (0: no budget)."""
  if budget and (n := loop_passes(uops)) > budget:
    raise CompileError(f"VULKAN: kernel {name} makes {n} loop passes per invocation, and this driver stops every loop of an invocation "
                       f"after {budget} in total (Mesa llvmpipe, gallivm LP_MAX_TGSI_LOOP_ITERATIONS); its long loops could not be spread "
                       "over the workgroup (VULKAN_DISABLE=spread?). Use a GPU driver or a smaller reduction.")

def find_loops(sink:UOp) -> list[Loop]:
  ends = {r: u for u in sink.toposort() if u.op is Ops.END for r in u.src[1:] if _counted(r)}
  @functools.cache
  def outer(r:UOp) -> frozenset[UOp]:
    # the loops still open where r ends, and (transitively) the loops those run in: a loop runs wherever its enclosing loop runs
    direct = [o for o in ends[r].ranges if _counted(o) and o in ends]
    return frozenset(direct).union(*(outer(o) for o in direct))
  return [Loop(r, e, tuple(outer(r))) for r, e in ends.items()]

def passes(loops:list[Loop], spread:set[UOp], lanes:int) -> int:
  """Upper bound of loop_passes once the loops in `spread` are spread over `lanes` lanes (each may add a combine loop of `lanes`)."""
  def t(r:UOp) -> int: return -(-_trip(r) // lanes) if r in spread else _trip(r)
  total = 0
  for l in loops:
    entries = prod(t(o) for o in l.outer)
    total += entries * (t(l.rng) + 1) + (entries * (lanes + 1) if l.rng in spread else 0)
  return total

def _is_load_of(u:UOp, idx:UOp) -> bool: return u.op is Ops.LOAD and u.src[0] is idx

def _update_op(st:UOp) -> Ops|None:
  """The reduction op of `acc[k] = acc[k] <op> x`, as tinygrad lowers REDUCE (MAX arrives decomposed to a WHERE)."""
  idx, val = st.src[0], st.src[1]
  if (val.op in (Ops.ADD, Ops.MUL, Ops.MAX) or (val.op in (Ops.OR, Ops.AND) and val.dtype == dtypes.bool)) and \
     any(_is_load_of(s, idx) for s in val.src): return val.op
  if val.op is Ops.WHERE and (c := val.src[0]).op is Ops.CMPLT and val.src[1] is c.src[1] and val.src[2] is c.src[0] and \
     any(_is_load_of(s, idx) for s in c.src): return Ops.MAX   # where(a<b, b, a) = max(a, b)
  return None

def spreadable(l:Loop, topo:list[UOp]) -> tuple[Acc, ...]|str:
  """The accumulators a loop leaves partial results in when it is spread over lanes, or why it cannot be spread."""
  if l.rng.arg[1] is not AxisType.REDUCE: return f"it is not a reduction (a {l.rng.arg[1].name} range)"
  inside = [u for u in topo if l.rng in u.ranges]
  if any(u.op is Ops.BARRIER or (u.op in (Ops.LOAD, Ops.STORE) and u.src[0].addrspace == AddrSpace.LOCAL) for u in inside):
    return "it uses shared memory"
  regs: dict[UOp, list[UOp]] = {}
  for st in (u for u in inside if u.op is Ops.STORE):
    if st.src[0].op is not Ops.INDEX or st.src[0].addrspace != AddrSpace.REG: return "it stores to memory"
    regs.setdefault(st.src[0].buf_uop, []).append(st)
  accs = []
  for buf, sts in regs.items():
    if all(l.rng in s.ranges for s in topo if s.op is Ops.STORE and s.src[0].op is Ops.INDEX and s.src[0].buf_uop is buf):
      continue   # set up inside the loop: private to each lane
    ops = {_update_op(st) for st in sts}
    if len(ops) != 1 or None in ops or len(sts[0].src) != 2 or any(st.src[0].src[1].vmin != st.src[0].src[1].vmax for st in sts):
      return "it updates a register that is not a reduction accumulator"
    exits = tuple(u for u in topo if u.op is Ops.AFTER and u.src[0] is buf and l.rng not in u.ranges and l.end in u.backward_slice)
    accs.append(Acc(buf, ops.pop(), exits))
  return tuple(accs)

def _int(x:int, dt:DType=dtypes.int) -> UOp: return UOp.const(x, dt)

def _combine(x:UOp, acc:Acc, smem:UOp, lane:UOp, base:UOp, lanes:int, axis:int) -> UOp:
  """Every lane's partials through shared memory into every lane's accumulator; `x` is the accumulator as the loop leaves it."""
  buf, n, dt = acc.buf, acc.buf.max_numel(), acc.buf.dtype
  slot = lambda k, j: (base + _int(k * lanes)) + j     # smem[base + k*lanes + j]: lane j's partial of accumulator element k
  ready = smem.after(*[smem.index(slot(k, lane)).store(x.index(_int(k)).load()) for k in range(n)])   # a barrier follows
  out = buf.after(ready)
  if n * lanes <= UNROLL_COMBINE:   # straight-line code: no loop passes
    return buf.after(*[out.index(_int(k)).store(functools.reduce(lambda a, b: a.alu(acc.op, b), [ready.index(slot(k, _int(j))).load()
                                                                                              for j in range(lanes)])) for k in range(n)])
  ident = UOp.const(identity_element(acc.op, dt) if acc.op in (Ops.ADD, Ops.MUL, Ops.MAX) else acc.op is Ops.AND, dt)
  j = UOp.range(_int(lanes), axis, AxisType.REDUCE, dtype=dtypes.int)
  cur = buf.after(*[out.index(_int(k)).store(ident) for k in range(n)], j)
  upd = [cur.index(_int(k)).store(cur.index(_int(k)).load().alu(acc.op, ready.index(slot(k, j)).load())) for k in range(n)]
  return buf.after(UOp.group(*upd).end(j))

@dataclass(frozen=True)
class Limits:
  budget: int               # loop passes per invocation (caps.maxloop)
  local_max: tuple[int, ...]
  invocations: int          # maxComputeWorkGroupInvocations
  shared_max: int           # bytes of shared memory

def plan(loops:list[Loop], cands:dict[UOp, tuple[Acc, ...]], budget:int, lanes_max:int, smem_left:int, smem_per_lane:dict[UOp, int]):
  """The fewest lanes (a power of two) and the loops to spread over them so the kernel fits the budget, or None."""
  nested = {l.rng: set(l.outer) for l in loops}
  for lanes in (1 << i for i in range(1, lanes_max.bit_length())):
    chosen: set[UOp] = set()
    while (cur := passes(loops, chosen, lanes)) > budget:
      # loops that are not nested in each other; a lane gets 2+ iterations (tinygrad's linearizer orders code by how often it
      # runs, so a loop of one iteration could take in code from around it)
      ok = [c for c in cands if c not in chosen and _trip(c) > lanes and not any(c in nested[o] or o in nested[c] for o in chosen)
            and sum(smem_per_lane[o] for o in chosen | {c}) * lanes <= smem_left]
      if (best := min(ok, key=lambda c: passes(loops, chosen | {c}, lanes), default=None)) is None or \
         passes(loops, chosen | {best}, lanes) >= cur: break
      chosen.add(best)
    else: return lanes, chosen
  return None

def fit_loop_budget(sink:UOp, lim:Limits, enabled:bool=True) -> UOp|None:
  """The kernel with long reductions spread over more lanes so it stays under the budget; None when it already fits."""
  loops = find_loops(sink)
  if not lim.budget or (need := passes(loops, set(), 1)) <= lim.budget: return None
  name = sink.arg.name if sink.arg is not None else "kernel"
  topo = sink.toposort()
  specials = {u.arg: u for u in topo if u.op is Ops.SPECIAL and u.arg[0] == "l"}
  sizes = [int(specials[f"lidx{d}"].src[0].vmax) if f"lidx{d}" in specials else 1 for d in range(3)]
  checked = {l.rng: spreadable(l, topo) for l in loops}
  cands = {r: a for r, a in checked.items() if not isinstance(a, str)}
  smem_used = sum(u.max_numel() * u.dtype.itemsize for u in topo if u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL)
  per_lane = {r: prod(sizes) * sum(a.buf.max_numel() * a.buf.dtype.itemsize for a in accs) for r, accs in cands.items()}
  lanes_max = min(lim.local_max[0] // sizes[0], lim.invocations // prod(sizes))
  found = plan(loops, cands, lim.budget, lanes_max, lim.shared_max - smem_used, per_lane) if enabled else None
  if found is None:
    worst = max(loops, key=lambda l: passes([x for x in loops if x.rng is l.rng or l.rng in x.outer], set(), 1))
    why = "spreading is off (VULKAN_DISABLE=spread)" if not enabled else \
      f"its longest loop ({_trip(worst.rng)} iterations) cannot be spread over the workgroup: {checked[worst.rng]}" \
      if isinstance(checked[worst.rng], str) else f"it needs more than {lanes_max} lanes (the workgroup limits) x {lim.budget} passes"
    raise CompileError(f"VULKAN: kernel {name} makes up to {need} loop passes per invocation, and this driver stops every loop of an invocation "
                       f"after {lim.budget} in total (Mesa llvmpipe, gallivm LP_MAX_TGSI_LOOP_ITERATIONS); {why}. Use a GPU driver, or split "
                       "the work into smaller reductions.")
  lanes, chosen = found
  # more lanes cost nothing while they fill llvmpipe's SIMD vector and fit the limits (the search stops at the first that fits)
  while sizes[0] * lanes < MIN_LANES and lanes * 2 <= lanes_max and all(_trip(c) > lanes * 2 for c in chosen) and \
        sum(per_lane[c] for c in chosen) * lanes * 2 <= lim.shared_max - smem_used:
    lanes *= 2
  if DEBUG >= 3: print(f"{name}: {need} loop passes over the budget of {lim.budget}: {len(chosen)} loop(s) spread over {lanes} lanes")
  return spread(sink, topo, [l for l in loops if l.rng in chosen], cands, specials, sizes, lanes)

def spread(sink:UOp, topo:list[UOp], chosen:list[Loop], cands:dict[UOp, tuple[Acc, ...]], specials:dict[str, UOp], sizes:list[int],
           lanes:int) -> UOp:
  # the lane is the fastest-moving part of local x, so neighbouring lanes read neighbouring elements
  if "lidx0" in specials:
    wide = UOp(Ops.SPECIAL, dtypes.int, (_int(sizes[0] * lanes),), "lidx0")
    lane, old_l0 = wide.alu(Ops.CMOD, _int(lanes)), wide.alu(Ops.CDIV, _int(lanes))
  else: lane, old_l0 = UOp(Ops.SPECIAL, dtypes.int, (_int(lanes),), "lidx0"), _int(0)
  l1, l2 = (specials[n] if n in specials else _int(0) for n in ("lidx1", "lidx2"))
  flat = old_l0 + _int(sizes[0]) * (l1 + _int(sizes[1]) * l2)       # the invocation's place among the original locals
  axis = max((u.arg[0] for u in topo if u.op is Ops.RANGE), default=0) + 1
  slot = max((u.arg.slot for u in topo if u.op is Ops.BUFFER), default=-1) + 1
  ctl: dict[UOp, UOp] = {}       # spread RANGE -> its new RANGE (where a loop is opened or closed)
  val: dict[UOp, UOp] = {}       # spread RANGE -> the iteration it stands for (where its value is used)
  exits: dict[UOp, tuple[Acc, UOp, UOp]] = {}
  for l in chosen:
    n, dt = l.rng.src[0], l.rng.dtype
    ln = lane if dt == dtypes.int else lane.cast(dt)
    trip = _int(int(n.vmax) // lanes, dt) if n.vmin == n.vmax and int(n.vmax) % lanes == 0 else \
      (n + _int(lanes - 1, dt) - ln).alu(Ops.CDIV, _int(lanes, dt))      # ceil((n - lane) / lanes), all terms >= 0
    ctl[l.rng] = UOp(Ops.RANGE, dt, (trip,), l.rng.arg)
    val[l.rng] = ctl[l.rng] * _int(lanes, dt) + ln
    for acc in cands[l.rng]:
      total = acc.buf.max_numel() * prod(sizes)
      smem = UOp.placeholder((total * lanes,), acc.buf.dtype, slot, AddrSpace.LOCAL)
      slot, axis = slot + 1, axis + 1
      for e in acc.exits: exits[e] = (acc, smem, flat * _int(acc.buf.max_numel() * lanes))
  lane0 = lane.alu(Ops.CMPEQ, _int(0))
  new: dict[UOp, UOp] = {}
  for u in topo:
    if u in ctl:
      new[u] = ctl[u]
      continue
    if u is specials.get("lidx0"):
      new[u] = old_l0
      continue
    src = tuple(ctl[s] if s in ctl and (u.op in (Ops.END, Ops.AFTER) and i > 0) else val[s] if s in val else new[s] for i, s in enumerate(u.src))
    nu = u.replace(src=src) if any(a is not b for a, b in zip(src, u.src)) else u
    if u.op is Ops.STORE and u.src[0].addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL):   # every lane holds the same value: one stores
      nu = nu.replace(src=nu.src[:2] + ((nu.src[2] & lane0) if len(nu.src) > 2 else lane0,))
    if u in exits:
      acc, smem, base = exits[u]
      nu, axis = _combine(nu, acc, smem, lane, base, lanes, axis), axis + 1
    new[u] = nu
  return new[sink]

pm_loop_budget = PatternMatcher([
  (UPat(Ops.SINK, name="sink"), lambda ctx, sink: fit_loop_budget(sink, Limits(ctx.caps.maxloop, ctx.local_max, ctx.caps.wginv, ctx.shared_max),
                                                                 "spread" in ctx.caps) if ctx.caps.maxloop else None),
])
