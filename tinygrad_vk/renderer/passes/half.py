"""half without shaderFloat16, bfloat16 without shaderInt16: values computed in float, memory in 16-bit words (packed in 32-bit
words by packing.py without 16-bit storage). Every op that rounds rounds its result to the type, as with the type native, and the
conversions are bit-exact, denormals included (h2f, f2h, f2b; tinygrad's f2f flushes them): so the renderers declare both types
supported on every device and tinygrad keeps them in the kernels (and runs its tests of them).

Not tinygrad's own emulation (pm_float_decomp): in 0.14.0 its ALU rule also casts the buffer under the AFTER of a half register
accumulator to float, failing UOp verification (half matmuls and attention: GPT-2, LLaMA), where here the AFTER keeps the
rewritten buffer; and this pass runs later, where a gated LOAD or STORE carries its gate (loads select their alternative per
lane, stores keep their gate). A register (REG buffer: an accumulator) keeps its type, which tinygrad reads off the final UOps
(test_linearizer's test_arg_acc_dtype), but holds float values already rounded by the op that made them: renderers declare it
float (`held`) and its loads are CASTs to float, no-ops.
"""
from __future__ import annotations
import functools
from typing import cast
from dataclasses import replace
from tinygrad.dtype import DType, dtypes, AddrSpace
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher, GroupOp, graph_rewrite
from tinygrad.codegen.decomp.dtype import f2f, f2f_dt, reindex

def _rw(ctx, u:UOp) -> UOp: return graph_rewrite(u, pm_half, ctx=ctx, bottom_up=True)
# denormals are kept, as with shaderFloat16 (and on CPU): a denormal half is its mantissa * 2^-24, exact in float; a float
# under half's smallest normal (exponent < 113) rounds to nearest even at 2^-24
def h2f(bits:UOp) -> UOp:
  """float from half bits (uint16)."""
  b = bits.cast(dtypes.uint)
  den = (b & 0x3ff).cast(dtypes.float) * 2.0**-24
  return ((b >> 10) & 0x1f).eq(0).where((b & 0x8000).ne(0).where(-den, den), f2f(bits, dtypes.half, dtypes.float))

def f2h(v:UOp) -> UOp:
  """half bits (uint16) of float v, rounded to nearest even (round_half), NaN quieted as a device converting it does."""
  r = round_half(v).bitcast(dtypes.uint)
  a = r & 0x7fffffff
  # under 2^-14 a multiple of 2^-24: the mantissa is that multiple (clamped, so that a constant infinity folds to no cast of it)
  den = (a.minimum(UOp.const(0x38800000, dtypes.uint)).bitcast(dtypes.float) * 2.0**24).cast(dtypes.uint)
  top = (a > 0x7f800000).where(((a >> 13) & 0x3ff) | 0x7e00, UOp.const(0x7c00, dtypes.uint))   # the top of float's exponents: NaN, infinity
  return (((r >> 16) & 0x8000) | (a < 0x38800000).where(den, (a < 0x7f800000).where((a >> 13) - 0x1c000, top))).cast(dtypes.ushort)

def f2b(v:UOp) -> UOp:
  """bfloat16 bits (uint16) of float v: tinygrad's bit math (cstyle.py cast_float_to_bf16, what the renderers use with
  shaderInt16) up to its final bitcast: nearest even, NaN stays NaN, denormals kept."""
  x = v.bitcast(dtypes.uint)
  x = (-x & 0x7f800000).ne(0).where(x + ((x >> 16) & 1) + 0x7fff, (x & 0xffff).ne(0).where(x | 0x10000, x))
  return (x >> 16).cast(dtypes.ushort)

def round_half(v:UOp) -> UOp:
  """float v rounded to half, kept in float: what h2f(f2h(v)) gives, in float's own bits (under half the ops: every half op
  rounds, so a half kernel's size is mostly this). Nearest even at the 13 bits below half's mantissa, more under 2^-14 (its
  denormals, 2^-24 apart), 0 or 2^-24 under 2^-24; from 65520 up infinity; NaN stays."""
  u = v.bitcast(dtypes.uint)
  a, sign, c = u & 0x7fffffff, u & 0x80000000, lambda n: UOp.const(n, dtypes.uint)
  s = (c(126) - (a >> 23).minimum(c(113))).minimum(c(23))   # bits dropped: 13 down to 2^-14, one more each binade under it
  ulp = c(1) << s
  r = (u + ((ulp >> 1) - 1) + ((u >> s) & 1)) & (c(0) - ulp)
  r = (a < 0x33800000).where(sign | (a > 0x33000000).where(c(0x33800000), c(0)), (a < 0x477ff000).where(r, sign | 0x7f800000))
  return (a > 0x7f800000).where(u, r).bitcast(dtypes.float)

