"""What both renderers (GLSL and SPIR-V) declare and do around their own lowering, from the device's Caps:
  * `extra_matcher(caps)`: the UOp rewrites before rendering: what Vulkan's shading languages lack, then the passes over the whole
    kernel (passes/__init__.py, in their order);
  * `check_kernel`: refuse, naming the kernel and the capability, what the device cannot run;
  * `VulkanRenderer`: the limits, native ops and dtypes declared to tinygrad, its choice of optimizations (opts.py), and the
    kernel's plan (plan.py).
"""
from __future__ import annotations
from typing import Callable
from tinygrad.dtype import DType, dtypes, AddrSpace
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher
from tinygrad.renderer.cstyle import create_non_native_float_pats, pm_manual_bf16_cast
from tinygrad.renderer.wgsl import is_nan
from tinygrad.codegen.decomp.transcendental import xlog2, xsin, xexp2
from tinygrad.device import CompileError
from tinygrad.renderer import Renderer
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad_vk.caps import Caps, dtype_support, DTYPE_RULES, MAX_GROUPS_X, SUPPORTED
from tinygrad_vk.renderer.plan import KernelPlan, kernel_name, plan_kernel, local_size
from tinygrad.helpers import prod
from tinygrad_vk.renderer.passes import run_passes
from tinygrad_vk.renderer.passes.loops import check_loop_budget
from tinygrad_vk.renderer.passes.packing import packed_dtypes, var_in_words, LONGS
from tinygrad_vk.renderer.passes.sin32 import sin32_matcher
from tinygrad_vk.renderer.coopmat import tensor_cores, Wmma
from tinygrad_vk.renderer.opts import with_opts

# every dtype a renderer may declare (bfloat16 lives in 16-bit words, its math runs in float)
DTYPES = (dtypes.bool, dtypes.char, dtypes.uchar, dtypes.short, dtypes.ushort, dtypes.int, dtypes.uint, dtypes.long, dtypes.ulong,
          dtypes.half, dtypes.float, dtypes.double, dtypes.bfloat16)

def dtname(dt:DType) -> str: return repr(dt)[len("dtypes."):]

def supported_dtypes(caps:Caps) -> set[DType]:
  return {dt for dt in DTYPES if dtype_support(dtname(dt), caps) in SUPPORTED}

# rewrites on the UOp graph, after tinygrad's decompositions
vulkan_matcher = PatternMatcher([
  # GLSL and SPIR-V have no ordering on bool
  (UPat(Ops.CMPLT, src=(UPat.var("a", dtypes.bool), UPat.var("b"))), lambda a,b: a.cast(dtypes.int) < b.cast(dtypes.int)),
  # GLSL.std.450 has no double log2: tinygrad's decomposition is exact enough in float64
  (UPat(Ops.LOG2, dtypes.double, src=(UPat.var("d"),)), xlog2),
  # Vulkan promises little for float16 transcendentals: compute them in float32
  (UPat((Ops.LOG2, Ops.SQRT), dtypes.half, name="x"), lambda x: UOp(x.op, dtypes.float, (x.src[0].cast(dtypes.float),)).cast(dtypes.half)),
])
# without SignedZeroInfNanPreserve the compiler may assume no NaNs: test the bits instead of a != a
nan_bits_matcher = PatternMatcher([
  (UPat.var("a", dtypes.floats) != UPat.var("a"), is_nan),
  (UPat.var("a", dtypes.floats).alu(Ops.CMPEQ, UPat.var("a")), lambda a: is_nan(a).ne(True)),
])

# sin and exp2: tinygrad's decompositions (see NATIVE_OPS), in float32 for the narrower floats. The renderer keeps both ops, so tinygrad
# does not decompose them in float16 itself: Vulkan promises little for float16 math, and lavapipe compiles it slowly (LLaMA 512x8's
# first prefill in half, rotary embeddings' sin and cos in half, PARALLEL=0: 12.3 -> 6.8 s on Mesa 25.0, 5.0 -> 4.4 s on Mesa 22.3)
transcendental_matcher = PatternMatcher([
  (UPat((Ops.SIN, Ops.EXP2), tuple(dt for dt in dtypes.floats if dt not in (dtypes.float, dtypes.double)), name="x"),
   lambda x: UOp(x.op, dtypes.float, (x.src[0].cast(dtypes.float),)).cast(x.dtype)),
  (UPat(Ops.SIN, (dtypes.float, dtypes.double), src=(UPat.var("d"),)), xsin),
  (UPat(Ops.EXP2, (dtypes.float, dtypes.double), src=(UPat.var("d"),)), xexp2),
])
KEPT_OPS = (Ops.SIN, Ops.EXP2)

def extra_matcher(caps:Caps) -> PatternMatcher:
  # bfloat16 in 16-bit values computed in float needs shaderInt16; without it half.py keeps it in words, as half
  bf16 = create_non_native_float_pats((dtypes.bfloat16,)) + pm_manual_bf16_cast if "i16" in caps else PatternMatcher([])
  pm = (vulkan_matcher if "nan32" in caps else vulkan_matcher + nan_bits_matcher) + bf16 + \
    PatternMatcher([(UPat(Ops.SINK, name="sink"), lambda ctx, sink: run_passes(ctx.caps, sink))])
  # tinygrad's sin of float32 needs 64-bit integers: without them sin32.py's goes first
  return (sin32_matcher if "i64" not in caps else PatternMatcher([])) + transcendental_matcher + pm

