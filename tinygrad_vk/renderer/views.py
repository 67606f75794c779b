"""Buffer views inside a kernel, read off the final UOps the same way by the shared plan (plan.py) and by packing.py.

A view is INDEX(BITCAST/SHRINK/AFTER ... (PARAM or BUFFER), index): the memory of one buffer at a byte offset, read as another
element type. Packing's word accesses are views too: INDEX(BITCAST(B, uint) tagged WORDS, word).
"""
from __future__ import annotations
import math
from tinygrad.dtype import AddrSpace
from tinygrad.uop.ops import Ops, UOp
from tinygrad.device import CompileError

def chain(bidx:UOp) -> tuple[UOp, list[tuple[UOp, int]], list[UOp]]:
  """(base PARAM/BUFFER, [(element index, element size)] whose sum is the byte offset from the base's start, AFTER deps)."""
  terms, deps, v = [(bidx.src[1], bidx.src[0].dtype.itemsize)], [], bidx.src[0]
  while v.op in (Ops.BITCAST, Ops.SHRINK, Ops.AFTER):
    if v.op is Ops.SHRINK: terms.append((v.src[1], v.dtype.itemsize))
    if v.op is Ops.AFTER: deps += list(v.src[1:])
    v = v.src[0]
  if v.op not in (Ops.PARAM, Ops.BUFFER): raise CompileError(f"VULKAN: no buffer under the view's {v.op}")
  return v, terms, deps

def is_view(b:UOp) -> bool:
  """A buffer view inside a kernel: BITCAST/SHRINK of a global PARAM, addressed by the INDEX that uses it."""
  return b.op in (Ops.BITCAST, Ops.SHRINK) and b.addrspace == AddrSpace.GLOBAL

WORDS = "words"   # the tag of packing's word views
def is_word_access(bidx:UOp) -> bool:
  """Whether bidx is INDEX(word view, word) made by packing.py."""
  return bidx.op is Ops.INDEX and bidx.src[0].op is Ops.BITCAST and bidx.src[0].tag == WORDS

def multiple_of(u:UOp) -> int:
  """A number u is always a multiple of (1 when unknown), read off the index expression after tinygrad's late rewrites."""
  if u.op is Ops.CAST and u.src[0].op is Ops.CONST: u = u.src[0]   # literals are CAST(CONST) by now
  if u.op is Ops.CONST: return abs(int(u.arg)) or 1 << 30
  if u.op is Ops.ADD: return math.gcd(multiple_of(u.src[0]), multiple_of(u.src[1]))
  if u.op is Ops.MUL: return multiple_of(u.src[0]) * multiple_of(u.src[1])
  if u.op is Ops.SHL and (k := multiple_of(u.src[1])) < 32 and u.src[1].op in (Ops.CONST, Ops.CAST): return multiple_of(u.src[0]) << k
  return 1

MEMORY = (AddrSpace.GLOBAL, AddrSpace.LOCAL, AddrSpace.REG)   # an INDEX into a buffer of these is a memory access (else a vector lane)
