"""Keep every kernel under a driver's budget of loop passes (Mesa llvmpipe's loop limiter), for every renderer.

llvmpipe runs a compute shader one SIMD vector of invocations (8 lanes along x) at a time, with one counter per vector (gallivm's
LP_MAX_TGSI_LOOP_ITERATIONS = 65535): every pass through the end of any loop decrements it, and at 0 every loop exits after its
current pass, so a longer reduction is silently cut short. Measured on Mesa 22.3 (tests/test_loops.py): a loop of n iterations
costs n+1 passes, the loops of an invocation add up, a vector pays for its slowest lane, and more lanes mean more budget.

`fit_budget` (SINK_PASSES: tinygrad's optimizer has no hook for a loop budget) reshapes a kernel that may run over
caps.maxloop with the fewest changes that fit, cheapest first:
  - spread: long reduction loops run over L more invocations (local x becomes x*L); lane j runs iterations j, j+L, ... into its
    own accumulators, the partials meet in shared memory, every lane combines them and lane 0 stores (tinygrad's GROUP reduction);
  - trade: part of the local dims moves into more workgroups, when they leave too few lanes and the kernel shares no memory;
  - unroll: an innermost reduction loop runs k iterations per pass.
A long loop that is not a reduction into registers, or one too long even so, is refused with the reason, as is a kernel that
`check_loop_budget` (in render) still counts over the budget: none runs cut short. `VULKAN_DISABLE=spread` turns reshaping off.
"""
from __future__ import annotations
import functools
from typing import cast
from dataclasses import dataclass, field
from tinygrad.uop.ops import Ops, UOp, AxisType, identity_element, graph_rewrite
from tinygrad.codegen.late.linearizer import CFGContext, pm_add_control_flow, linearize
from tinygrad.dtype import dtypes, AddrSpace, DType
from tinygrad.device import CompileError
from tinygrad.helpers import DEBUG, prod, ceildiv
from tinygrad_vk.caps import Caps, MAX_GROUPS_X

MIN_LANES = 8          # one llvmpipe SIMD vector: fewer lanes along x would leave vector lanes idle
UNROLL_COMBINE = 64    # partials (accumulator elements x lanes) combined in straight-line code rather than a loop
MAX_UNROLL = 16        # copies of a loop body per pass at most (the body is usually one load and one ALU op per accumulator)

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

def trip_count(r:UOp) -> int: return int(r.src[0].vmax)
def _counted(r:UOp) -> bool: return r.op is Ops.RANGE and r.dtype != dtypes.void   # void RANGEs are unbounded loops: not counted
def iconst(x:int, dt:DType=dtypes.int) -> UOp: return UOp.const(x, dt)
def special(name:str, size:int) -> UOp: return UOp(Ops.SPECIAL, dtypes.int, (iconst(size),), name)
def next_axis(topo) -> int: return max((u.arg[0] for u in topo if u.op is Ops.RANGE), default=0) + 1
def dims(topo, kind:str) -> tuple[dict[str, UOp], list[int]]:
  """The launch SPECIALs of a kind ("l": local, "g": workgroup) by name, and the size of each of the 3 dims (1 where absent)."""
  sp = {u.arg: u for u in topo if u.op is Ops.SPECIAL and u.arg[0] == kind}
  return sp, [int(sp[f"{kind}idx{d}"].src[0].vmax) if f"{kind}idx{d}" in sp else 1 for d in range(3)]

def unflatten(flat:UOp, sp:dict[str, UOp], kind:str, sizes:list[int], total:int) -> dict[UOp, UOp]:
  """Each SPECIAL of the kind -> its part of `flat` (below `total`), dim 0 moving fastest."""
  sub, stride = {}, 1
  for d in range(3):
    if f"{kind}idx{d}" not in sp: continue
    x = flat.alu(Ops.CDIV, iconst(stride)) if stride > 1 else flat
    sub[sp[f"{kind}idx{d}"]] = x.alu(Ops.CMOD, iconst(sizes[d])) if stride * sizes[d] < total else x
    stride *= sizes[d]
  return sub