# bfloat16 is float's upper half: widening is a shift
def to_float(dt, bits:UOp) -> UOp: return h2f(bits) if dt == dtypes.half else (bits.cast(dtypes.uint) << 16).bitcast(dtypes.float)
def from_float(dt, v:UOp) -> UOp: return f2h(v) if dt == dtypes.half else f2b(v)
def rounded(dt, v:UOp) -> UOp: return round_half(v) if dt == dtypes.half else to_float(dt, f2b(v))   # float v rounded to dt, kept in float

def _load(ctx, x:UOp) -> UOp|None:
  """A load of half or bfloat16 (n lanes): loads of 16-bit words converted to float; a gated one selects its alternative value in float
  (tinygrad's f2f_load hands the n-lane alternative to each word's load)."""
  if x.dtype != ctx[0] or x.src[0].tag == ctx[0]: return None
  idx, n, (alt, *gate) = _rw(ctx, x.src[0]), x.max_numel(), x.src[1:] or (None,)
  conv = (lambda v: v.cast(ctx[1])) if in_reg(idx) else functools.partial(to_float, ctx[0])   # a register's value is in float
  def lane(i:int) -> UOp:
    ix = idx if n == 1 else reindex(idx, i, 1)
    if not gate: return conv(ix.load())
    a = cast(UOp, alt)   # a gated load has its alternative
    return gate[0].where(conv(ix.load(UOp.const(0, ix.dtype), gate[0])), a if n == 1 else a.index(UOp.const(i, dtypes.int)))
  return lane(0) if n == 1 else UOp(Ops.STACK, src=tuple(lane(i) for i in range(n)))

def _store(ctx, st:UOp, idx:UOp, val:UOp) -> UOp|None:
  """A store of half or bfloat16 (n lanes) as stores of 16-bit words, keeping its gate."""
  if val.dtype != ctx[1] or idx.tag != ctx[0] or in_reg(idx): return None   # a register stores the float itself
  if (n := val.max_numel()) == 1: return st.replace(src=(idx, from_float(ctx[0], val), *st.src[2:]))
  return UOp.group(*(st.replace(src=(reindex(idx, i, 1), from_float(ctx[0], val.index(UOp.const(i, dtypes.int))), *st.src[2:])) for i in range(n)))

def _cast(ctx, x:UOp, val:UOp) -> UOp|None:
  """A cast into half (bfloat16): its value rounded to the type (tinygrad's rule only clamps to its range, leaving float's
  mantissa, so `a.half() * b.half()` multiplied unrounded inputs)."""
  if x.dtype != ctx[0]: return None
  return rounded(ctx[0], val if val.dtype == ctx[1] else val.cast(ctx[1]))

# ops whose result a device with the type rounds to it (CPU too); MAX, NEG, TRUNC and WHERE give a value of the type as they are
ROUNDED = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MULACC, Ops.FDIV, Ops.RECIPROCAL, Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.POW, Ops.CMOD)
def _alu(ctx, x:UOp) -> UOp|None:
  """An op on half (bfloat16) values, computed in float and rounded to the type (x % 1.25 of a half multiple of 1.25 is 0 only
  when x * half(0.8) rounds up to the integer)."""
  if x.dtype != ctx[0]: return None
  return rounded(ctx[0], UOp(x.op, ctx[1], tuple(s.cast(ctx[1]) if s.dtype == ctx[0] else s for s in x.src), x.arg, x.tag))

def in_reg(x:UOp) -> bool:
  """x is a register buffer or an access of one: these keep their type."""
  return x.op in (Ops.BUFFER, Ops.AFTER, Ops.INDEX, Ops.SHRINK) and x.addrspace == AddrSpace.REG or x.op is Ops.LOAD and in_reg(x.src[0])

def _after(ctx, x:UOp) -> UOp|None:
  if x.dtype != ctx[0] or (b := _rw(ctx, x.src[0])) is x.src[0]: return None
  return x.replace(dtype=b.dtype, src=(b, *x.src[1:]))

