"""The optimizations tinygrad's heuristic picks for a kernel, changed where the device runs another choice better (flag "rows").

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
"""
from __future__ import annotations
import copy
from typing import Callable
from tinygrad.codegen.opt import Opt, OptOps, KernelOptError
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.uop.ops import AxisType
from tinygrad.helpers import prod
from tinygrad_vk.caps import Caps

UNROLL = 4   # a row's elements a loop pass reads: one float4

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
      if alone.full_shape[ax := alone.axes_of(AxisType.REDUCE)[i]] % UNROLL == 0:
        alone.apply_opt(Opt(OptOps.UNROLL, alone.unrollable_dims.index(ax), UNROLL))
    mine = heuristic(alone)
    if len(mine.axes_of(AxisType.UNROLL)) < n and mine.unrollable_dims and mine.full_shape[mine.unrollable_dims[-1]] % UNROLL == 0:
      mine.apply_opt(Opt(OptOps.UNROLL, len(mine.unrollable_dims) - 1, UNROLL))
  except KernelOptError: return out
  mine.ren = k.ren
  # workgroups enough for the driver's threads (as widen keeps, passes/simd.py)
  return mine if prod(mine.full_shape[a] for a in mine.axes_of(AxisType.GLOBAL)) >= 4 * max(caps.threads, 1) else out
