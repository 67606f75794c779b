"""The direct SPIR-V renderer (renderer/spirv.py) against the GLSL renderer, its reference: the same kernels through both give the
same bits, every element also checked against numpy; its assembler against spirv-as; no compiler binary needed at run time."""
import os, shutil, struct, subprocess, tempfile
import numpy as np
import pytest
from tinygrad import Tensor, Device, Variable, dtypes
from tinygrad.helpers import Context
from tinygrad.dtype import _to_np_dtype
from tinygrad_vk.compiler import assemble
from tinygrad_vk.caps import Caps, spirv_target
from tinygrad_vk.renderer.abi import kernel_abi
from tinygrad_vk.spv import OPCODES, KernelMeta, add_notes
from util import data, kernel_sources, grouped_sources, run_python, shows, missing, in_words, vectors

NATIVE = sorted(Device["VULKAN"].renderer.supported_dtypes() - {dtypes.bfloat16}, key=lambda d: d.name)
needs_glslang = pytest.mark.skipif(shutil.which("glslangValidator") is None, reason="the GLSL reference renderer needs glslang-tools")

def spirv_sources(t:Tensor) -> list[str]:
  with Context(DEV="VULKAN:SPIRV"): return kernel_sources(t)

def both(fn) -> dict[str, np.ndarray]:
  """fn's result computed through each renderer (DEV=VULKAN:<renderer> picks it; each compiles its own programs)."""
  out = {}
  for ren, head in (("GLSL", "#version"), ("SPIRV", "; tinygrad_vk SPIR-V")):
    with Context(DEV=f"VULKAN:{ren}"):
      assert (srcs := kernel_sources(fn())) and all(s.startswith(head) for s in srcs), f"{ren} did not render these kernels"
      out[ren] = fn().numpy()
  return out

# tolerances against numpy for results that are not exact (Vulkan allows 2.5 ULP for division, more for transcendentals)
TOL = {np.float16: dict(rtol=1e-2, atol=1e-2), np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}

def same_bits(out:dict[str, np.ndarray], ref:np.ndarray, **tol):
  g, s = out["GLSL"], out["SPIRV"]
  assert g.dtype == s.dtype and g.shape == s.shape
  np.testing.assert_array_equal(s.view(f"u{s.itemsize}") if s.dtype != np.bool_ else s, g.view(f"u{g.itemsize}") if g.dtype != np.bool_ else g)
  if ref is not None:
    if tol: np.testing.assert_allclose(s, ref, **tol)
    else: np.testing.assert_array_equal(s, ref)

INT_OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b, "idiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
           "max": lambda a, b: a.maximum(b) if isinstance(a, Tensor) else np.maximum(a, b), "lt": lambda a, b: a < b, "ne": lambda a, b: a != b,
           "eq": lambda a, b: a == b, "xor": lambda a, b: a ^ b, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
           "where": lambda a, b: (a < b).where(a, b) if isinstance(a, Tensor) else np.where(a < b, a, b)}

@needs_glslang
def test_glsl_value_selects_are_not_branches():
  # glslang compiles every ?: into a branch and a Function variable: SwiftShader took minutes and 17 GB to build a half kernel with
  # 99 of them (tests/test_half_models.py under VULKAN_PROFILE=min). Selects of values (where, casts from bool, the log2 and sqrt
  # guards) are mix() with a bool selector, one OpSelect each; only the loop branches remain
  from tinygrad_vk.compiler import disassemble
  from util import glsl_compiler
  x = data(1031)
  def fn(): return (Tensor(x) > 0).where(Tensor(x).log2(), Tensor(x).sqrt()) + (Tensor(x) < 1).cast(dtypes.float)
  with Context(DEV="VULKAN:GLSL"):
    assert all("OpSelectionMerge" not in disassemble(glsl_compiler().compile(s)) for s in kernel_sources(fn()))
    with np.errstate(all="ignore"):
      np.testing.assert_allclose(fn().numpy(), np.where(x > 0, np.log2(x), np.sqrt(x)) + (x < 1), rtol=1e-6, atol=2**-21)

