"""sin without 64-bit integers: tinygrad's xsin with the Payne-Hanek reduction on (hi, lo) uint32 pairs, the 2/pi bits shifted
with 32-bit shifts and x * 2/pi as three 32x32 -> 64-bit products of 16-bit halves. tinygrad's reduction uses uint64 and comes
after its own int64 emulation ran: split into int pairs later it grows a sin into ~20000 UOps (its 64-bit division is bit-serial).
On devices without shaderInt64 `sin32_matcher` lowers float32 SIN in the renderer's final rewrite, before renderer/kernel.py's
`transcendental_matcher` (the renderer keeps SIN on every device).
"""
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import UOp, UPat, Ops, PatternMatcher
from tinygrad.codegen.decomp.transcendental import _lazy_map_numbers, frexp, cody_waite_reduction, sin_poly_small, sin_poly_large

TWO_OVER_PI = [0x00000000, 0x28be60db, 0x9391054a, 0x7f09d5f4, 0x7d4d3770, 0x36d8a566, 0x4f10e410]   # 2/pi, 32 bits a word
def _u(v:int) -> UOp: return UOp.const(v, dtypes.uint)
def mul32(a:UOp, b:UOp) -> tuple[UOp, UOp]:
  """(high, low) words of the 64-bit product of two uint32."""
  a0, a1, b0, b1 = a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16
  t = a0 * b0
  m1 = a1 * b0 + (t >> 16)
  m2 = a0 * b1 + (m1 & 0xFFFF)
  return a1 * b1 + (m1 >> 16) + (m2 >> 16), a * b

def payne_hanek32(d:UOp) -> tuple[UOp, UOp]:
  """tinygrad's payne_hanek_reduction for float32 d >= 30: (d mod pi/2 rounded to nearest, quadrant as int32)."""
  f, e = frexp(d)
  ia = (f * 4294967296.0).cast(dtypes.uint)   # the 24-bit mantissa, at the top of a word
  word, sh = (e >> 5).cast(dtypes.uint), (e & 31).cast(dtypes.uint)
  def take(k:int) -> UOp:   # TWO_OVER_PI[word + k], 0 past its end
    out = _u(0)
    for j in reversed(range(len(TWO_OVER_PI) - 1 - k)): out = word.ne(j).where(out, _u(TWO_OVER_PI[j + k]))
    return out
  a = [take(k) for k in range(4)]
  hi, mi, lo = [(a[k] << sh) | ((a[k + 1] >> 1) >> (31 - sh)) for k in range(3)]   # a >> (32 - sh), also for sh = 0
  # p = (ia*hi << 32) + ia*mi + (ia*lo >> 32), mod 2^64, as (p1, p0)
  (_, hi0), (mi1, mi0), (lo1, _) = mul32(ia, hi), mul32(ia, mi), mul32(ia, lo)
  p0 = mi0 + lo1
  p1 = hi0 + mi1 + (p0 < mi0).cast(dtypes.uint)
  q = (p1 >> 30).cast(dtypes.int)
  frac = (p1 & 0x3FFFFFFF).cast(dtypes.float) * 4294967296.0 + p0.cast(dtypes.float)
  r = frac * 3.4061215800865545e-19   # pi/2 / 2^62
  return (f < 0.5).where(r, r - 1.5707963267948966), (f < 0.5).where(q, q + 1)

def xsin32(d:UOp) -> UOp:
  """tinygrad's xsin (1 ULP) for float32, Payne-Hanek in 32-bit words."""
  x = _lazy_map_numbers(d, d.const_like(0.0), d.const_like(0.0), d.const_like(0.0), d)
  x_sign = x.ne(0).where((x < 0).where(x.const_like(-1), x.const_like(1)), x.const_like(0))
  x_abs = x * x_sign
  r, q = payne_hanek32(x_abs)
  r_small, q_small = cody_waite_reduction(x_abs)
  result = (x_abs < 30.0).where(sin_poly_small(r_small, q_small), sin_poly_large(r, q)) * x_sign
  return _lazy_map_numbers(d, d.const_like(float("nan")), d.const_like(float("nan")), d.const_like(float("nan")), result)

# float64 has no 32-bit reduction here: tinygrad's (renderer/kernel.py), whose int64 math renderer/passes/packing.py splits into int pairs
sin32_matcher = PatternMatcher([(UPat(Ops.SIN, dtypes.float, src=(UPat.var("d"),)), xsin32)])
