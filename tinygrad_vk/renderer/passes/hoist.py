"""Compute a reduction whose value depends on no launch index once per workgroup, in few workgroups, for every renderer.

tinygrad fuses a reduction of a whole tensor into the elementwise kernel that uses it (LAMB's trust ratio ||w|| / ||update||):
on a GPU every invocation then recomputes it, where the CPU backend's clang hoists it out of the launch loops. `hoist` (in
SINK_PASSES; `VULKAN_DISABLE=hoist` turns it off) reshapes such a kernel:
  * spread: a top-level reduction loop that reads no workgroup index runs over the local dims it does not read, the partials
    combined through shared memory (loops.py; `spread_replicated`);
  * fold: when that invariant work outweighs the per-workgroup work, W workgroups each run k = G/W of the old ones in a loop
    (gidx -> gidx*k + r), so the invariant part is computed W times instead of G. Only for a launch of known size whose shared
    memory and barriers do not depend on the workgroup.
`group` (flag group) spreads the same way a top-level reduction loop that does read the workgroup index but not all the local dims:
tinygrad's optimizer GROUPs one reduction of a kernel over the local dims, and a second one fused in beside it (the up projection
next to a SwiGLU's gate, in every decoder layer of a language model) ran whole on every lane.
"""
from __future__ import annotations
from tinygrad.uop.ops import Ops, UOp, AxisType
from tinygrad.dtype import dtypes, AddrSpace
from tinygrad.helpers import DEBUG, prod, ceildiv
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.passes.loops import find_loops, loop_ends, spreadable, passes, spread_loops, iconst, special, trip_count, dims, \
  next_axis, unflatten

# workgroups a fold keeps at least where the device does not say how many run at once (caps.threads: llvmpipe runs a workgroup per
# thread, so more would only add redundant work): a GPU keeps its compute units busy with the elementwise part
GPU_MIN_GROUPS = 64
def _reads_group(end:UOp) -> bool: return any(u.op is Ops.SPECIAL and u.arg[0] == "g" for u in end.backward_slice)
def spread_replicated(sink:UOp, caps:Caps, invariant:bool) -> UOp|None:
  """Top-level reduction loops that read no workgroup index (invariant) or do, each run over the local dims it does not read: the
  invocations that differ only there compute the same value, so they share the iterations instead."""
  topo = sink.toposort()
  loc, sizes = dims(topo, "l")
  if prod(sizes) < 2 or not [e for e in loop_ends(topo) if _reads_group(e) != invariant and _free(e, sizes)]: return None   # no linearize
  smem_left = caps.smem - sum(u.max_numel() * u.dtype.itemsize for u in topo if u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL)
  chosen = []   # (loop, accumulators, lane, first slot of its group, lanes)
  for l in find_loops(sink):
    if l.outer or _reads_group(l.end) == invariant or isinstance(accs := spreadable(l, topo), str) or not accs: continue
    free = _free(l.end, sizes)
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
  return spread_loops(sink, topo, chosen, prod(sizes), next_axis(topo), {}) if chosen else None
def _free(end:UOp, sizes:list[int]) -> list[int]:
  """The local dims of more than one invocation a loop's result does not read."""
  reads = {u.arg for u in end.backward_slice if u.op is Ops.SPECIAL}
  return [d for d in range(3) if sizes[d] > 1 and f"lidx{d}" not in reads]

def fold_groups(sink:UOp, min_groups:int) -> UOp|None:
  """The workgroups as a loop inside fewer workgroups, when the work that does not depend on the workgroup dominates."""
  topo = sink.toposort()
  glob, gsz = dims(topo, "g")
  if any(g.src[0].vmin != g.src[0].vmax for g in glob.values()): return None   # a symbolic launch: which k divides it is not known
  loops = find_loops(sink)
  if not (inv := [l for l in loops if not l.outer and not _reads_group(l.end)]): return None
  G, fixed, per_group = prod(gsz), passes(inv), 1 + passes([l for l in loops if l not in inv])
  # W workgroups compute the invariant part W times: as few as keep it near the per-workgroup work, and at least min_groups
  if (k := ceildiv(G, max(min_groups, ceildiv(G * per_group, fixed)))) < 2: return None
  W = ceildiv(G, k)
  g = special("gidx0", W)
  # workgroup g runs the old ones g*k ... g*k+k-1, the last one only those below G
  trip = iconst(k) if W * k == G else (rem := iconst(G) - g * iconst(k)).alu(Ops.CMPLT, iconst(k)).where(rem, iconst(k))
  r = UOp.range(trip, next_axis(topo), AxisType.LOOP, dtype=dtypes.int)
  out = sink.substitute(unflatten(g * iconst(k) + r, glob, "g", gsz, G), walk=True)
  if any(r in u.ranges for u in out.toposort() if u.op is Ops.BARRIER or (u.op is Ops.STORE and u.src[0].addrspace == AddrSpace.LOCAL)):
    return None   # its shared memory depends on the workgroup: each old workgroup needs its own
  out = reset_accumulators(out, r)
  if DEBUG >= 3: print(f"{sink.arg.name if sink.arg is not None else 'kernel'}: {G} workgroups folded into {W} x {k} "
                       f"(invariant {fixed} loop passes, per workgroup {per_group})")
  return out.replace(src=tuple(s.end(r) if r in s.ranges else s for s in out.src))

def reset_accumulators(sink:UOp, r:UOp) -> UOp:
  """An accumulator updated inside the new loop r reset on each of its iterations (tinygrad's acc.after(*input_ranges))."""
  topo = sink.toposort()
  regs = {u.src[0].buf_uop for u in topo if u.op is Ops.STORE and u.src[0].addrspace == AddrSpace.REG and r in u.ranges}
  inits = {}
  for u in topo:
    if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and (b := u.src[0].src[0]).op in (Ops.BUFFER, Ops.AFTER) and b.buf_uop in regs \
       and r not in u.ranges and all(s.op is Ops.RANGE for s in b.src[1:]):
      buf = b.buf_uop.after(*b.src[1:], r) if b.op is Ops.AFTER else b.after(r)
      inits[u] = u.replace(src=(u.src[0].replace(src=(buf, *u.src[0].src[1:])), *u.src[1:]))
  return sink.substitute(inits, walk=True)

def hoist(sink:UOp, caps:Caps) -> UOp|None:
  topo = sink.toposort()
  if any(u.op is Ops.RANGE and u.arg[-1] is AxisType.LOOP for u in topo): return None   # folded already
  # both need a loop that reads no workgroup index: most kernels have none, and finding the loops' nesting costs a linearize
  if all(_reads_group(e) for e in loop_ends(topo)): return None
  spread = spread_replicated(sink, caps, invariant=True)
  folded = fold_groups(spread if spread is not None else sink, caps.threads or GPU_MIN_GROUPS)
  return folded if folded is not None else spread

def group(sink:UOp, caps:Caps) -> UOp|None: return spread_replicated(sink, caps, invariant=False)
