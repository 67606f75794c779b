"""What both renderers (GLSL and SPIR-V) do around their own lowering, so that they agree with each other and with the runtime:
  * `extra_matcher(caps)`: the UOp rewrites before rendering (what Vulkan's shading languages lack, bfloat16 in float,
    sin without int64 (sin32.py), 8/16-bit packing (packing.py), the loop budget (loops.py));
  * `check_kernel`: refuse, naming the kernel and the capability, what the device cannot run;
  * `plan_kernel`: the declaration plan of a kernel's buffers and scalars under the kernel ABI (abi.py, which the runtime packs):
    per slot its descriptor binding or push-constant address, the element type it is declared with, whether it is written.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinygrad.dtype import DType, dtypes, AddrSpace
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher
from tinygrad.renderer.cstyle import create_non_native_float_pats, pm_manual_bf16_cast
from tinygrad.renderer.wgsl import is_nan
from tinygrad.codegen.decomp.transcendental import xexp2, xlog2
from tinygrad.device import CompileError
from tinygrad.helpers import ceildiv
from tinygrad_vk.caps import Caps, dtype_support, DTYPE_RULES
from tinygrad_vk.renderer.abi import KernelABI, kernel_abi, numel
from tinygrad_vk.renderer.loops import pm_loop_budget, check_loop_budget
from tinygrad_vk.renderer.hoist import pm_hoist
from tinygrad_vk.renderer.simd import pm_fill_x
from tinygrad_vk.renderer.packing import packing_matcher, packed_dtypes
from tinygrad_vk.renderer.sin32 import sin32_matcher

# every dtype a renderer may declare (bfloat16 lives in 16-bit words, its math runs in float)
DTYPES = (dtypes.bool, dtypes.char, dtypes.uchar, dtypes.short, dtypes.ushort, dtypes.int, dtypes.uint, dtypes.long, dtypes.ulong,
          dtypes.half, dtypes.float, dtypes.double, dtypes.bfloat16)

def dtname(dt:DType) -> str: return repr(dt)[len("dtypes."):]

def supported_dtypes(caps:Caps) -> set[DType]:
  return {dt for dt in DTYPES if dtype_support(dtname(dt), caps) in ("native", "packed")}

# rewrites on the UOp graph, after tinygrad's decompositions
vulkan_matcher = PatternMatcher([
  # GLSL and SPIR-V have no ordering on bool
  (UPat(Ops.CMPLT, src=(UPat.var("a", dtypes.bool), UPat.var("b"))), lambda a,b: a.cast(dtypes.int) < b.cast(dtypes.int)),
  # GLSL.std.450 has no double exp2/log2: tinygrad's decompositions are exact enough in float64
  (UPat(Ops.EXP2, dtypes.double, src=(UPat.var("d"),)), xexp2),
  (UPat(Ops.LOG2, dtypes.double, src=(UPat.var("d"),)), xlog2),
  # Vulkan promises little for float16 transcendentals: compute them in float32
  (UPat((Ops.EXP2, Ops.LOG2, Ops.SQRT), dtypes.half, name="x"), lambda x: UOp(x.op, dtypes.float, (x.src[0].cast(dtypes.float),)).cast(dtypes.half)),
])
# without SignedZeroInfNanPreserve the compiler may assume no NaNs: test the bits instead of a != a
nan_bits_matcher = PatternMatcher([
  (UPat.var("a", dtypes.floats) != UPat.var("a"), is_nan),
  (UPat.var("a", dtypes.floats).alu(Ops.CMPEQ, UPat.var("a")), lambda a: is_nan(a).ne(True)),
])

def extra_matcher(caps:Caps) -> PatternMatcher:
  pm = (vulkan_matcher if "nan32" in caps else vulkan_matcher + nan_bits_matcher) + create_non_native_float_pats((dtypes.bfloat16,)) + \
    pm_manual_bf16_cast + packing_matcher + pm_hoist + pm_loop_budget + pm_fill_x
  # without int64 the renderer keeps SIN (see keeps_sin): tinygrad's sin needs 64-bit integers, sin32.py lowers it
  return sin32_matcher + pm if keeps_sin(caps) else pm

def keeps_sin(caps:Caps) -> bool: return "i64" not in caps

def check_kernel(caps:Caps, uops:list[UOp], name:str) -> None:
  """Refuse a kernel this device cannot run (CompileError naming the kernel, the dtype or the budget and why)."""
  if (bad := {u.dtype for u in uops if u.dtype in DTYPES} - supported_dtypes(caps)):
    raise CompileError(f"VULKAN: this device does not support {', '.join(sorted(dtname(d) for d in bad))} "
                       f"({'; '.join(sorted({refusal(d) for d in bad}))})")
  packed = packed_dtypes(caps)
  if (left := [u for u in uops if u.dtype in packed and u.op not in (Ops.PARAM, Ops.BUFFER, Ops.AFTER) and
               (u.dtype != dtypes.bool or u.op is Ops.INDEX and u.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL))]):
    raise CompileError(f"VULKAN: packing left {left[0].op} of {left[0].dtype} in {name}")
  if keeps_sin(caps) and (s := next((u for u in uops if u.op is Ops.SIN), None)) is not None:
    raise CompileError(f"VULKAN: SIN of {s.dtype} in {name} was not lowered (renderer/sin32.py)")
  check_loop_budget(uops, caps.maxloop, name)

def refusal(dt:DType) -> str: return f"{dtname(dt)}: {DTYPE_RULES[dtname(dt)][2] or 'not supported'}"

# ---- what both renderers read off the final UOps

UINT_OF_SIZE = {1: dtypes.uchar, 2: dtypes.ushort, 4: dtypes.uint, 8: dtypes.ulong}

def is_view(b:UOp) -> bool:
  """A buffer view inside a kernel: BITCAST/SHRINK of a global PARAM, addressed by the INDEX that uses it."""
  return b.op in (Ops.BITCAST, Ops.SHRINK) and b.addrspace == AddrSpace.GLOBAL

def multiple_of(u:UOp) -> int:
  """A number u is always a multiple of (1 when unknown), read off the index expression after tinygrad's late rewrites."""
  if u.op is Ops.CAST and u.src[0].op is Ops.CONST: u = u.src[0]   # literals are CAST(CONST) by now
  if u.op is Ops.CONST: return abs(int(u.arg)) or 1 << 30
  if u.op is Ops.ADD: return math.gcd(multiple_of(u.src[0]), multiple_of(u.src[1]))
  if u.op is Ops.MUL: return multiple_of(u.src[0]) * multiple_of(u.src[1])
  if u.op is Ops.SHL and (k := multiple_of(u.src[1])) < 32 and u.src[1].op in (Ops.CONST, Ops.CAST): return multiple_of(u.src[0]) << k
  return 1

