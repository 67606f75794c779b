"""8- and 16-bit types on devices without 8/16-bit storage or arithmetic (buffers in 32-bit words, values in 32 bits), and int64
as 32-bit pairs without shaderInt64: like tinygrad's WGSL renderer, but a UOp pass both renderers run (`pack`, in SINK_PASSES).

A dtype is packed when the device lacks its feature (FLAG). A packed integer value is held in 32 bits, char/short sign-extended in
an int, uchar/ushort zero-extended in a uint: phase 1 moves every ALU op on it to the 32-bit type between casts, then phase 2 makes
each cast into the narrow type the wrap of its 32-bit value (skipped where its bounds fit) and the narrow loads, stores,
constants and registers 32-bit ones (it changes dtypes, so it runs once phase 1 has seen every narrow op).

A packed buffer (a global PARAM or a LOCAL BUFFER keeping its dtype, its size rounded up to whole words) and any 8/16-bit view
(BITCAST/SHRINK chain) of another buffer are accessed through words, with 32-bit shifts, masks and uint atomics only:
  * INDEX(BITCAST(B, uint), word), the BITCAST tagged "words" (`is_word_access`): word `word` of the memory of B, a PARAM (maybe
    under AFTER) or a LOCAL BUFFER under AFTER, declared as uint words when packed. With B's elements under 4 bytes `word` already
    holds the view's element offset (`view_offset`: a whole number of words, abi.py WORD_VIEW); with 4/8-byte elements the
    renderer adds B's offset, as for any uint view of B.
  * LOAD of such an INDEX (uint), gated as LOAD(idx, 0u, gate). A field that may straddle two words reads the next one too.
  * a field store STORE(idx, (LOAD(idx) & keep) | field[, gate]) (`read_modify_write`), emitted as atomicAnd(word, keep) then
    atomicOr(word, field) so that the fields other invocations store into the word at once are kept. Whole aligned words are
    plain stores; 8-byte views of packed memory are refused.
int64: tinygrad's int-pair rules (`pm_long_decomp`) run here, where they also see what its late decompositions add (float64 sin;
float32/half sin has its own 32-bit reduction, sin32.py), and the renderers declare long supported (tinygrad's tests of it run). A
64-bit scalar var, which those rules take for a buffer, reaches the kernel as its two push-constant words (`var_words`).
"""
from __future__ import annotations
import functools, math
from typing import cast
from dataclasses import replace
from tinygrad.dtype import DType, dtypes, AddrSpace, truncate
from tinygrad.uop.ops import UOp, Ops, UPat, PatternMatcher, GroupOp, graph_rewrite
from tinygrad.device import CompileError
from tinygrad.codegen.decomp.dtype import pm_long_decomp
from tinygrad_vk.renderer.views import chain, WORDS, is_word_access, multiple_of

NARROW = (dtypes.char, dtypes.uchar, dtypes.short, dtypes.ushort)
INT32_OF = {dtypes.char: dtypes.int, dtypes.short: dtypes.int, dtypes.uchar: dtypes.uint, dtypes.ushort: dtypes.uint}
FLAG = {dtypes.bool: "s8", dtypes.char: "i8", dtypes.uchar: "i8", dtypes.short: "i16", dtypes.ushort: "i16"}
STORAGE_FLAG = {1: "s8", 2: "s16"}   # what plain (unpacked) 8/16-bit accesses of another type's buffer need

@functools.cache
def packed_dtypes(caps) -> frozenset[DType]: return frozenset(dt for dt, f in FLAG.items() if f not in caps)
VIEW_OFFSET = "_o{0}"
VAR_WORD = "{0}[{1}]"   # word {1} of a 64-bit var {0} declared as uint[2] (without shaderInt64)
def view_offset(param:UOp) -> UOp:
  """The element offset of the view bound at this PARAM, which renderers read from the push constants (`_o<slot>`, abi.py)."""
  return UOp(Ops.CUSTOMI, dtypes.int, (UOp.const(param.arg.slot, dtypes.int),), VIEW_OFFSET)

# phase 1: narrow ALU ops computed in 32 bits
def _alu_in_32(ctx, x:UOp) -> UOp|None:
  if x.dtype not in packed_dtypes(ctx): return None
  w = INT32_OF[x.dtype]
  return UOp(x.op, w, tuple(s.cast(w) if s.dtype == x.dtype else s for s in x.src), x.arg).cast(x.dtype)
phase1 = PatternMatcher([(UPat(GroupOp.ALU, dtype=NARROW, name="x"), _alu_in_32)])

