"""The UOp rewrite passes over a whole kernel (both renderers), and their order.

tinygrad's final rewrite reaches the SINK after every op-level rule (renderer/kernel.py `extra_matcher`), tries the passes in
this order, and tries all of them again on the kernel one returns: each pass sees what every earlier one finished with, and
returns None once it has nothing to do.
"""
from __future__ import annotations
from typing import Callable
from tinygrad.uop.ops import UOp, Ops
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.passes.half import half_in_words
from tinygrad_vk.renderer.passes.packing import pack
from tinygrad_vk.renderer.passes.hoist import hoist, group
from tinygrad_vk.renderer.passes.loops import fit_budget
from tinygrad_vk.renderer.passes.simd import fill_x, lanes_x, widen
from tinygrad_vk.renderer.passes.tile import tile

# each with the flag that turns it on (None: always), and why it stands where it does:
#   half, packing: types first, so that the later passes see the loads, stores and registers the renderers will write;
#   hoist, group: before the loop budget, since a reduction computed once per workgroup or shared by its lanes makes fewer passes;
#   the loop budget (tile's epilogue loop, the only later pass that adds passes, adds a few: the budget is checked again as all
#   passes rerun on its kernel); lanex, fillx, tile: llvmpipe's speed paths, on the kernel's final loops
#   (lanex before fillx: which dim runs along x is chosen first, then a narrow x is filled with the others, x still fastest);
#   wide last: it joins whole workgroups of the kernel tile has shaped (tile counts workgroups to keep the threads busy).
SINK_PASSES: tuple[tuple[str|None, Callable[[UOp, Caps], UOp|None]], ...] = (
  (None, half_in_words), (None, pack), ("hoist", hoist), ("group", group), (None, fit_budget), ("lanex", lanes_x), ("fillx", fill_x),
  ("tile", tile), ("wide", widen))

# what a kernel with a tensor core (WMMA) keeps: its warps are tinygrad's local dims as they are (renderer/coopmat.py)
TYPE_PASSES = (half_in_words, pack)

def run_passes(caps:Caps, sink:UOp) -> UOp|None:
  wmma = "coopmat" in caps and any(u.op is Ops.WMMA for u in sink.toposort())
  return next((out for flag, f in SINK_PASSES if (flag is None or flag in caps) and (not wmma or f in TYPE_PASSES) and
               (out := f(sink, caps)) is not None), None)
