"""Tensor cores through VK_KHR_cooperative_matrix (flag coopmat): what both renderers declare and how they lower tinygrad's WMMA.

tinygrad's TensorCore says which matrix element each thread of a warp holds; a cooperative matrix's layout inside its subgroup is
opaque. So a WMMA goes through workgroup memory: each thread stores its A, B and C elements into its subgroup's tiles, the
subgroup loads them as cooperative matrices (OpCooperativeMatrixLoadKHR), multiplies and adds, stores the result and each thread
reads its elements back. That works with any layout a device has, at the cost of the round trip, and lets us choose the
TensorCore's fragments so that a thread's elements are consecutive in the tiles: thread t of the warp holds A's and C's elements
t*n .. t*n+n-1 of the row-major tile, and B's of the column-major one.

tinygrad's warp is `threads` consecutive invocations of the workgroup (its local index, x fastest: ops_python.py's model): here a
subgroup of subgroupSize invocations, whole, that size required where it could vary (program.py), so tile w is the one of
invocations w*S .. w*S+S-1; the passes that reorder, join or tile local dims leave a kernel with a WMMA alone (passes/__init__.py).
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinygrad.dtype import DType, dtypes
from tinygrad.uop.ops import UOp
from tinygrad.codegen.opt.tc import TensorCore
from tinygrad_vk.caps import Caps, dtype_support

# VkComponentTypeKHR -> dtype
COMPONENT = {0: dtypes.half, 1: dtypes.float, 2: dtypes.double, 3: dtypes.char, 4: dtypes.short, 5: dtypes.int, 6: dtypes.long,
             7: dtypes.uchar, 8: dtypes.ushort, 9: dtypes.uint, 10: dtypes.ulong}

def tensor_core(M:int, N:int, K:int, S:int, din:DType, dout:DType) -> TensorCore:
  """The TensorCore of an MxNxK cooperative matrix on S threads whose fragments are consecutive elements of the tiles: C's bits
  (n's, then m's; the lowest its upcasts, the rest the lanes) in row-major order, A's (k's, m's) row-major, B's (k's, n's)
  column-major; each operand's remaining lane or upcast slots hold the dims it does not depend on."""
  m, n, k, s = (int(math.log2(v)) for v in (M, N, K, S))
  nu = m + n - s                                                                    # C's upcasts
  cname = [f"u{i}" if i < nu else f"l{i - nu}" for i in range(m + n)]               # C's bits, lowest first: n's then m's
  opts = tuple(f"{c[0]}{'0' if i < n else '1'}" for i, c in enumerate(cname))
  red = [f"r{i}" for i in range(k)]
  ups = (red + [f"u{i}" for i in range(nu)])[::-1]                                  # TensorCore.base_upcast_axes: elements, highest first
  def swizzle(bits:list[str], rest:list[str]):
    e = len(bits) - s                                                               # log2 of the elements a thread holds
    slot = {f"l{i}": bits[e + i] for i in range(s)} | {ups[e - 1 - j]: bits[j] for j in range(e)} | dict(zip(ups[e:], rest))
    return tuple(slot[f"l{i}"] for i in range(s)), tuple(slot[f"u{i}"] for i in range(nu)), tuple(slot[r] for r in red)
  return TensorCore(dims=(N, M, K), threads=S, elements_per_thread=(M*K//S, K*N//S, M*N//S), dtype_in=din, dtype_out=dout, opts=opts,
                    swizzle=(swizzle(red + cname[n:], cname[:n]), swizzle(red + cname[:n], cname[n:])))

def tensor_cores(caps:Caps) -> list[TensorCore]:
  """A TensorCore per shape the device reports whose types are native here and whose fragments tinygrad can model."""
  if "coopmat" not in caps or not caps.sg: return []
  out = []
  for i in range(0, len(caps.coop), 5):
    M, N, K, a, c = caps.coop[i:i+5]
    din, dout = COMPONENT.get(a), COMPONENT.get(c)
    if din is None or dout is None or any(dtype_support(repr(d)[7:], caps) != "native" for d in (din, dout)): continue
    if not all(v & (v - 1) == 0 for v in (M, N, K, caps.sg)) or min(M*N, M*K, K*N) < caps.sg: continue
    try: out.append(tensor_core(M, N, K, caps.sg, din, dout))
    except AssertionError: continue   # fragments tinygrad's TensorCore cannot describe
  # wider accumulators first: where a matmul's types leave a choice, tinygrad takes the first (and its tests test the first)
  return sorted(out, key=lambda tc: -tc.dtype_out.itemsize)

@dataclass(frozen=True)
class Wmma:
  """One WMMA of a kernel: its shape, types and its subgroup's tiles in workgroup memory (elements)."""
  M: int
  N: int
  K: int
  S: int
  din: DType
  dout: DType
  @staticmethod
  def of(x:UOp) -> Wmma:
    (N, M, K), din, _, S, _ = x.arg
    return Wmma(M, N, K, S, din, x.dtype)
  @property
  def name(self) -> str: return f"{self.M}_{self.N}_{self.K}_{repr(self.din)[7:]}_{repr(self.dout)[7:]}"
  def sizes(self) -> tuple[int, int, int]: return self.M * self.K, self.K * self.N, self.M * self.N   # A, B, C tile elements
  def tiles(self) -> tuple[tuple[int, int, bool, int], ...]:
    """A, B, C as each tile holds it: (rows, columns, column-major, stride): A row-major MxK, B column-major KxN, C row-major MxN."""
    return (self.M, self.K, False, self.K), (self.K, self.N, True, self.K), (self.M, self.N, False, self.N)
  def smem(self, invocations:int) -> int:
    """Workgroup memory bytes of the tiles of every subgroup of a workgroup."""
    a, b, c = self.sizes()
    return invocations // self.S * ((a + b) * self.din.itemsize + c * self.dout.itemsize)
  # the MulAdd's operands: signed integer components (SPIR-V's integers carry no sign)
  @property
  def signed(self) -> tuple[bool, bool]: return self.din in dtypes.sints, self.dout in dtypes.sints
