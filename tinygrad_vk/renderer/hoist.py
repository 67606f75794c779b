"""Compute a reduction whose value does not depend on the launch indices once per workgroup, in few workgroups, for every renderer.

tinygrad fuses a reduction of a whole tensor into the elementwise kernel that uses it (LAMB's trust ratio ||w|| / ||update|| into
the weight update): on a GPU every invocation then recomputes it, where the CPU backend, whose launch dims are loops, has clang
hoist it out of them. `hoist` (in kernel.py's SINK_PASSES) reshapes such a kernel:
  * spread: a top-level reduction loop that reads no launch index runs over all invocations of the workgroup (lane j of I runs
    iterations j, j+I, ...), the partials meet in shared memory and every invocation combines them (loops.py's combine);
  * fold: when the work that does not depend on the workgroup (those reductions) outweighs the work that does, the workgroups
    become a loop: W of them, each running k = G/W of the old ones in turn (gidx -> gidx*k + r), so the invariant part is computed
    W times instead of G (the last one runs fewer when k does not divide G). Only for kernels whose shared memory and barriers do
    not depend on the workgroup, and a launch of known size.
`VULKAN_DISABLE=hoist` turns it off.
"""
from __future__ import annotations
from tinygrad.uop.ops import Ops, UOp, AxisType
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import DEBUG, prod, ceildiv
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.loops import Loop, Acc, find_loops, spreadable, spread_range, rewire, iconst, special, rebuild, trip_count

# workgroups a fold keeps at least where the device does not say how many run at once (caps.threads: llvmpipe runs a workgroup per
# thread, so more would only add redundant work): a GPU keeps its compute units busy with the elementwise part
GPU_MIN_GROUPS = 64

def _specials(topo:dict[UOp, None], kind:str) -> dict[str, UOp]: return {u.arg: u for u in topo if u.op is Ops.SPECIAL and u.arg[0] == kind}

def _reads(end:UOp, kinds:str) -> bool:
  return any(u.op is Ops.SPECIAL and u.arg[0] in kinds for u in end.backward_slice)

def spread_invariant(sink:UOp, caps:Caps) -> UOp|None:
  """Top-level reduction loops that read no workgroup index, each run over the local dims it does not read (all of them when it reads
  none): the invocations that differ only there compute the same value, so they share the iterations instead."""
  topo = sink.toposort()
  loc = _specials(topo, "l")
  sizes = [int(loc[f"lidx{d}"].src[0].vmax) if f"lidx{d}" in loc else 1 for d in range(3)]
  smem_left = caps.smem - sum(u.max_numel() * u.dtype.itemsize for u in topo if u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL)
  chosen: list[tuple[Loop, tuple[Acc, ...], UOp, UOp, int]] = []   # (loop, accumulators, lane, first slot of its group, lanes)
  for l in find_loops(sink):
    if l.outer or _reads(l.end, "g") or isinstance(accs := spreadable(l, topo), str) or not accs: continue
    reads = {u.arg for u in l.end.backward_slice if u.op is Ops.SPECIAL}
    free = [d for d in range(3) if sizes[d] > 1 and f"lidx{d}" not in reads]
    lanes = prod(sizes[d] for d in free)
    if lanes < 2 or trip_count(l.rng) <= lanes or (need := prod(sizes) * sum(a.buf.max_numel() * a.buf.dtype.itemsize for a in accs)) > smem_left:
      continue
    smem_left -= need
    lane, group, lstride, gstride = iconst(0), iconst(0), 1, 1
    for d in range(3):
      if sizes[d] == 1: continue
      if d in free: lane, lstride = lane + loc[f"lidx{d}"] * iconst(lstride), lstride * sizes[d]
      else: group, gstride = group + loc[f"lidx{d}"] * iconst(gstride), gstride * sizes[d]
    chosen.append((l, accs, lane, group, lanes))
  if not chosen: return None
  axis = max((u.arg[0] for u in topo if u.op is Ops.RANGE), default=0) + 1
  slot = max((u.arg.slot for u in topo if u.op is Ops.BUFFER), default=-1) + 1
  ctl: dict[UOp, UOp] = {}       # spread RANGE -> its new RANGE (where a loop is opened or closed)
  val: dict[UOp, UOp] = {}       # spread RANGE -> the iteration it stands for (where its value is used)
  exits: dict[UOp, tuple] = {}
  for l, accs, lane, group, lanes in chosen:
    ctl[l.rng], val[l.rng] = spread_range(l.rng, lane, lanes)
    for acc in accs:
      smem = UOp.placeholder((acc.buf.max_numel() * prod(sizes),), acc.buf.dtype, slot, AddrSpace.LOCAL)
      slot += 1
      for e in acc.exits: exits[e] = (acc, smem, lane, group * iconst(acc.buf.max_numel() * lanes), lanes)
  return rewire(sink, topo, ctl, val, exits, axis)