def loop_passes(uops:list[UOp]) -> int:
  """The passes one invocation of the linearized kernel makes through loop ends, the leaving pass of each loop included."""
  total, mult = 0, [1]
  for u in uops:
    if _counted(u):
      total += mult[-1] * (trip_count(u) + 1)
      mult.append(mult[-1] * trip_count(u))
    elif u.op is Ops.END and _counted(u.src[1]): mult.pop()
  return total

def check_loop_budget(uops:list[UOp], budget:int, name:str) -> None:
  """Refuse a linearized kernel that would run over the budget (0: no budget)."""
  if budget and (n := loop_passes(uops)) > budget:
    raise CompileError(f"VULKAN: kernel {name} makes {n} loop passes per invocation, and this driver stops every loop of an invocation "
                       f"after {budget} in total (Mesa llvmpipe, gallivm LP_MAX_TGSI_LOOP_ITERATIONS); its long loops could not be spread "
                       "over the workgroup (VULKAN_DISABLE=spread?). Use a GPU driver or a smaller reduction.")

def find_loops(sink:UOp) -> list[Loop]:
  """The kernel's counted loops, each with the loops tinygrad's linearizer will nest it in. Not the ranges its END depends on: a
  loop reading what an earlier one left in shared memory (PCONTIG's WEAK ranges) runs after that loop, not inside it."""
  return list(_find_loops(sink))
# hoist and fit_budget ask for the loops of the same kernel in turn, and linearizing it is most of what the passes cost
@functools.lru_cache(maxsize=8)
def _find_loops(sink:UOp) -> tuple[Loop, ...]:
  rngs = {u.arg: u for u in sink.toposort() if _counted(u)}
  ends = {r: u for u in sink.toposort() if u.op is Ops.END for r in u.src[1:] if _counted(r)}
  if not ends: return ()   # linearizing costs seconds on big loop-free kernels (float64 sin in int pairs)
  outer: dict[UOp, tuple[UOp, ...]] = {}
  stack: list[UOp] = []
  for u in linearize(graph_rewrite(sink, pm_add_control_flow, ctx=CFGContext(sink), bottom_up=True)):
    if _counted(u) and (r := rngs[u.arg]) in ends:
      outer[r] = tuple(stack)
      stack.append(r)
    elif u.op is Ops.END and _counted(u.src[1]) and stack and stack[-1] is rngs[u.src[1].arg]: stack.pop()
  return tuple(Loop(r, e, outer[r]) for r, e in ends.items())