@pytest.mark.parametrize("renderer", ["SPIRV", "GLSL"])
def test_vector_loads_select_not_branch(renderer):
  # a float4 load reads the vecN alias where the view offset is aligned (a specialization constant, program.py) and the scalars
  # elsewhere. With a branch each, SwiftShader ran out of 23 GB building tinygrad's test_simple_conv2d_nhwc forward kernel (45 in its
  # loop, read as storage buffers: no texel path there); both are read and one selected now, which drivers fold once specialized
  from dataclasses import replace
  from tinygrad.codegen import to_program
  from tinygrad.uop.ops import Ops
  from tinygrad_vk.compiler import disassemble
  from util import glsl_compiler
  if renderer == "GLSL" and shutil.which("glslangValidator") is None: pytest.skip("the GLSL renderer needs glslang-tools")
  x, w = data((2, 9, 9, 10)), data((3, 3, 10, 20))
  def conv(): return Tensor.conv2d(Tensor(x).permute(0, 3, 1, 2), Tensor(w).permute(3, 2, 0, 1))
  with Context(DEV=f"VULKAN:{renderer}"):
    ren = Device["VULKAN"].renderer
    r = type(ren)(replace(ren.target, arch=replace(ren.caps, flags=ren.caps.flags - {"texel"}).encode()))
    srcs = [to_program(c.src[0], r).src[2].arg for c in conv().linear_with_vars()[0].src if c.src[0].op is Ops.SINK]
    mods = [s if renderer == "SPIRV" else disassemble(glsl_compiler().compile(s)) for s in srcs]
    if vectors(x.nbytes): assert any(" OpSelect " in m or "= OpSelect" in m for m in mods) and not any("OpSelectionMerge" in m for m in mods)
    ref = np.einsum("bhwcij,ijco->bohw", np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(1, 2)), w)
    np.testing.assert_allclose(conv().numpy(), ref, rtol=1e-4, atol=1e-4)