def _cost(loops:list[Loop]) -> int:
  """Loop passes of these loops per invocation (each loop's enclosing loops multiply it)."""
  return sum(prod(trip_count(o) for o in l.outer) * (trip_count(l.rng) + 1) for l in loops)

def fold_groups(sink:UOp, min_groups:int) -> UOp|None:
  """The workgroups as a loop inside fewer workgroups, when the work that does not depend on the workgroup dominates."""
  topo = sink.toposort()
  glob = _specials(topo, "g")
  gsz = [int(glob[f"gidx{d}"].src[0].vmax) if f"gidx{d}" in glob else 1 for d in range(3)]
  G = prod(gsz)
  if any(g.src[0].vmin != g.src[0].vmax for g in glob.values()): return None   # a symbolic launch: which k divides it is not known
  loops = find_loops(sink)
  inv = [l for l in loops if not l.outer and not _reads(l.end, "g")]
  if not inv: return None
  fixed, per_group = _cost(inv), 1 + _cost([l for l in loops if l not in inv])
  # W workgroups compute the invariant part W times: as few as keep it near the per-workgroup work, and at least min_groups
  want = max(min_groups, ceildiv(G * per_group, fixed))
  if (k := ceildiv(G, want)) < 2: return None
  W = ceildiv(G, k)
  g = special("gidx0", W)
  # workgroup g runs the old ones g*k ... g*k+k-1, the last one only those below G
  trip = iconst(k) if W * k == G else (rem := iconst(G) - g * iconst(k)).alu(Ops.CMPLT, iconst(k)).where(rem, iconst(k))
  axis = max((u.arg[0] for u in topo if u.op is Ops.RANGE), default=0) + 1
  r = UOp.range(trip, axis, AxisType.LOOP, dtype=dtypes.int)
  flat = g * iconst(k) + r
  sub, stride = {}, 1
  for d in range(3):
    if f"gidx{d}" not in glob: continue
    x = flat.alu(Ops.CDIV, iconst(stride)) if stride > 1 else flat
    sub[glob[f"gidx{d}"]] = x.alu(Ops.CMOD, iconst(gsz[d])) if stride * gsz[d] < G else x
    stride *= gsz[d]
  out = rebuild(sink, sub)
  topo = out.toposort()
  if any(r in u.ranges for u in topo if u.op is Ops.BARRIER or (u.op is Ops.STORE and u.src[0].addrspace == AddrSpace.LOCAL)):
    return None   # its shared memory depends on the workgroup: each old workgroup needs its own
  # an accumulator updated inside the new loop is reset on each of its iterations (tinygrad's acc.after(*input_ranges))
  regs = {u.src[0].buf_uop for u in topo if u.op is Ops.STORE and u.src[0].addrspace == AddrSpace.REG and r in u.ranges}
  inits = {}
  for u in topo:
    if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and (b := u.src[0].src[0]).op in (Ops.BUFFER, Ops.AFTER) and b.buf_uop in regs \
       and r not in u.ranges and all(s.op is Ops.RANGE for s in b.src[1:]):
      buf = b.buf_uop.after(*b.src[1:], r) if b.op is Ops.AFTER else b.after(r)
      inits[u] = u.replace(src=(u.src[0].replace(src=(buf, *u.src[0].src[1:])), *u.src[1:]))
  if inits: out = rebuild(out, inits)
  ends = tuple(s.end(r) if r in s.ranges else s for s in out.src)
  if DEBUG >= 3: print(f"{sink.arg.name if sink.arg is not None else 'kernel'}: {G} workgroups folded into {W} x {k} "
                       f"(invariant {fixed} loop passes, per workgroup {per_group})")
  return out.replace(src=ends)

def hoist(sink:UOp, caps:Caps) -> UOp|None:
  if any(u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP for u in sink.toposort()): return None   # folded already
  spread = spread_invariant(sink, caps)
  folded = fold_groups(spread if spread is not None else sink, caps.threads or GPU_MIN_GROUPS)
  return folded if folded is not None else spread