def loop_ends(topo) -> list[UOp]: return [u for u in topo if u.op is Ops.END and any(_counted(r) for r in u.src[1:])]
def passes_bound(topo) -> int:
  """An upper bound of passes(find_loops(sink)) without linearizing: each loop as if nested in all the others."""
  trips = [trip_count(r) for r in {r: None for u in loop_ends(topo) for r in u.src[1:] if _counted(r)}]
  every = prod(max(t, 1) for t in trips)
  return sum((t + 1) * every // max(t, 1) for t in trips)
def read_bound(topo) -> int:
  """A tighter upper bound of passes(find_loops(sink)) without linearizing: each loop as if nested in every loop its END reads, and
  in every loop those run in (tinygrad nests a loop in the loops its body reads and in theirs: test_loops.py masked_select; one that
  reads another's result after it ends is counted as inside it). check_loop_budget still checks the linearized kernel."""
  ends = {r: u for u in loop_ends(topo) for r in u.src[1:] if _counted(r)}
  reads = {r: {o for o in ends if o is not r and o in e.backward_slice} for r, e in ends.items()}
  grown = True
  while grown:
    grown = False
    for r, outer in reads.items():
      if (more := set().union(*(reads[o] for o in outer)) - outer - {r}):
        outer |= more
        grown = True
  return passes([Loop(r, e, tuple(reads[r])) for r, e in ends.items()])

@dataclass(frozen=True)
class Shape:
  """How a kernel is reshaped; loops are named by their RANGE's arg, which survives the rewrites."""
  trade: tuple[int, int, int] = (1, 1, 1)          # factor of each local dim moved into more workgroups
  unroll: int = 1                                   # iterations per pass of the loops in `unrolled`
  unrolled: frozenset = field(default_factory=frozenset)
  lanes: int = 1                                    # invocations each loop in `spread` is spread over
  spread: frozenset = field(default_factory=frozenset)

def passes(loops:list[Loop], s:Shape=Shape()) -> int:
  """Upper bound of loop_passes once the kernel is reshaped as `s` (each spread loop may add a combine loop of `lanes`)."""
  def t(r:UOp) -> int:
    n = ceildiv(trip_count(r), s.unroll) if r.arg in s.unrolled else trip_count(r)
    return ceildiv(n, s.lanes) if r.arg in s.spread else n
  total = 0
  for l in loops:
    entries = prod(t(o) for o in l.outer)
    total += entries * (t(l.rng) + 1) + (entries * (s.lanes + 1) if l.rng.arg in s.spread else 0)
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

def _term(st:UOp) -> UOp:
  """The x of an accumulator update `acc[k] = acc[k] <op> x` (see _update_op)."""
  idx, val = st.src[0], st.src[1]
  a, b = val.src[0].src if val.op is Ops.WHERE else val.src
  return b if _is_load_of(a, idx) else a
def _identity(op:Ops, dt:DType) -> UOp: return UOp.const(identity_element(op, dt) if op in (Ops.ADD, Ops.MUL, Ops.MAX) else op is Ops.AND, dt)
def _body(l:Loop, topo:dict[UOp, None]) -> list[UOp]: return [u for u in topo if l.rng in u.ranges and u is not l.rng]
def spreadable(l:Loop, topo:dict[UOp, None]) -> tuple[Acc, ...]|str:
  """The accumulators a loop leaves partial results in when it is spread over lanes, or why it cannot be spread."""
  if l.rng.arg[-1] is not AxisType.REDUCE: return f"it is not a reduction (a {l.rng.arg[-1].name} range)"
  inside = _body(l, topo)
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
    accs.append(Acc(buf, cast(Ops, ops.pop()), exits))   # not None: refused above
  return tuple(accs)

def unrollable(l:Loop, loops:list[Loop], topo:dict[UOp, None], accs:tuple[Acc, ...]) -> bool:
  """An innermost reduction loop whose body only updates its accumulators, with terms that do not read them."""
  bufs = {a.buf for a in accs}
  stores = [u for u in _body(l, topo) if u.op is Ops.STORE]
  return bool(accs) and not any(l.rng in x.outer for x in loops) and all(u.src[0].buf_uop in bufs for u in stores) and \
    not any(u in bufs or (u.op is Ops.AFTER and l.rng in u.src[1:]) for st in stores for u in _term(st).toposort())

def spread_range(rng:UOp, lane:UOp, lanes:int) -> tuple[UOp, UOp]:
  """rng's iterations dealt round-robin to `lanes` lanes: (the loop `lane` runs, the iteration each of its passes stands for)."""
  n, dt = rng.src[0], rng.dtype
  ln = lane if dt == dtypes.int else lane.cast(dt)
  trip = iconst(int(n.vmax) // lanes, dt) if n.vmin == n.vmax and int(n.vmax) % lanes == 0 else \
    (n + iconst(lanes - 1, dt) - ln).alu(Ops.CDIV, iconst(lanes, dt))      # ceil((n - lane) / lanes), all terms >= 0
  loop = UOp(Ops.RANGE, dt, (trip,), rng.arg)
  return loop, loop * iconst(lanes, dt) + ln

def combine(x:UOp, acc:Acc, smem:UOp, lane:UOp, base:UOp, lanes:int, axis:int) -> UOp:
  """Every lane's partials through shared memory into every lane's accumulator; `x` is the accumulator as the loop leaves it."""
  buf, n, dt = acc.buf, acc.buf.max_numel(), acc.buf.dtype
  def slot(k:int, j:UOp) -> UOp: return (base + iconst(k * lanes)) + j     # smem[base + k*lanes + j]: lane j's partial of accumulator element k
  ready = smem.after(*[smem.index(slot(k, lane)).store(x.index(iconst(k)).load()) for k in range(n)])   # a barrier follows
  out = buf.after(ready)
  if n * lanes <= UNROLL_COMBINE:   # straight-line code: no loop passes
    return buf.after(*[out.index(iconst(k)).store(functools.reduce(lambda a, b: a.alu(acc.op, b), [ready.index(slot(k, iconst(j))).load()
                                                                                              for j in range(lanes)])) for k in range(n)])
  j = UOp.range(iconst(lanes), axis, AxisType.REDUCE, dtype=dtypes.int)
  cur = buf.after(*[out.index(iconst(k)).store(_identity(acc.op, dt)) for k in range(n)], j)
  upd = [cur.index(iconst(k)).store(cur.index(iconst(k)).load().alu(acc.op, ready.index(slot(k, j)).load())) for k in range(n)]
  return buf.after(UOp.group(*upd).end(j))

@dataclass(frozen=True)
class Kernel:
  """What the planner needs to know of a kernel."""
  loops: list[Loop]
  cands: dict[UOp, tuple[Acc, ...]]   # the loops that can be spread, with their accumulators
  unrollable: frozenset               # args of the loops that can be unrolled
  sizes: tuple[int, int, int]         # local dims
  groups: int                         # workgroups along x
  smem_used: int                      # bytes of shared memory the kernel uses itself (it then keeps its local dims)
  @staticmethod
  def of(sink:UOp, loops:list[Loop]|None=None) -> Kernel:
    loops, topo = find_loops(sink) if loops is None else loops, sink.toposort()
    spec = {u.arg: int(u.src[0].vmax) for u in topo if u.op is Ops.SPECIAL}
    checked = {l.rng: spreadable(l, topo) for l in loops}
    cands = {r: a for r, a in checked.items() if not isinstance(a, str)}
    unroll = frozenset(l.rng.arg for l in loops if l.rng in cands and unrollable(l, loops, topo, cands[l.rng]))
    smem = sum(u.max_numel() * u.dtype.itemsize for u in topo if u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL)
    return Kernel(loops, cands, unroll, tuple(spec.get(f"lidx{d}", 1) for d in range(3)), spec.get("gidx0", 1), smem)  # type: ignore

def trades(k:Kernel, caps:Caps) -> list[tuple[int, int, int]]:
  """Ever larger parts of the local dims to move into workgroups: halve the largest dim (or move it whole when odd)."""
  out, f = [(1, 1, 1)], [1, 1, 1]
  while not k.smem_used:
    left = [s // x for s, x in zip(k.sizes, f)]
    d = max(range(3), key=lambda d: left[d])
    if left[d] == 1: break
    f[d] *= 2 if left[d] % 2 == 0 else left[d]
    if k.groups * prod(f) > MAX_GROUPS_X: break
    out.append((f[0], f[1], f[2]))
  return out

def plan(k:Kernel, caps:Caps) -> Shape|None:
  """The least reshaping that fits the budget: the fewest lanes (a power of two) with the loops to spread over them, first on the
  kernel as it is, then with ever more of its local dims traded for lanes, then with its innermost loops unrolled."""
  tr = trades(k, caps)
  options = [(t, 1) for t in tr] + [(tr[-1], 1 << i) for i in range(1, MAX_UNROLL.bit_length())]
  nested = {l.rng: set(l.outer) for l in k.loops}
  for trade, unroll in options:
    sizes = [s // f for s, f in zip(k.sizes, trade)]
    unrolled = frozenset(a for a in k.unrollable if unroll > 1 and any(r.arg == a and trip_count(r) > unroll for r in k.cands))
    if unroll > 1 and not unrolled: continue
    base = Shape(trade, unroll, unrolled)
    trip = {r: ceildiv(trip_count(r), unroll) if r.arg in unrolled else trip_count(r) for r in k.cands}
    lanes_max = min(caps.wgsize[0] // sizes[0], caps.wginv // prod(sizes))
    smem_left = caps.smem - k.smem_used
    per_lane = {r: prod(sizes) * sum(a.buf.max_numel() * a.buf.dtype.itemsize for a in accs) for r, accs in k.cands.items()}
    for lanes in (1 << i for i in range(lanes_max.bit_length())):
      chosen: set[UOp] = set()
      def shape(c:set[UOp]) -> Shape: return Shape(trade, unroll, unrolled, lanes, frozenset(r.arg for r in c))
      while (cur := passes(k.loops, shape(chosen))) > caps.maxloop:
        # loops that are not nested in each other; a lane gets 2+ iterations (tinygrad's linearizer orders code by how often it
        # runs, so a loop of one iteration could take in code from around it)
        ok = [c for c in k.cands if c not in chosen and trip[c] > lanes and not any(c in nested[o] or o in nested[c] for o in chosen)
              and sum(per_lane[o] for o in chosen | {c}) * lanes <= smem_left]
        if (best := min(ok, key=lambda c: passes(k.loops, shape(chosen | {c})), default=None)) is None or \
           passes(k.loops, shape(chosen | {best})) >= cur: break
        chosen.add(best)
      else:
        if lanes == 1: return base
        # more lanes cost nothing while they fill llvmpipe's SIMD vector and fit the limits
        while sizes[0] * lanes < MIN_LANES and lanes * 2 <= lanes_max and all(trip[c] > lanes * 2 for c in chosen) and \
              sum(per_lane[c] for c in chosen) * lanes * 2 <= smem_left:
          lanes *= 2
        return shape(chosen)
  return None

def fit_budget(sink:UOp, caps:Caps) -> UOp|None:
  """The kernel reshaped so it stays under the loop budget; None when it already fits."""
  # bounds first: linearizing a kernel costs seconds when it is big (half in 16-bit words)
  if not caps.maxloop or passes_bound(topo := sink.toposort()) <= caps.maxloop or read_bound(topo) <= caps.maxloop or \
     (need := passes(loops := find_loops(sink))) <= caps.maxloop: return None
  k, enabled = Kernel.of(sink, loops), "spread" in caps
  name = sink.arg.name if sink.arg is not None else "kernel"
  if (s := plan(k, caps) if enabled else None) is None:
    worst = max(k.loops, key=lambda l: passes([x for x in k.loops if x.rng is l.rng or l.rng in x.outer]))
    lanes = min(caps.wgsize[0], caps.wginv) if not k.smem_used else min(caps.wgsize[0] // k.sizes[0], caps.wginv // prod(k.sizes))
    why = "spreading is off (VULKAN_DISABLE=spread)" if not enabled else \
      f"its longest loop ({trip_count(worst.rng)} iterations) cannot be spread over the workgroup: {w}" \
      if isinstance(w := spreadable(worst, sink.toposort()), str) else \
      f"it needs more than {lanes} lanes (maxComputeWorkGroupInvocations {caps.wginv}" + \
      (", with the kernel's own local dims, which share memory" if k.smem_used else "") + \
      f") x {caps.maxloop} passes, even with its innermost loops unrolled {MAX_UNROLL}x"
    raise CompileError(f"VULKAN: kernel {name} makes up to {need} loop passes per invocation, and this driver stops every loop of an invocation "
                       f"after {caps.maxloop} in total (Mesa llvmpipe, gallivm LP_MAX_TGSI_LOOP_ITERATIONS); {why}. Use a GPU driver, or split "
                       "the work into smaller reductions.")
  if DEBUG >= 3: print(f"{name}: {need} loop passes over the budget of {caps.maxloop}: {s}")
  if s.trade != (1, 1, 1): sink = trade(sink, k.sizes, k.groups, s.trade)
  for a in s.unrolled:
    k = Kernel.of(sink)
    l = next(l for l in k.loops if l.rng.arg == a)
    sink = unroll(sink, l, k.cands[l.rng], s.unroll)
  if not s.spread: return sink
  k = Kernel.of(sink)
  return spread(sink, [l for l in k.loops if l.rng.arg in s.spread], k.cands, s.lanes)

def trade(sink:UOp, sizes:tuple[int, ...], groups:int, f:tuple[int, int, int]) -> UOp:
  """Local dim d keeps sizes[d] // f[d] invocations; the rest become more workgroups along x. Only for kernels without shared
  memory: their invocations are independent, so which workgroup runs which is free."""
  specials = {u.arg: u for u in sink.toposort() if u.op is Ops.SPECIAL}
  g = special("gidx0", groups * prod(f))
  sub, rest = {}, g.alu(Ops.CMOD, iconst(prod(f)))
  if "gidx0" in specials: sub[specials["gidx0"]] = g.alu(Ops.CDIV, iconst(prod(f)))
  for d in range(3):
    if f[d] == 1: continue
    hi, rest = rest.alu(Ops.CMOD, iconst(f[d])), rest.alu(Ops.CDIV, iconst(f[d]))
    keep = sizes[d] // f[d]
    sub[specials[f"lidx{d}"]] = hi * iconst(keep) + special(f"lidx{d}", keep) if keep > 1 else hi
  return sink.substitute(sub, walk=True)   # walk: the replacements are taken as they are, not rewritten again

def unroll(sink:UOp, l:Loop, accs:tuple[Acc, ...], k:int) -> UOp:
  """Loop l running k iterations per pass, as tinygrad's UNROLL of a reduce does it: acc = acc <op> (x(r*k) <op> ... <op> x(r*k+k-1)).
  When k does not divide the trip count, a term past the end reads the last element and is the reduction's identity instead."""
  n, dt = l.rng.src[0], l.rng.dtype
  exact = n.vmin == n.vmax and int(n.vmax) % k == 0
  trip = iconst(ceildiv(int(n.vmax), k), dt) if n.vmin == n.vmax else (n + iconst(k - 1, dt)).alu(Ops.CDIV, iconst(k, dt))
  r = UOp(Ops.RANGE, dt, (trip,), l.rng.arg)
  first = r * iconst(k, dt)
  ops = {a.buf: a.op for a in accs}
  def more_terms(x:UOp, nx:UOp) -> UOp:   # an accumulator update: its term gets the other k-1 iterations
    if x.op is not Ops.STORE or l.rng not in x.ranges: return nx
    t, nt, op = _term(x), _term(nx), ops[x.src[0].buf_uop]
    terms = [nt]
    for u in range(1, k):
      i = first + iconst(u, dt)
      if exact: terms.append(t.substitute({l.rng: i}, walk=True))
      else: terms.append(i.alu(Ops.CMPLT, n).where(t.substitute({l.rng: i.alu(Ops.CMPLT, n).where(i, n - iconst(1, dt))}, walk=True),
                                                   _identity(op, t.dtype)))
    total = functools.reduce(lambda a, b: a.alu(op, b), terms)
    def top(y:UOp) -> UOp: return total if y is nt else y
    val = nx.src[1]
    val = val.replace(src=(val.src[0].replace(src=tuple(map(top, val.src[0].src))), *map(top, val.src[1:]))) if val.op is Ops.WHERE else \
      val.replace(src=tuple(map(top, val.src)))
    return nx.replace(src=(nx.src[0], val))
  return rewire(sink, sink.toposort(), {l.rng: r}, {l.rng: first}, more_terms)

def spread(sink:UOp, chosen:list[Loop], cands:dict[UOp, tuple[Acc, ...]], lanes:int) -> UOp:
  topo = sink.toposort()
  specials, sizes = dims(topo, "l")
  # the lane is the fastest-moving part of local x, so neighbouring lanes read neighbouring elements
  if "lidx0" in specials:
    wide = special("lidx0", sizes[0] * lanes)
    lane, old_l0 = wide.alu(Ops.CMOD, iconst(lanes)), wide.alu(Ops.CDIV, iconst(lanes))
  else: lane, old_l0 = special("lidx0", lanes), iconst(0)
  l1, l2 = (specials[n] if n in specials else iconst(0) for n in ("lidx1", "lidx2"))
  flat = old_l0 + iconst(sizes[0]) * (l1 + iconst(sizes[1]) * l2)       # the invocation's place among the original locals
  lane0 = lane.alu(Ops.CMPEQ, iconst(0))
  def one_stores(u:UOp, nu:UOp) -> UOp:   # every lane holds the same value: one stores
    if u.op is not Ops.STORE or u.src[0].addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL): return nu
    return nu.replace(src=nu.src[:2] + ((nu.src[2] & lane0) if len(nu.src) > 2 else lane0,))
  # axes for the combine loops: unique, past every RANGE's (and one per accumulator)
  axis = next_axis(topo) + sum(len(cands[l.rng]) for l in chosen)
  return spread_loops(sink, topo, [(l, cands[l.rng], lane, flat, lanes) for l in chosen], prod(sizes) * lanes, axis,
                      {specials["lidx0"]: old_l0} if "lidx0" in specials else {}, one_stores)

def spread_loops(sink:UOp, topo:dict[UOp, None], chosen:list[tuple[Loop, tuple[Acc, ...], UOp, UOp, int]], invocations:int, axis:int,
                 ctl:dict[UOp, UOp], fix=lambda u, nu: nu) -> UOp:
  """Each chosen (loop, its accumulators, lane, group, lanes) spread over `lanes` lanes, each accumulator's exits combined over
  them through shared memory for `invocations` invocations (a group's partials at group * elements * lanes)."""
  slot = max((u.arg.slot for u in topo if u.op is Ops.BUFFER), default=-1) + 1
  val: dict[UOp, UOp] = {}
  exits: dict[UOp, tuple[Acc, UOp, UOp, UOp, int]] = {}
  for l, accs, lane, group, lanes in chosen:
    ctl[l.rng], val[l.rng] = spread_range(l.rng, lane, lanes)
    for acc in accs:
      smem = UOp.placeholder((acc.buf.max_numel() * invocations,), acc.buf.dtype, slot, AddrSpace.LOCAL)
      slot += 1
      for e in acc.exits: exits[e] = (acc, smem, lane, group * iconst(acc.buf.max_numel() * lanes), lanes)
  return rewire(sink, topo, ctl, val, fix, exits, axis)

def rewire(sink:UOp, topo:dict[UOp, None], ctl:dict[UOp, UOp], val:dict[UOp, UOp], fix=lambda u, nu: nu,
           exits:dict[UOp, tuple[Acc, UOp, UOp, UOp, int]]|None=None, axis:int=0) -> UOp:
  """sink with each node in ctl replaced as it is, but a RANGE also in val by its val node where its value is used (by its new RANGE
  in ctl where a loop is opened or closed: END, AFTER); fix(node, rebuilt node) may change any node; each exit is combined."""
  new: dict[UOp, UOp] = {}
  for u in topo:
    if u in ctl:
      new[u] = ctl[u]
      continue
    src = tuple(ctl[s] if s in ctl and (u.op in (Ops.END, Ops.AFTER) and i > 0) else val[s] if s in val else new[s] for i, s in enumerate(u.src))
    nu = fix(u, u.replace(src=src))
    if exits and u in exits: nu, axis = combine(nu, *exits[u], axis), axis + 1
    new[u] = nu
  return new[sink]