pm_half = PatternMatcher([
  # memory of the type becomes 16-bit words (tinygrad's rule); a register keeps its type
  (UPat(GroupOp.Defines, name="x"), lambda ctx,x: UOp(x.op, src=x.src, arg=replace(x.arg, dtype=f2f_dt[ctx[0]]), tag=ctx[0])
   if x.dtype == ctx[0] and x.addrspace != AddrSpace.REG else None),
  (UPat(ROUNDED, dtypes.floats, name="x"), _alu),
  (UPat(Ops.CAST, dtypes.floats, src=(UPat.var("val"),), name="x"), _cast),
  (UPat(Ops.AFTER, name="x"), _after),
  (UPat((Ops.INDEX, Ops.SHRINK), src=(UPat(GroupOp.All-{Ops.LOAD, Ops.STACK}),), allow_any_len=True, name="x"), lambda ctx,x:
   UOp(x.op, src=(_rw(ctx, x.src[0]), *x.src[1:]), arg=x.arg, tag=ctx[0]) if x.dtype == ctx[0] and x.tag != ctx[0] else None),
  (UPat(Ops.LOAD, dtypes.floats, name="x"), _load),
  (UPat(Ops.BITCAST, src=(UPat(Ops.LOAD, name="ld"),), name="bc"), lambda ctx,bc,ld:
   _rw(ctx, ld.src[0]).load(*ld.src[1:]).bitcast(bc.dtype) if ld.dtype == ctx[0] and not in_reg(ld) else None),
  # bitcasts between a half or bfloat16 value (a float by now) and 16-bit types: its bits
  (UPat(Ops.BITCAST, src=(UPat.var("x", dtypes.float),), name="bc"), lambda ctx,bc,x:
   from_float(ctx[0], x).bitcast(bc.dtype) if x.dtype == ctx[1] and bc.dtype.bitsize == 16 and bc.dtype != ctx[0] else None),
  (UPat(Ops.BITCAST, src=(UPat.var("x"),), name="bc"), lambda ctx,bc,x: to_float(ctx[0], x.bitcast(f2f_dt[ctx[0]])) if bc.dtype == ctx[0] else None),
  (UPat(Ops.STORE, src=(UPat.var("idx"), UPat(Ops.BITCAST, name="val")), allow_any_len=True, name="st"), lambda ctx,st,idx,val:
   st.replace(src=(idx, val.src[0].bitcast(f2f_dt[ctx[0]]), *st.src[2:])) if val.dtype == ctx[0] and idx.tag == ctx[0] and not in_reg(idx) else None),
  (UPat(Ops.STORE, src=(UPat.var("idx").or_casted(), UPat.var("val")), allow_any_len=True, name="st"), _store),
  # every other value of the type is a float (tinygrad's rules)
  (UPat(Ops.CONST, dtypes.floats, name="x"), lambda ctx,x: UOp.const(x.val, ctx[1]) if x.dtype == ctx[0] else None),
  (UPat(GroupOp.All-GroupOp.Defines-{Ops.CAST, Ops.BITCAST, Ops.CONST}, dtypes.floats, name="x"), lambda ctx,x:
   UOp(x.op, src=tuple(s.cast(ctx[1]) if s.dtype == ctx[0] else s for s in x.src), arg=x.arg, tag=x.tag)
   if x.dtype == ctx[0] and not in_reg(x) else None),
])

IN_WORDS = {dtypes.half: "f16", dtypes.bfloat16: "i16"}   # each type, and the flag that makes it native
@functools.cache
def in_words(caps) -> tuple[DType, ...]: return tuple(dt for dt, flag in IN_WORDS.items() if flag not in caps)
def held(caps, dt:DType) -> DType:
  """The type renderers declare a value of dt as: float for a type in 16-bit words (only its registers are left typed so)."""
  return dtypes.float if dt in in_words(caps) else dt

def half_in_words(sink:UOp, caps) -> UOp|None:
  out = sink
  for dt in in_words(caps):
    if any(u.dtype == dt for u in out.toposort()):
      out = graph_rewrite(out, pm_half, ctx=(dt, dtypes.float), bottom_up=True, name=f"{dt.name} in 16-bit words")
  return None if out is sink else out