@needs_glslang
@pytest.mark.parametrize("dt", [d for d in NATIVE if d != dtypes.bool], ids=str)
def test_elementwise_every_dtype(dt):
  npdt = _to_np_dtype(dt)
  a, b = data(1031, npdt), data(1031, npdt)
  b = np.where(b == 0, 3, b).astype(npdt)
  ops = dict(INT_OPS) if dtypes.is_int(dt) else {k: v for k, v in INT_OPS.items() if k not in ("xor", "and", "or", "mod", "idiv")} | \
    {"div": lambda a, b: a / b, "neg": lambda a, b: -a, "fma": lambda a, b: a * b + a}
  if dtypes.is_int(dt): ops |= {"shl": lambda a, b: a << 3, "shr": lambda a, b: a >> 2}
  with np.errstate(all="ignore"):
    for name, f in ops.items():
      out = both(lambda: f(Tensor(a), Tensor(b)))
      ref = f(a, b) if name not in ("idiv", "mod") or not dtypes.is_int(dt) else (a // b if name == "idiv" else a % b)
      ref = np.asarray(ref).astype(out["SPIRV"].dtype)
      same_bits(out, ref, **(TOL[npdt] if name == "div" else {}))

@needs_glslang
@pytest.mark.parametrize("src", NATIVE, ids=str)
def test_casts_and_bitcasts(src):
  x = data(333, _to_np_dtype(src)) if src != dtypes.bool else data(333, np.bool_)
  if dtypes.is_float(src): x = np.concatenate([x, np.array([0.0, -0.0, 1.5, -2.5, 127.0], _to_np_dtype(src))])
  for d in (d for d in NATIVE if d != src):   # a cast to its own type is no kernel
    npd = _to_np_dtype(d)
    out = both(lambda: Tensor(x).cast(d))
    same_bits(out, out["SPIRV"])
    with np.errstate(all="ignore"): ref = x != 0 if d == dtypes.bool else x.astype(npd)
    # C leaves a float -> integer cast out of the integer's range undefined: compare the others
    ok = ((np.trunc(x.astype(np.float64)) >= np.iinfo(npd).min) & (np.trunc(x.astype(np.float64)) <= np.iinfo(npd).max)
          if dtypes.is_float(src) and dtypes.is_int(d) else slice(None))
    if dtypes.is_float(d) and d.itemsize < src.itemsize: np.testing.assert_allclose(out["SPIRV"][ok], ref[ok], **TOL[npd])
    else: np.testing.assert_array_equal(out["SPIRV"][ok], ref[ok])
    if d.itemsize == src.itemsize and dtypes.bool not in (d, src):
      same_bits(both(lambda: Tensor(x).bitcast(d)), x.view(_to_np_dtype(d)))

@needs_glslang
def test_bool_logic():
  a, b = data(1031, np.bool_), data(1031, np.bool_)
  for f in (lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b, lambda a, b: a != b, lambda a, b: a == b):
    same_bits(both(lambda: f(Tensor(a), Tensor(b))), f(a, b))
  same_bits(both(lambda: Tensor(a).logical_not()), ~a)
  same_bits(both(lambda: Tensor(a).where(1.5, -2.0).cast(dtypes.float32)), np.where(a, np.float32(1.5), np.float32(-2.0)))

def mod_ref(npdt):
  """x % 1.25 as tinygrad defines it, x - floor(x * (1/1.25)) * 1.25, with the quotient rounded to the type: just under a
  multiple of 1.25 a half quotient rounds up to the integer and the remainder is about -0.002 (CPU's too), where np.mod gives
  about 1.248. The data are random, so whether an input lands there depends on the tests run before."""
  return lambda v: v - np.floor((v.astype(npdt) * npdt(1 / 1.25)).astype(np.float64)) * 1.25

@needs_glslang
@pytest.mark.parametrize("dt", [d for d in NATIVE if dtypes.is_float(d)], ids=str)
def test_transcendental(dt):
  npdt = _to_np_dtype(dt)
  x = np.concatenate([data(500, npdt, lo=-6, hi=6), np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1.0], npdt)]).astype(npdt)
  def gelu(v): return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
  with np.errstate(all="ignore"):
    for f, ref in ((lambda t: t.exp(), np.exp), (lambda t: t.log(), np.log), (lambda t: t.exp2(), np.exp2), (lambda t: t.log2(), np.log2),
                   (lambda t: t.sqrt(), np.sqrt), (lambda t: t.sin(), np.sin), (lambda t: t.cos(), np.cos), (lambda t: t.tanh(), np.tanh),
                   (lambda t: t.sigmoid(), lambda v: 1 / (1 + np.exp(-v))), (lambda t: t.gelu(), gelu), (lambda t: t.reciprocal(), lambda v: 1 / v),
                   (lambda t: t.trunc(), np.trunc), (lambda t: t.pow(1.7), lambda v: np.power(v, 1.7)), (lambda t: t % 1.25, mod_ref(npdt))):
      same_bits(both(lambda: f(Tensor(x))), ref(x.astype(np.float64)), **TOL[npdt])
    same_bits(both(lambda: Tensor(x).isnan()), np.isnan(x))
    same_bits(both(lambda: Tensor(x).isinf()), np.isinf(x))