# phase 2: narrow values become 32-bit, memory goes through words
def sign_extend(bits:UOp, width:int) -> UOp:
  # shifted as uint and bitcast, so that the bounds tinygrad infers for the result are right ([-2^(width-1), 2^(width-1)))
  return (bits.cast(dtypes.uint) << (32 - width)).bitcast(dtypes.int) >> (32 - width)

def wrap(v:UOp, dt:DType) -> UOp:
  """v (int or uint) reduced to dt's range the way dt's arithmetic wraps; as is where its bounds already fit."""
  if dt.min <= v.vmin and v.vmax <= dt.max: return v
  return v & dt.max if dtypes.is_unsigned(dt) else sign_extend(v, 8*dt.itemsize)

def _to_narrow(x:UOp) -> UOp:
  """CAST/BITCAST into a narrow type: the 32-bit value of the result."""
  w, s = INT32_OF[x.dtype], x.src[0]
  if s.op is Ops.CONST: return UOp.const(truncate[x.dtype](int(s.arg)), w)
  if s.dtype == dtypes.bool: return s.cast(w)
  if dtypes.is_float(s.dtype): s = s.cast(dtypes.int)   # C: float -> integer truncates toward zero (then wraps)
  return wrap(s.cast(w), x.dtype)

def word_array(caps, bidx:UOp) -> UOp|None:
  """B, for a word access of a buffer B of 1/2-byte elements or a LOCAL one (its word index holds the view offset already); None for
  other accesses. B is declared as words when it is packed or LOCAL, else the words are a uint alias of B."""
  if not is_word_access(bidx): return None
  base = bidx.src[0].src[0]
  if base.op is Ops.AFTER: base = base.src[0]
  return base if base.op is Ops.BUFFER or base.dtype in packed_dtypes(caps) or base.dtype.itemsize < 4 else None

def read_modify_write(bidx:UOp, v:UOp) -> tuple[UOp, UOp|None]|None:
  """(keep, field) when STORE(bidx, v) is a field store, v = (LOAD(bidx) & keep) | field (`| field` maybe folded away)."""
  if not is_word_access(bidx): return None
  for masked, field in ((v, None),) + (((v.src[0], v.src[1]), (v.src[1], v.src[0])) if v.op is Ops.OR else ()):
    if masked.op is Ops.AND:
      for ld, keep in (masked.src, masked.src[::-1]):
        if ld.op is Ops.LOAD and ld.src[0] is bidx: return keep, field
  return None

def _needs_words(caps, bidx:UOp) -> bool:
  if bidx.op is not Ops.INDEX or bidx.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL) or is_word_access(bidx): return False
  base, terms, _ = chain(bidx)
  packed, smallest = packed_dtypes(caps), min(s for _, s in terms)
  return bidx.dtype in packed or base.dtype in packed or (smallest < 4 and STORAGE_FLAG[smallest] not in caps)

def _below_word(u:UOp) -> UOp:
  """u less the terms of its sum that are multiples of 4: the same value mod 4, the same UOp for accesses that differ only in them."""
  if u.op is not Ops.ADD: return u
  parts = [_below_word(x) for x in u.src if multiple_of(x) % 4]
  return parts[0] + parts[1] if len(parts) == 2 else parts[0] if parts else UOp.const(0, u.dtype)

def _locate(bidx:UOp) -> tuple[int, UOp, UOp, UOp, int]:
  """(field size in bytes, word view, word index, bit shift of the field in that word, alignment in bytes the field's offset is
  known to have). A 1/2-byte PARAM's view offset is a whole number of words (abi.py WORD_VIEW): the shift depends on the index
  inside the view only."""
  if bidx.dtype.itemsize > 4:
    raise CompileError(f"VULKAN: no {bidx.dtype} view of a buffer packed in 32-bit words ({bidx.src[0].dtype} needs its 8/16-bit feature)")
  base, terms, deps = chain(bidx)
  byte = sum((i.cast(dtypes.int) * s if s > 1 else i.cast(dtypes.int) for i, s in reversed(terms)), UOp.const(0, dtypes.int))
  word = byte + view_offset(base) * base.dtype.itemsize if base.op is Ops.PARAM and base.dtype.itemsize < 4 else byte
  view = (base.after(*deps) if deps else base).bitcast(dtypes.uint).rtag(WORDS)
  return bidx.dtype.itemsize, view, word >> 2, ((_below_word(byte) & 3) << 3).cast(dtypes.uint), min(min(s for _, s in terms), 4)