def check_kernel(caps:Caps, uops:list[UOp], name:str) -> None:
  """Refuse a kernel this device cannot run (CompileError naming the kernel, the dtype or the budget and why)."""
  if (bad := sorted(dtname(d) for d in {u.dtype for u in uops if u.dtype in DTYPES} - supported_dtypes(caps))):
    why = "; ".join(f"{n}: {DTYPE_RULES[n][2] or 'not supported'}" for n in bad)
    raise CompileError(f"VULKAN: this device does not support {', '.join(bad)} ({why})")
  packed = packed_dtypes(caps)
  if (left := [u for u in uops if u.dtype in packed and u.op not in (Ops.PARAM, Ops.BUFFER, Ops.AFTER) and
               (u.dtype != dtypes.bool or u.op is Ops.INDEX and u.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL))]):
    raise CompileError(f"VULKAN: packing left {left[0].op} of {left[0].dtype} in {name}")
  if "i64" not in caps and (u := next((u for u in uops if u.dtype in LONGS and not var_in_words(u)), None)) is not None:
    raise CompileError(f"VULKAN: {u.op} of {u.dtype} (from {', '.join(f'{x.op} of {x.dtype}' for x in u.src)}) left in {name}: without "
                       "shaderInt64 int64 is split into 32-bit pairs, which a 64-bit view of another buffer's memory is not")
  if (s := next((u for u in uops if u.op in KEPT_OPS), None)) is not None:
    raise CompileError(f"VULKAN: {s.op} of {s.dtype} in {name} was not lowered (transcendental_matcher)")
  check_loop_budget(uops, caps.maxloop, name)
  if (wmmas := {Wmma.of(u) for u in uops if u.op is Ops.WMMA}):
    local = prod(local_size(uops))
    if local % next(iter(wmmas)).S: raise CompileError(f"VULKAN: kernel {name}: {local} invocations are not whole subgroups for its tensor cores")
    used = sum(w.smem(local) for w in wmmas) + \
      sum(u.max_numel() * u.dtype.itemsize for u in uops if u.op is Ops.BUFFER and u.addrspace == AddrSpace.LOCAL)
    if used > caps.smem: raise CompileError(f"VULKAN: kernel {name}: its tensor cores' tiles and shared memory need {used} bytes of "
                                             f"workgroup memory, maxComputeSharedMemorySize is {caps.smem}")

# ---- the renderers' common part
# the ops both renderers have native code for: tinygrad decomposes the others, the same way for both, so they compute the same bits.
# SIN is left out on purpose: Vulkan bounds its error only on [-pi, pi], so tinygrad's decomposition is used instead. So is EXP2:
# Vulkan allows Exp2 3+2|x| ulp, and lavapipe's and SwiftShader's are often off by more than 1; tinygrad's xexp2 is within 1 ulp, as
# on its CPU device. The renderer keeps both (KEPT_OPS) and transcendental_matcher decomposes them, in float32 for half.
NATIVE_OPS = (Ops.SQRT, Ops.LOG2, Ops.TRUNC, Ops.RECIPROCAL, Ops.NEG, Ops.AND, Ops.OR, Ops.XOR, Ops.ADD, Ops.MUL, Ops.SUB,
              Ops.FDIV, Ops.CDIV, Ops.CMOD, Ops.CMPNE, Ops.CMPEQ, Ops.CMPLT, Ops.SHR, Ops.SHL, Ops.WHERE)

class VulkanRenderer(Renderer):
  """What the GLSL and SPIR-V renderers declare to tinygrad, from the device's Caps (Target.arch), and the plan of a kernel."""
  has_local, has_shared = True, True
  def __init__(self, target):
    super().__init__(target)
    self.caps = Caps.decode(target.arch)
    self.global_max = (MAX_GROUPS_X, *self.caps.wgcount[1:])
    self.local_max, self.shared_max = self.caps.wgsize, self.caps.smem
    self.supports_float4 = "vec" in self.caps
    self.tensor_cores = tensor_cores(self.caps)
    self.extra_matcher = extra_matcher(self.caps)
    # tinygrad reads only which ops are native; a renderer that has no code for one (KEPT_OPS, lowered before rendering) keeps a stub
    self.code_for_op = {op: self.code_for_op.get(op, lambda *a, **kw: None) for op in NATIVE_OPS + KEPT_OPS}
  def supported_dtypes(self) -> set[DType]: return supported_dtypes(self.caps)
  def hand_coded_optimizations(self, k:Scheduler, heuristic:Callable[[Scheduler], Scheduler]) -> Scheduler:
    """tinygrad's heuristic (through the start-up hook, tinygrad_vk/__init__.py), changed where opts.py knows better."""
    return with_opts(heuristic, self.caps)(k)
  def kernel_plan(self, uops:list[UOp]) -> KernelPlan:
    check_kernel(self.caps, uops, kernel_name(uops))
    return plan_kernel(self.caps, uops)
