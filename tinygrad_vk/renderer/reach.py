"""The reach of a slot launched in pieces (abi.py REACH): which bytes of it each workgroup along x can touch, proven from
tinygrad's index bounds. An Access term that is None is the view offset _o (plan.py OFFSET), counted as 0."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, cast
from fractions import Fraction
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp
from tinygrad_vk.renderer.passes.packing import VIEW_OFFSET
if TYPE_CHECKING: from tinygrad_vk.renderer.plan import Access, KernelPlan

def _const(u:UOp) -> int|None:
  if u.op is Ops.CAST and u.src[0].op is Ops.CONST: u = u.src[0]
  return int(u.arg) if u.op is Ops.CONST else None

def affine(u:UOp, g:UOp|None) -> tuple[Fraction, Fraction, Fraction]|None:
  """u as A*g + r with r in [LO, HI] for every value of the other variables (tinygrad's bounds), the view offset _o counted as 0
  (the runtime places the window relative to the view); None when u is not of that form (g inside an op other than +, * or
  << by a constant, >> by one, an integer cast)."""
  if u.op is Ops.CUSTOMI and u.arg == VIEW_OFFSET: return Fraction(0), Fraction(0), Fraction(0)
  if u is g: return Fraction(1), Fraction(0), Fraction(0)
  if not any(x is g or (x.op is Ops.CUSTOMI and x.arg == VIEW_OFFSET) for x in u.toposort()): return Fraction(0), Fraction(u.vmin), Fraction(u.vmax)
  if u.op is Ops.CAST and dtypes.is_int(u.dtype) and dtypes.is_int(u.src[0].dtype): return affine(u.src[0], g)
  if u.op is Ops.ADD:
    if (x := affine(u.src[0], g)) is None or (y := affine(u.src[1], g)) is None: return None
    return x[0] + y[0], x[1] + y[1], x[2] + y[2]
  if u.op in (Ops.MUL, Ops.SHL, Ops.SHR):
    v, c = (u.src[1], _const(u.src[0])) if u.op is Ops.MUL and _const(u.src[0]) is not None else (u.src[0], _const(u.src[1]))
    if c is None or (x := affine(v, g)) is None: return None
    if u.op is Ops.SHR: return x[0] / 2**c, x[1] / 2**c - 1, x[2] / 2**c
    f = Fraction(2**c if u.op is Ops.SHL else c)
    return (x[0] * f, x[1] * f, x[2] * f) if f >= 0 else (x[0] * f, x[2] * f, x[1] * f)
  return None

SLACK = 8   # bytes of reach added on each side: a packed word holds bytes of the elements around the one accessed

def access_reach(a:Access, g:UOp|None) -> tuple[int, int, int]|None:
  """(a, lo, hi): the bytes past the view's start that the access can touch from workgroup x lie in [a*x + lo, a*x + hi)."""
  parts = [affine(t, g) for t, _ in a.terms if t is not None]
  if any(p is None for p in parts): return None
  known = cast(list[tuple[Fraction, Fraction, Fraction]], parts)   # none is None
  scales = [s for t, s in a.terms if t is not None]
  A, LO, HI = (sum((p[i] * s for p, s in zip(known, scales)), Fraction(a.add)) if i else sum(p[0] * s for p, s in zip(known, scales))
               for i in range(3))
  size = a.dtype.itemsize
  if (A * size).denominator != 1: return None
  return int(A * size), math.floor(LO * size) - SLACK, math.ceil((HI + max(a.vec, a.k)) * size) + SLACK

def slot_reach(plan:KernelPlan, uops:list[UOp], slots:set[int]) -> tuple[dict[int, tuple[tuple[int, int, int], ...]], dict[int, str]]:
  """The reach of every access of these slots, and for the slots that have none, why."""
  g = next((u for u in uops if u.op is Ops.SPECIAL and u.arg[0] == "g" and u.arg[-1] == "0"), None)
  out: dict[int, set] = {s: set() for s in slots}
  why: dict[int, str] = {}
  for a in plan.accesses(uops):
    if a.slot not in slots or a.slot in why: continue
    if (r := access_reach(a, g)) is None: why[a.slot] = "its index is not bounded per workgroup (it depends on memory or wraps around)"
    else: out[a.slot].add(r)
  # one window holds what all of a slot's accesses reach (a kernel may write two halves of one buffer), from a start aligned down
  # (windows.py piece_len)
  for s, rs in out.items():
    if s not in why and rs and (n := max(hi for _, _, hi in rs) - min(lo for _, lo, _ in rs)) + max(plan.caps.align, 256) + 4 > plan.caps.range:
      why[s] = f"one workgroup reaches {n} bytes of it"
  return {s: tuple(sorted(rs)) for s, rs in out.items() if s not in why}, why
