"""The optimizations tinygrad's heuristic picks for a kernel, changed where the device runs another choice better (flags "rows", "quads").

tinygrad's optimizer has no hook for a backend's choices: the start-up hook (tinygrad_vk/__init__.py) makes its
`hand_coded_optimizations` ask the renderer first, and `VulkanRenderer.hand_coded_optimizations` comes here.

`rows`: tinygrad GROUPs a reduction with few outputs (2048 or fewer) or a matrix-vector product: 8 or 16 lanes share each output's
sum, through shared memory and barriers. llvmpipe runs a workgroup's lanes as SIMD vectors along local x (passes/simd.py), where
a barrier ends a coroutine and each scalar load is a gather of its own: the decode step of a language model, all matrix-vector
products, ran its FFN's up projection (RMSNorm fused in, two reductions) at 3 loads an FMA. Where the same kernel without shared
memory keeps enough workgroups for the driver's threads, tinygrad's own heuristic picks it instead (as for a renderer without shared
memory: rows on the lanes, upcast where it would), with every reduction unrolled by 4: float4 loads along each row. LLaMA 512 wide,
float decode on Mesa 22.3: the FFN's up projection 1.50 -> 0.44 ms, a step's kernels 42.8 -> 17.5 ms. Only with the "rows" flag
(llvmpipe; VULKAN_DISABLE=rows); BEAM searches on its own.

`quads`: tinygrad upcasts an axis along which some input is broadcast by 3 rather than 4 where both divide it (it tries 3 first),
and leaves an elementwise kernel's lanes 3 or 4 elements each. On llvmpipe a lane's float4 from an RGBA32 texel buffer is one
gather, as one float is (flag texel4), and each invocation pays its index math and its broadcast loads again: the first such upcast
is 4, and a large elementwise kernel's lanes take 16 neighbours (4 float4s). BERT tiny's Adam/LAMB update of its 30522x128
embedding (3 inputs, 2 broadcast scalars), Mesa 22.3: E_40696_32_3 9.0-10.7 ms -> E_15261_16_16 4.0-4.2 ms, as BEAM finds;
GEMM 768, which tinygrad upcast 3x3: 28.1 -> 49.1 GFLOP/s.
"""
from __future__ import annotations
import copy, functools
from typing import Callable
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.uop.ops import AxisType
from tinygrad.helpers import prod
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.passes.simd import WIDE, enough_groups

FLOAT4 = 4   # a row's elements a rows loop pass reads; the upcast quads takes instead of 3

def rows(k:Scheduler, heuristic:Callable[[Scheduler], Scheduler], caps:Caps) -> Scheduler:
  out = heuristic(k)
  if not any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for o in out.applied_opts) or not all(isinstance(s, int) for s in k.full_shape):
    return out
  alone = k.copy()
  alone.ren = copy.copy(k.ren)
  alone.ren.has_shared, alone.ren.shared_max = False, 0
  n = len(alone.axes_of(AxisType.REDUCE))
  try:
    # tinygrad unrolls only the last reduction (after its upcasts, if they stay small): the others first. Each stays a REDUCE axis,
    # smaller, in its place, so the i-th is looked up again after each unroll
    for i in range(n - 1):
      if alone.full_shape[ax := alone.axes_of(AxisType.REDUCE)[i]] % FLOAT4 == 0:
        alone.apply_opt(Opt(OptOps.UNROLL, alone.unrollable_dims.index(ax), FLOAT4))
    mine = heuristic(alone)
    if len(mine.axes_of(AxisType.UNROLL)) < n and mine.unrollable_dims and mine.full_shape[mine.unrollable_dims[-1]] % FLOAT4 == 0:
      mine.apply_opt(Opt(OptOps.UNROLL, len(mine.unrollable_dims) - 1, FLOAT4))
  except KernelOptError: return out
  mine.ren = k.ren
  # workgroups enough for the driver's threads (as widen keeps, passes/simd.py)
  return mine if prod(mine.full_shape[a] for a in mine.axes_of(AxisType.GLOBAL)) >= enough_groups(caps) else out

LANE = 16    # an elementwise kernel's neighbours a lane takes: 4 float4s
LANE_MIN_WORK = 1 << 20   # elements: a smaller kernel's 4x longer code would cost more compile time at its first launch than it wins

def quads(k:Scheduler, heuristic:Callable[[Scheduler], Scheduler], caps:Caps) -> Scheduler:
  """tinygrad's heuristic on k with a first upcast of FLOAT4 where it would take 3, or LANE on a large elementwise kernel."""
  if not all(isinstance(s, int) for s in k.full_shape): return heuristic(k)
  if not k.axes_of(AxisType.REDUCE) and k.upcastable_dims and k.full_shape[ax := k.upcastable_dims[-1]] % LANE == 0 and \
     prod(k.full_shape) >= max(LANE_MIN_WORK, LANE * WIDE * enough_groups(caps)):   # those workgroups stay
    # the output's last axis, along which it is stored: tinygrad's own pick where it upcasts nothing else
    (pre := k.copy()).apply_opt(Opt(OptOps.UPCAST, ax, LANE))
    return heuristic(pre)
  out = heuristic(k)
  if len(out.applied_opts) <= (i := len(k.applied_opts)) or (o := out.applied_opts[i]) != Opt(OptOps.UPCAST, o.axis, 3) or \
     k.full_shape[o.axis] % FLOAT4: return out
  try: (pre := k.copy()).apply_opt(Opt(OptOps.UPCAST, o.axis, FLOAT4))
  except KernelOptError: return out
  return heuristic(pre)

def with_opts(heuristic:Callable[[Scheduler], Scheduler], caps:Caps) -> Callable[[Scheduler], Scheduler]:
  """tinygrad's heuristic with this device's choices."""
  if "quads" in caps: heuristic = functools.partial(quads, heuristic=heuristic, caps=caps)
  return functools.partial(rows, heuristic=heuristic, caps=caps) if "rows" in caps else heuristic