@needs_glslang
@pytest.mark.parametrize("shape,axis", [((37, 4000), 1), ((4000,), None), ((4000, 37), 0), ((257, 33), 1)])
def test_reductions(shape, axis):
  x = data(shape)
  with Context(DEV="VULKAN:SPIRV"): srcs = grouped_sources(Tensor(x).sum(axis))
  if shape != (257, 33): assert any(shows(s, "shared") for s in srcs), "expected a GROUP reduction through shared memory"
  same_bits(both(lambda: Tensor(x).sum(axis)), x.sum(axis), rtol=1e-4, atol=1e-3)
  same_bits(both(lambda: Tensor(x).max(axis)), x.max(axis))
  e = np.exp(x - x.max(-1, keepdims=True))
  same_bits(both(lambda: Tensor(x).softmax(-1)), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
  xi = data(shape, np.int32)
  same_bits(both(lambda: Tensor(xi).sum(axis)), xi.sum(axis, dtype=np.int32))

@needs_glslang
def test_matmul_conv_and_gated_loads():
  a, b = data((67, 45)), data((45, 31))
  same_bits(both(lambda: Tensor(a) @ Tensor(b)), a @ b, rtol=1e-4, atol=1e-4)
  x, w = data((2, 3, 11, 13)), data((5, 3, 3, 3))
  windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
  same_bits(both(lambda: Tensor(x).conv2d(Tensor(w), padding=1)), np.einsum("bchwij,ocij->bohw", windows, w), rtol=1e-5, atol=1e-5)
  c = data((5, 7, 9))
  same_bits(both(lambda: Tensor(c).pad(((1, 2), (0, 3), (2, 0))) + 1), np.pad(c, ((1, 2), (0, 3), (2, 0))) + 1)
  same_bits(both(lambda: Tensor(c).cat(Tensor(c[:, :3]), dim=1) * 3), np.concatenate([c, c[:, :3]], axis=1) * 3)

@needs_glslang
@pytest.mark.parametrize("dt", [dtypes.float, dtypes.half, dtypes.int, dtypes.uchar], ids=str)
def test_views_and_float4(dt):
  npdt = _to_np_dtype(dt)
  base = data(4 * 257 + 8, npdt)
  t = Tensor(base).realize()
  if dt != dtypes.uchar and dt in NATIVE and not in_words(dt) and vectors(base.nbytes):   # 8-bit types and half in words have none
    assert any(shows(s, "vec4_var") for s in spirv_sources(t[:4 * 257] + t[4:4 * 257 + 4])), "expected a vec4 variable"
  ref_dt = np.float32 if dt not in NATIVE else npdt
  with np.errstate(all="ignore"):
    for start in range(5):   # the views' element offsets inside their bindings: 0..3, then 0 again
      same_bits(both(lambda: t[start:start + 4 * 257] * 3 + t[start + 3:start + 3 + 4 * 257]),
                (base[start:start + 4 * 257].astype(ref_dt) * ref_dt(3) + base[start + 3:start + 3 + 4 * 257].astype(ref_dt)).astype(npdt))

@needs_glslang
def test_symbolic_vars():
  a, b = data((3, 10)), data((10, 5))
  for i in (1, 4, 10):
    vi = Variable("i", 1, 10).bind(i)
    same_bits(both(lambda: (Tensor(a)[:, :vi] + 1).sum(1)), (a[:, :i] + 1).sum(1), rtol=1e-5, atol=1e-5)
    same_bits(both(lambda: Tensor(a)[:, :vi] @ Tensor(b)[:vi, :]), a[:, :i] @ b[:i, :], rtol=1e-5, atol=1e-6)

def test_assembler_matches_spirv_as():
  """Every kernel of a small model, assembled in-process and by spirv-as: the same words."""
  if shutil.which("spirv-as") is None: pytest.skip("spirv-as (spirv-tools) not installed")
  x, w = Tensor(data((2, 3, 9, 9))), Tensor(data((4, 3, 3, 3)))
  srcs = spirv_sources((x.conv2d(w).relu().max_pool2d().flatten(1).softmax(-1).log() * 2).cast(dtypes.half))
  if not missing(dtypes.float64): srcs += spirv_sources(Tensor([np.nan, np.inf, -np.inf, -0.0], dtype=dtypes.float64) * Tensor(data(4, np.float64)))
  target = spirv_target(Device["VULKAN"].caps)   # SPIR-V 1.3 on Vulkan 1.1 (VULKAN_PROFILE=min), 1.5 from Vulkan 1.2
  for src in srcs:
    with tempfile.TemporaryDirectory() as d:
      open(f := os.path.join(d, "k.spvasm"), "w").write(src)
      subprocess.run(["spirv-as", "--target-env", target.env, f, "-o", f + ".spv"], check=True, capture_output=True)
      ref, ours = open(f + ".spv", "rb").read(), assemble(src, target.word)
    assert ours[:8] == ref[:8] and ours[12:] == ref[12:], src   # word 2 is the generator id

def test_no_compiler_binary(tmp_path):
  """DEV=VULKAN end to end with glslang and spirv-tools off PATH: nothing runs a binary (PATH is an empty folder)."""
  r = run_python("""
import shutil, numpy as np
from tinygrad import Tensor
assert shutil.which("glslangValidator") is None and shutil.which("spirv-val") is None
x = np.random.default_rng(0).uniform(-2, 2, (33, 70)).astype(np.float32)
out = (Tensor(x).softmax(1) @ Tensor(x.T)).numpy()
e = np.exp(x - x.max(1, keepdims=True))
np.testing.assert_allclose(out, (e / e.sum(1, keepdims=True)) @ x.T, rtol=1e-4, atol=1e-5)
print("ok")""", {"PATH": str(tmp_path), "DEV": "VULKAN", "VULKAN_VALIDATE_SPIRV": "0", "CACHELEVEL": "0"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_lowering_error_names_kernel_and_uop():
  from tinygrad.device import CompileError
  from tinygrad.uop.ops import Ops, UOp, KernelInfo
  from tinygrad_vk.renderer.spirv import SPIRVRenderer
  ren = SPIRVRenderer(Device["VULKAN"].renderer.target)
  buf = UOp.param(0, dtypes.float, (4,))
  idx, bad = buf.index(UOp(Ops.CONST, dtypes.int, arg=0)), UOp(Ops.CUSTOM, dtypes.float, arg="magic()")
  uops = [buf, idx.src[1], idx, bad, st := idx.store(bad), UOp.sink(st, arg=KernelInfo(name="my_kernel"))]
  with pytest.raises(CompileError, match=r"kernel my_kernel: no SPIR-V for Ops.CUSTOM"):
    ren.render(uops)

def test_validation_switch():
  """VULKAN_VALIDATE_SPIRV=1 (on in the tests) runs spirv-val on what the assembler makes; off, the module is used as is."""
  from tinygrad.device import CompileError
  from tinygrad_vk.compiler import SPIRVCompiler
  with Context(DEV="VULKAN:SPIRV"): assert Device["VULKAN"].compiler.validate, "the tests must validate every SPIR-V module"
  if shutil.which("spirv-val") is None: pytest.skip("spirv-val (spirv-tools) not installed")
  # assembles, but is not a valid module: the storage buffer's struct lacks its Block decoration
  src = "\n".join(["OpCapability Shader", "OpMemoryModel Logical GLSL450", 'OpEntryPoint GLCompute %main "main" %buf',
    "OpExecutionMode %main LocalSize 1 1 1", "%void = OpTypeVoid", "%fn = OpTypeFunction %void", "%float = OpTypeFloat 32",
    "%arr = OpTypeRuntimeArray %float", "%st = OpTypeStruct %arr", "%p = OpTypePointer StorageBuffer %st", "%buf = OpVariable %p StorageBuffer",
    "%main = OpFunction %void None %fn", "%entry = OpLabel", "OpReturn", "OpFunctionEnd"])
  comp = SPIRVCompiler()
  comp.validate = False
  assert comp.compile(src)[:4] == b"\x03\x02\x23\x07"
  comp.validate = True
  with pytest.raises(CompileError, match="spirv-val rejected"): comp.compile(src)

EMPTY_KERNEL = """OpCapability Shader
OpMemoryModel Logical GLSL450
OpEntryPoint GLCompute %main "main"
OpExecutionMode %main LocalSize 3 1 1
%void = OpTypeVoid
%fn = OpTypeFunction %void
%main = OpFunction %void None %fn
%l = OpLabel
OpReturn
OpFunctionEnd"""

@pytest.mark.parametrize("caps, bufs, var_dtypes, wide, windows", [
  (Caps(), [(4, 10), (2, 7), (1, 3)], [], False, 0),                                                                # descriptors
  (Caps(frozenset({"bda", "i64"}), range=1024), [(4, 10), (4, 10**6), (8, None)], [dtypes.int, dtypes.long], False, 0),   # addresses
  (Caps(bufs=2), [(4, 10)] * 5, [dtypes.int], True, 0),                                       # windowed, launch x past the limit
  (Caps(range=1024), [(4, 10), (4, 10**6)], [dtypes.uint], False, 3)])                         # in pieces, split windows
def test_kernel_abi_travels_in_the_module(caps, bufs, var_dtypes, wide, windows):
  # the runtime reads the ABI the renderer decided from the module (spv.KernelMeta), never deciding it again
  abi = kernel_abi(caps, bufs, var_dtypes, wide, windows)
  assert KernelMeta.decode(add_notes(assemble(EMPTY_KERNEL), KernelMeta(abi=abi).encode())).abi == abi

def test_notes_refuse_a_zero_word_count():
  # add_notes walks the mode-setting section by word counts: an instruction of 0 words must not stall it
  spv = bytearray(assemble(EMPTY_KERNEL))
  spv[20:24] = struct.pack("<I", OPCODES["OpCapability"])   # the first instruction, its word count 0
  with pytest.raises(ValueError, match="word count 0"): add_notes(bytes(spv), ["tinygrad_vk.x"])