def kernel_name(uops:list[UOp]) -> str:
  return uops[-1].arg.function_name if uops and uops[-1].op is Ops.SINK and uops[-1].arg is not None else "test"

@dataclass(frozen=True)
class Buf:
  """A global buffer parameter as the kernel declares it."""
  uop: UOp
  dtype: DType          # its element type in the shader: uint when packed in words (packing.py), uchar for bool, else its own
  binding: int|None     # descriptor binding, or None when passed by address
  address: int|None     # push-constant byte offset of its address
  writable: bool        # some STORE writes it (else readonly: the runtime needs no write hazard)

@dataclass(frozen=True)
class KernelPlan:
  abi: KernelABI
  bufs: dict[int, Buf]                  # slot -> buffer, for the slots the kernel still uses
  vars: tuple[tuple[UOp, int], ...]     # (scalar PARAM, push-constant byte offset)
  @property
  def nwords(self) -> int: return ceildiv(len(self.abi.binding), 4)   # words of _off[], the view offsets (a byte each)
  def addr64(self, slot:int, *idxs:UOp) -> bool:
    """tinygrad indexes this buffer in 64 bits and it is passed by address: the element address is computed in 64 bits (abi.py).
    A descriptor-bound buffer has at most 2^31-1 elements, so its int64 index is narrowed without loss."""
    return slot in self.bufs and self.bufs[slot].address is not None and any(i.dtype == dtypes.long for i in idxs)

def _stored_param(st:UOp) -> UOp:
  b = st.src[0]
  while b.op not in (Ops.PARAM, Ops.BUFFER) and b.src: b = b.src[0]
  return b

def plan_kernel(caps:Caps, uops:list[UOp]) -> KernelPlan:
  params = sorted((u for u in uops if u.op is Ops.PARAM), key=lambda u: u.arg.slot)
  gbufs = [u for u in params if u.addrspace == AddrSpace.GLOBAL]
  pvars = [u for u in params if u.addrspace == AddrSpace.ALU]
  # a buffer whose accesses were all folded away has no PARAM here, but keeps its slot (the runtime binds a scratch buffer there)
  slot_info = {u.arg.slot: (u.dtype.itemsize, numel(u._shape)) for u in gbufs}
  try: abi = kernel_abi(caps, [slot_info.get(i, (1, 0)) for i in range(max(slot_info, default=-1) + 1)], [u.dtype for u in pvars])
  except ValueError as e: raise CompileError(f"VULKAN: {e}") from e
  if abi.pc_size > caps.pc:
    raise CompileError(f"VULKAN: {sum(a is not None for a in abi.address)} buffer addresses, {len(gbufs)} view offsets and the scalars "
                       f"need {abi.pc_size} bytes of push constants, the device has {caps.pc} (maxPushConstantsSize)")
  written = {_stored_param(u) for u in uops if u.op is Ops.STORE}
  packed = packed_dtypes(caps)
  bufs = {u.arg.slot: Buf(u, dtypes.uint if u.dtype in packed else dtypes.uchar if u.dtype == dtypes.bool else u.dtype,
                          abi.binding[u.arg.slot], abi.address[u.arg.slot], u in written) for u in gbufs}
  return KernelPlan(abi, bufs, tuple((u, off) for u, (off, _) in zip(pvars, abi.vars)))