def _mask(k:int) -> int: return (1 << 8*k) - 1
def _bits(v:UOp, dt:DType) -> UOp:
  """The stored bits (uint) of the value v of dtype dt (narrow types are already 32-bit here)."""
  if dt == dtypes.bool: return v.where(UOp.const(1, dtypes.uint), UOp.const(0, dtypes.uint))
  if dt.itemsize == 2 and dtypes.is_float(dt): return v.bitcast(dtypes.ushort).cast(dtypes.uint)
  return v.bitcast(dtypes.uint) if dt.itemsize == 4 else v.cast(dtypes.uint)

def _value(bits:UOp, dt:DType) -> UOp:
  if dt == dtypes.bool: return bits.ne(0)
  if dt in INT32_OF: return bits if dtypes.is_unsigned(dt) else sign_extend(bits, 8*dt.itemsize)
  if dt.itemsize == 2: return bits.cast(dtypes.ushort).bitcast(dt)
  return bits.bitcast(dt)

def packed_load(ctx, ld:UOp) -> UOp|None:
  if ld.src[0].op is Ops.SHRINK: return _devectorize_load(ctx, ld)
  if not _needs_words(ctx, bidx := ld.src[0]): return None
  dt, gate = bidx.dtype, ld.src[2:]
  k, view, word, sh, align = _locate(bidx)
  w0 = view.index(word).load(*((UOp.const(0, dtypes.uint), *gate) if gate else ()))
  bits = w0 if k == 4 and align == 4 else w0 >> sh
  if align < k:   # the field may continue in the next word
    need = sh > (32 - 8*k)
    w1 = view.index(word + 1).load(UOp.const(0, dtypes.uint), need & gate[0] if gate else need)
    bits = bits | need.where(w1 << ((UOp.const(32, dtypes.uint) - sh) & 31), UOp.const(0, dtypes.uint))
  if k < 4: bits = bits & _mask(k)
  v = _value(bits, dt)
  # a gated-off word reads 0, so the field's value is then the zero of dt: an alternative of +0 needs no select
  alt = ld.src[1] if gate else None
  return v if alt is None or (alt.op is Ops.CONST and alt.arg == 0 and math.copysign(1, alt.arg) > 0) else gate[0].where(v, alt)

def _rmw(idx:UOp, keep:UOp, field:UOp|None, gate:UOp|None) -> UOp:
  old = idx.load(UOp.const(0, dtypes.uint), gate) if gate is not None else idx.load()
  return idx.store((old & keep) | field if field is not None else old & keep, gate)

def packed_store(ctx, st:UOp) -> UOp|None:
  bidx, v, *g = st.src
  if bidx.op is Ops.SHRINK: return _devectorize_store(ctx, st)
  if not _needs_words(ctx, bidx): return None
  dt, gate = bidx.dtype, (g[0] if g else None)
  k, view, word, sh, align = _locate(bidx)
  bits = _bits(v, dt)
  if k == 4 and align == 4: return view.index(word).store(bits, gate)
  m, ones = UOp.const(_mask(k), dtypes.uint), UOp.const(0xFFFFFFFF, dtypes.uint)
  if k < 4 and not (0 <= bits.vmin and bits.vmax <= _mask(k)): bits = bits & m
  stores = [_rmw(view.index(word), (m << sh) ^ ones, bits << sh, gate)]
  if align < k:
    need = sh > (32 - 8*k)
    back = (UOp.const(32, dtypes.uint) - sh) & 31
    stores.append(_rmw(view.index(word + 1), (m >> back) ^ ones, bits >> back, need & gate if gate is not None else need))
  return UOp.group(*stores)

def _lane_indexes(sh:UOp) -> list[UOp]: return [sh.src[0].index(sh.src[1] + j if j else sh.src[1]) for j in range(sh.max_numel())]
def _devectorize_load(ctx, ld:UOp) -> UOp|None:
  sh = ld.src[0]
  if not _needs_words(ctx, (lanes := _lane_indexes(sh))[0]): return None
  alt, gate = (ld.src[1], ld.src[2:]) if len(ld.src) > 1 else (None, ())
  return UOp.stack(*[l.load(cast(UOp, alt).index(j), *gate) if gate else l.load() for j, l in enumerate(lanes)])   # gated: alt is set

def _devectorize_store(ctx, st:UOp) -> UOp|None:
  sh, v, *gate = st.src
  if not _needs_words(ctx, (lanes := _lane_indexes(sh))[0]): return None
  return UOp.group(*[l.store(v.index(j), *gate) for j, l in enumerate(lanes)])

def _round_to_words(ctx, b:UOp) -> UOp|None:
  """A buffer of 1- or 2-byte elements gets whole words, so that its word view has a size."""
  if b.dtype.itemsize >= 4 or b.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL) or (n := b.max_numel()) % (per := 4 // b.dtype.itemsize) == 0:
    return None
  if b.addrspace == AddrSpace.LOCAL and b.dtype not in packed_dtypes(ctx): return None
  sz = b.src[0]
  return b.replace(src=(sz.replace(src=(UOp.const(n + per - n % per),)) if sz.op is Ops.CAST else UOp.const(n + per - n % per, sz.dtype),))

def _narrow_value(ctx, x:UOp) -> UOp|None:
  if x.dtype not in packed_dtypes(ctx) or x.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL): return None
  if x.op is Ops.CONST: return UOp.const(truncate[x.dtype](x.arg), INT32_OF[x.dtype])
  if x.op in (Ops.CAST, Ops.BITCAST): return _to_narrow(x)
  if x.op is Ops.BUFFER: return x.replace(dtype=INT32_OF[x.dtype], arg=replace(x.arg, dtype=INT32_OF[x.dtype]))   # registers
  return None

phase2 = PatternMatcher([
  (UPat(Ops.LOAD, name="ld"), packed_load),
  (UPat(Ops.STORE, name="st"), packed_store),
  (UPat((Ops.PARAM, Ops.BUFFER), name="b"), _round_to_words),
  (UPat(GroupOp.All, dtype=NARROW, name="x"), _narrow_value),
  # a cast to the type a value already has (left where a narrow value became 32-bit)
  (UPat((Ops.CAST, Ops.BITCAST), name="x"), lambda x: x.src[0] if x.src[0].dtype == x.dtype and x.addrspace not in (AddrSpace.GLOBAL,
   AddrSpace.LOCAL) else None),
])

def var_in_words(v:UOp) -> bool:
  """A var the renderers declare as uint[2]: a 64-bit one var_words rewrote (its mark: its shape source twice)."""
  return v.addrspace == AddrSpace.ALU and v.dtype.itemsize == 8 and len(v.src) == 2

def var_words(v:UOp) -> UOp|None:
  """A 64-bit scalar var as the long its two words make. The var left under CUSTOMI has its shape source twice, so tinygrad's
  buffer rule (one source: the size) does not take it."""
  if v.addrspace != AddrSpace.ALU or len(v.src) != 1: return None
  lo, hi = (UOp(Ops.CUSTOMI, dtypes.uint, (v.replace(src=v.src * 2), UOp.const(w, dtypes.int)), VAR_WORD).cast(dtypes.ulong) for w in (0, 1))
  return ((hi << 32) | lo).bitcast(v.dtype) if v.dtype == dtypes.long else (hi << 32) | lo

LONGS = (dtypes.long, dtypes.ulong)
pm_long_prep = PatternMatcher([
  (UPat(Ops.PARAM, LONGS, name="v"), var_words),
  # an int64 index (tinygrad's, from int64 math on values) is an int one: without shaderInt64 no buffer passes 2^31 elements
  (UPat(Ops.INDEX, src=(UPat.var("b"), UPat.var("i", LONGS)), allow_any_len=True, name="x"), lambda x,b,i:
   x.replace(src=(b, i.cast(dtypes.int), *x.src[2:]))),
  # casts between bfloat16 and int64 go through float first, as the renderers' bfloat16 rules (with shaderInt16) would do after
  # this pass, leaving an int64 cast unsplit
  (UPat(Ops.CAST, LONGS, src=(UPat.var("y", dtypes.bfloat16),), name="x"), lambda x,y: y.cast(dtypes.float).cast(x.dtype)),
  (UPat(Ops.CAST, dtypes.bfloat16, src=(UPat.var("y", LONGS),)), lambda y: y.cast(dtypes.float).cast(dtypes.bfloat16)),
])

def pack(sink:UOp, caps) -> UOp|None:
  out = sink
  if "i64" not in caps and any(u.dtype in LONGS for u in sink.toposort()):
    out = graph_rewrite(out, pm_long_prep, name="packing: int64 vars, indexes and bfloat16 casts")
    out = graph_rewrite(out, pm_long_decomp, ctx={}, bottom_up=True, name="packing: int64 as int pairs")
  if packed_dtypes(caps) or not all(STORAGE_FLAG[n] in caps for n in (1, 2)):
    out = graph_rewrite(graph_rewrite(out, phase1, ctx=caps, name="packing: narrow ops in 32 bits"), phase2, ctx=caps, name="packing: words")
  return None if out is sink else out
