"""Every dtype the device supports natively, and the emulated ones, on nonuniform data against numpy."""
import shutil
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.dtype import _to_np_dtype
from tinygrad.helpers import Context
from util import data, run_python, missing, flushed

# numpy has no bfloat16: it is checked against a rounding reference in test_bfloat16 and tests/test_lowering.py
NATIVE = sorted(Device["VULKAN"].renderer.supported_dtypes() - {dtypes.bfloat16}, key=lambda d: d.name)
INTS = [d for d in NATIVE if dtypes.is_int(d)]
FLOATS = [d for d in NATIVE if dtypes.is_float(d)]

@pytest.mark.parametrize("dt", INTS, ids=str)
def test_int_arith(dt):
  npdt = _to_np_dtype(dt)
  a, b = data(1031, npdt), data(1031, npdt)
  b = np.where(b == 0, 3, b).astype(npdt)
  ta, tb = Tensor(a), Tensor(b)
  with np.errstate(over="ignore"):
    np.testing.assert_array_equal((ta + tb * ta - tb).numpy(), (a + b * a - b).astype(npdt))
    np.testing.assert_array_equal((ta ^ tb).numpy(), a ^ b)
    np.testing.assert_array_equal((ta < tb).numpy(), a < b)
    np.testing.assert_array_equal(ta.maximum(tb).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal((ta // tb).numpy(), a // b)
    np.testing.assert_array_equal((ta % tb).numpy(), a % b)

@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_float_arith(dt):
  npdt = _to_np_dtype(dt)
  a, b = data(1031, npdt), data(1031, npdt, lo=0.5, hi=2.0)
  tol = {dtypes.half: 2e-3}.get(dt, 1e-6)
  np.testing.assert_allclose((Tensor(a) * Tensor(b) + Tensor(a) / Tensor(b)).numpy(), (a * b + a / b).astype(npdt), rtol=tol, atol=tol)
  np.testing.assert_allclose(Tensor(b).sqrt().numpy(), np.sqrt(b), rtol=tol, atol=tol)
  np.testing.assert_allclose(Tensor(b).log2().numpy(), np.log2(b), rtol=tol, atol=tol)
  np.testing.assert_allclose(Tensor(a).exp2().numpy(), np.exp2(a), rtol=tol, atol=tol)
  np.testing.assert_array_equal(Tensor(a).sum().numpy().dtype, npdt)

def test_bool():
  a, b = data(1031, np.bool_), data(1031, np.bool_)
  np.testing.assert_array_equal((Tensor(a) & Tensor(b)).numpy(), a & b)
  np.testing.assert_array_equal((Tensor(a) | Tensor(b)).numpy(), a | b)
  np.testing.assert_array_equal((Tensor(a) ^ Tensor(b)).numpy(), a ^ b)
  np.testing.assert_array_equal(Tensor(a).logical_not().numpy(), ~a)
  np.testing.assert_array_equal(Tensor(a).where(1.5, -2.0).numpy(), np.where(a, np.float32(1.5), np.float32(-2.0)))

@pytest.mark.parametrize("src", NATIVE, ids=str)
def test_casts_to_float_and_back(src):
  npdt = _to_np_dtype(src)
  a = data(517, npdt)
  np.testing.assert_array_equal(Tensor(a).cast(dtypes.float32).numpy(), a.astype(np.float32))
  f = data(517, np.float32, lo=-100, hi=100) if dtypes.is_int(src) and not dtypes.is_unsigned(src) else data(517, np.float32, lo=0, hi=100)
  if src == dtypes.bool: f = (f > 50).astype(np.float32) * f
  np.testing.assert_array_equal(Tensor(f).cast(src).numpy(), f.astype(npdt))

@pytest.mark.parametrize("a,b", [(dtypes.float32, dtypes.int32), (dtypes.float32, dtypes.uint32), (dtypes.half, dtypes.int16),
                                 (dtypes.half, dtypes.uint16), (dtypes.float64, dtypes.int64), (dtypes.int8, dtypes.uint8)], ids=str)
def test_bitcast(a, b):
  if (m := missing(a, b)): pytest.skip(m)
  x = data(333, _to_np_dtype(a))
  np.testing.assert_array_equal(Tensor(x).bitcast(b).numpy(), x.view(_to_np_dtype(b)))
  np.testing.assert_array_equal(Tensor(x).bitcast(b).bitcast(a).numpy(), x)

def test_nan_inf_signed_zero():
  x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.0, 3e38], np.float32)
  t = Tensor(x)
  with np.errstate(all="ignore"):
    np.testing.assert_array_equal((t * 2).numpy(), x * 2)
    np.testing.assert_array_equal(t.isnan().numpy(), np.isnan(x))
    np.testing.assert_array_equal(t.isinf().numpy(), np.isinf(x))
    # log(<0) nan, log(0) -inf, log(inf) inf; the finite ones within an ulp
    np.testing.assert_allclose(t.log().numpy(), np.log(x), rtol=3e-7)
    np.testing.assert_allclose(t.sqrt().numpy(), np.sqrt(x), rtol=3e-7)
    np.testing.assert_array_equal(np.signbit((t * 1).numpy()), np.signbit(x))
    np.testing.assert_array_equal((1 / t).numpy(), flushed(1 / x))   # 1/3e38 is a denormal
    # inf*0 and nan*0 stay nan (multiplying by a zero tensor: tinygrad itself folds x*0 with a constant 0, on every device)
    np.testing.assert_array_equal((t * Tensor(np.zeros_like(x))).numpy(), x * 0)
    np.testing.assert_array_equal(Tensor([float("inf"), float("-inf"), float("nan")]).numpy(), [np.inf, -np.inf, np.nan])

RENDERERS = ["SPIRV"] + (["GLSL"] if shutil.which("glslangValidator") else [])
NP_OPS = {"log": np.log, "exp": np.exp, "sqrt": np.sqrt, "sin": np.sin, "log2": np.log2, "exp2": np.exp2, "reciprocal": lambda v: 1 / v,
          "sigmoid": lambda v: 1 / (1 + np.exp(-v))}

@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("op", NP_OPS)
def test_transcendentals_place_nan_and_inf(op, renderer):
  # NaN in gives NaN out, and inf and signed zero where IEEE puts them, whatever the driver's Exp2 and Log2 do with a NaN (SwiftShader
  # returned 89.1 for log(NaN) and +inf for exp(NaN); exp2 is tinygrad's decomposition, the log2/sqrt guards are unordered)
  x = np.array([np.nan, -1.0, 0.0, -0.0, np.inf, -np.inf, 2.0, -0.5], np.float32)
  with np.errstate(all="ignore"): ref = NP_OPS[op](x)
  with Context(DEV=f"VULKAN:{renderer}"): got = getattr(Tensor(x), op)().numpy()
  np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
  np.testing.assert_array_equal(np.where(np.isinf(ref), got, 0), np.where(np.isinf(ref), ref, 0))
  np.testing.assert_allclose(got[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("renderer", RENDERERS)
def test_exp2_within_one_ulp(renderer):
  # Vulkan allows Exp2 3+2|x| ulp and lavapipe's and SwiftShader's use it (1.8 ulp off at exp(1) on SwiftShader failed tinygrad's
  # test_padded_const_sum): tinygrad's xexp2 stays within about 1 ulp, as on its CPU device
  x = np.concatenate([data(100_003, np.float32) * 20, np.float32([1.4426950216293335, -126.5, 127.9])]).astype(np.float32)
  with Context(DEV=f"VULKAN:{renderer}"): got = Tensor(x).exp2().numpy().astype(np.float64)
  ref = np.exp2(x.astype(np.float64))
  ref = np.where(flushed(ref.astype(np.float32)) == 0, 0, ref)   # a denormal result is 0 where the driver flushes them (SwiftShader)
  ulps = np.abs(got - ref) / np.spacing(ref.astype(np.float32)).astype(np.float64)
  assert ulps.max() <= 1.1, (ulps.max(), x[ulps.argmax()])

def test_int_overflow_and_shifts():
  a = np.array([2**31 - 1, -2**31, 123456789, -7, 1 << 30], np.int32)
  t = Tensor(a)
  with np.errstate(over="ignore"):
    np.testing.assert_array_equal((t + 1).numpy(), a + np.int32(1))
    np.testing.assert_array_equal((t * 3).numpy(), a * np.int32(3))
  np.testing.assert_array_equal((t << 2).numpy(), a << 2)
  np.testing.assert_array_equal((t >> 3).numpy(), a >> 3)

def test_negative_division_and_remainder():
  a, b = data(1031, np.int32) * 7 + 3, data(1031, np.int32)
  b = np.where(b == 0, -5, b).astype(np.int32)
  # tinygrad: // floors like Python, and Tensor.mod follows the divisor's sign; both lower to C-truncating CDIV/CMOD
  np.testing.assert_array_equal((Tensor(a) // Tensor(b)).numpy(), a // b)
  np.testing.assert_array_equal((Tensor(a) % Tensor(b)).numpy(), a % b)

@pytest.mark.parametrize("env", [{"EMULATED_DTYPES": "half,long"}, {"VULKAN_DISABLE": "f16,i64"}], ids=["tinygrad-emulation", "feature-off"])
def test_emulated_half_long(env, tmp_path):
  # either way no kernel declares a 16-bit float or a 64-bit integer: tinygrad computes them in other types
  r = run_python("""
import numpy as np
from tinygrad import Tensor, Device, dtypes
a = np.random.default_rng(0).uniform(-4, 4, 777).astype(np.float16)
np.testing.assert_allclose((Tensor(a) * 3 + 1).numpy(), (a * np.float16(3) + np.float16(1)), rtol=2e-3, atol=2e-3)
l = np.random.default_rng(1).integers(-2**40, 2**40, 777, dtype=np.int64)
np.testing.assert_array_equal((Tensor(l) * 3 - 7).numpy(), l * 3 - 7)
np.testing.assert_array_equal((Tensor(l) >> 5).numpy(), l >> 5)
print("ok")""", {**env, "VULKAN_DUMP": str(tmp_path)})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  mods = [f.read_text() for f in tmp_path.glob("*.spvasm")]
  assert len(mods) >= 3 and not [m for m in mods if "OpTypeFloat 16" in m or "OpTypeInt 64" in m], len(mods)

INT64_VARS = """
import numpy as np
from tinygrad import Tensor, Variable, dtypes
x = np.random.default_rng(2).integers(-1000, 1000, 1031)
for dt, npdt, vals in ((dtypes.long, np.int64, (-2**35 - 7, 5, 2**40 + 2**33 + 1)), (dtypes.ulong, np.uint64, (2**35 + 7, 5, 2**62 - 3))):
  v, xs = Variable("v", min(vals), max(vals), dtype=dt), np.abs(x).astype(npdt) if dt == dtypes.ulong else x.astype(npdt)
  for val in vals:
    t, b = Tensor(xs), v.bind(val)
    with np.errstate(over="ignore"):
      np.testing.assert_array_equal((t * b + b // 3 + (b >> 7)).numpy(), xs * npdt(val) + npdt(val) // npdt(3) + (npdt(val) >> npdt(7)))
print("ok")"""

@pytest.mark.parametrize("env", [{}, {"VULKAN_DISABLE": "i64"}], ids=["device", "no-int64"])
def test_int64_vars(env, tmp_path):
  # a 64-bit Variable over 32 bits, both signs; without shaderInt64 it reaches the kernel as two push-constant words
  # (renderer/passes/packing.py var_words: tinygrad's own int-pair rules take a var for a buffer and fail)
  r = run_python(INT64_VARS, {**env, "VULKAN_DUMP": str(tmp_path)})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  if env: assert not [f for f in tmp_path.glob("*.spvasm") if "OpTypeInt 64" in f.read_text()]

def test_bfloat16():
  x = data(777, np.float32)
  # bf16 keeps the top 16 bits of a float32, rounded to nearest even
  u = x.view(np.uint32)
  ref = (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
  # realize in between: tinygrad folds a float -> bf16 -> float cast chain away
  np.testing.assert_array_equal(Tensor(x).cast(dtypes.bfloat16).realize().cast(dtypes.float32).numpy(), ref)
  np.testing.assert_array_equal((Tensor(x).cast(dtypes.bfloat16).realize() * 2).float().numpy(), ref * 2)

def test_refused_dtype_is_a_clear_error():
  r = run_python("""
from tinygrad import Tensor, dtypes
try: (Tensor([1.0, 2.0], dtype=dtypes.float64) * 2).numpy()
except Exception as e: print("ERR", type(e).__name__, e)""", {"VULKAN_DISABLE": "f64"})
  assert "ERR" in r.stdout and "double" in r.stdout and "shaderFloat64" in r.stdout, r.stdout + r.stderr

def _cast_source(dt) -> np.ndarray:
  """Values every destination type can hold after C conversion rules: small magnitudes, both signs where the type has them."""
  npdt = _to_np_dtype(dt)
  if dt == dtypes.bool: return data(97, np.bool_)
  if dtypes.is_float(dt): return np.concatenate([data(90, np.float32, lo=0, hi=120).round(2), [0.0, -0.0, 1.5, 2.5, 7.75, 0.5, 126.0]]).astype(npdt)
  return np.concatenate([data(90, npdt) % 100, np.array([0, 1, 99, 3, 5, 7, 127 if dt in (dtypes.char, dtypes.uchar) else 126])]).astype(npdt)

@pytest.mark.parametrize("src", NATIVE, ids=str)
def test_cast_matrix(src):
  # every native destination from one source in one schedule: values stay in range, so C conversion rules are defined
  x = _cast_source(src)
  outs = [Tensor(x).cast(d) for d in NATIVE]
  Tensor.realize(*outs)
  for d, o in zip(NATIVE, outs):
    np.testing.assert_array_equal(o.numpy(), x.astype(_to_np_dtype(d)), err_msg=f"{src} -> {d}")

@pytest.mark.parametrize("dt", [d for d in NATIVE if d != dtypes.bool], ids=str)
def test_bitcast_to_every_same_size_type(dt):
  x = _cast_source(dt)
  for d in [d for d in NATIVE if d.itemsize == dt.itemsize and d not in (dt, dtypes.bool)]:
    ref = x.view(_to_np_dtype(d))
    np.testing.assert_array_equal(Tensor(x).bitcast(d).numpy(), ref, err_msg=f"{dt} -> {d}")

def in_words_run(code:str, ren:str):
  """Run code under VULKAN_PROFILE=min (no shaderFloat16: half in words, renderer/passes/half.py) on renderer ren, in a fresh process."""
  r = run_python(code + 'print("ok")', {"VULKAN_PROFILE": "min", "DEV": f"VULKAN:{ren}", "VULKAN_MAX_STORAGE_RANGE": ""})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_half_in_words_keeps_denormals(ren):
  # half without shaderFloat16 (renderer/passes/half.py) converts denormals exactly both ways, as a device with it (and CPU) does:
  # tinygrad's own conversion flushed them (log2 of a denormal half was -inf)
  in_words_run("""
import numpy as np
from tinygrad import Tensor, Device, dtypes
assert "f16" not in Device["VULKAN"].caps
x = np.array([6e-05, 1e-7, -3e-6, 5.96e-8, 2.98e-8, 3e-8, 6.1e-5, 6.09e-5, 1.0, -2.5, 65504, 1e-30, 0.0, -0.0, 7e-6, 3.1e-5], np.float32)
h = x.astype(np.float16)
assert (Tensor(h) * 1).numpy().view(np.uint16).tolist() == h.view(np.uint16).tolist()          # load and store
assert Tensor(x).cast(dtypes.half).numpy().view(np.uint16).tolist() == h.view(np.uint16).tolist()  # float -> half, round to nearest even
assert Tensor(h.view(np.int16)).bitcast(dtypes.half).numpy().view(np.uint16).tolist() == h.view(np.uint16).tolist()
np.testing.assert_allclose(Tensor(h[:3]).abs().log2().numpy(), np.log2(np.abs(h[:3]).astype(np.float32)), rtol=1e-3)
""", ren)

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_half_in_words_rounds_every_binade(ren):
  # float -> half without shaderFloat16 (renderer/passes/half.py round_half, f2h) as numpy rounds, over every float exponent: random
  # mantissas, ties at each count of dropped bits (13 for normals, up to 24 under 2^-14), both signs. It once sent 65503.996 (under
  # 65520, the midpoint to 65536) to infinity, and NaNs whose payload is in the low 13 bits to infinity
  in_words_run("""
import numpy as np
from tinygrad import Tensor, Device, dtypes
assert "f16" not in Device["VULKAN"].caps
rng = np.random.default_rng(0)
ties = np.array([(1 << k) | (m << (k + 1)) for k in range(12, 24) for m in range(4)], np.uint32) & 0x7fffff
mants = np.concatenate([rng.integers(0, 1 << 23, 64, dtype=np.uint32), ties, ties ^ 1, ties | (1 << 22), [0, 1, 0x7fffff, 0x7fefff, 0x7ff000]])
u = ((np.arange(256, dtype=np.uint32)[:, None] << 23) | mants.astype(np.uint32)[None, :]).ravel()
x = np.concatenate([u, u | 0x80000000]).astype(np.uint32).view(np.float32)
with np.errstate(over="ignore", invalid="ignore"): ref = x.astype(np.float16)
out = Tensor(x).cast(dtypes.half).numpy()
same = (out.view(np.uint16) == ref.view(np.uint16)) | (np.isnan(out) & np.isnan(ref))
assert same.all(), [(hex(a), b, c) for a, b, c in zip(x.view(np.uint32)[~same][:8], out[~same][:8], ref[~same][:8])]
h = Tensor(np.arange(6, dtype=np.float16))   # constants fold through the conversion (tinygrad refuses to cast a float infinity to int)
assert h.masked_fill(h > 3, float("-inf")).numpy().tolist() == [0, 1, 2, 3, -np.inf, -np.inf]
""", ren)

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_half_in_words_cast_rounds(ren):
  # a cast into half gives a half value: without shaderFloat16 (renderer/passes/half.py) it used to only clamp to half's range, so
  # a.half() * b.half() multiplied float inputs (365 of 1031 products off by an ulp; tinygrad's test_gemm_fp16 0.008 off)
  in_words_run("""
import numpy as np
from tinygrad import Tensor, Device
assert "f16" not in Device["VULKAN"].caps
rng = np.random.default_rng(0)
x, y = rng.uniform(-3, 3, 1031).astype(np.float32), rng.uniform(-3, 3, 1031).astype(np.float32)
i = rng.integers(-5000, 5000, 1031).astype(np.int32)
out = (Tensor(x).half() * Tensor(y).half()).numpy()
assert out.view(np.uint16).tolist() == (x.astype(np.float16) * y.astype(np.float16)).view(np.uint16).tolist()
out = (Tensor(i).half() + Tensor(y).half()).numpy()   # int -> half rounds too (2049 -> 2048)
assert out.view(np.uint16).tolist() == (i.astype(np.float16) + y.astype(np.float16)).view(np.uint16).tolist()
""", ren)

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_half_in_words_accumulator_rounds(ren):
  # a half accumulator (sum(dtype=half)) rounds to half on every step, as with shaderFloat16: without it (renderer/passes/half.py) the
  # register holds float values, each rounded to half by the op that made it; unrounded it would give the float sums. The
  # accumulator keeps its type in the final UOps, where tinygrad reads it (test_linearizer's test_arg_acc_dtype): it was the
  # register's 16-bit words (ushort)
  in_words_run("""
import numpy as np
from dataclasses import replace
from tinygrad import Tensor, Device, dtypes
from tinygrad.codegen import to_program
from tinygrad.dtype import AddrSpace
from tinygrad.uop.ops import Ops
assert "f16" not in Device["VULKAN"].caps and "i16" not in Device["VULKAN"].caps
x = np.random.default_rng(0).uniform(1, 2, (5, 37)).astype(np.float16)
seq = np.zeros(5, np.float16)
for j in range(37): seq = seq + x[:, j]   # half additions in order, each rounded
assert (seq.astype(np.float32) != x.astype(np.float32).sum(axis=1)).all()
assert Tensor(x).sum(axis=1, dtype=dtypes.half).numpy().view(np.uint16).tolist() == seq.view(np.uint16).tolist()
assert Tensor(np.full(4099, 1, np.float16)).sum(dtype=dtypes.half).numpy() == 2048   # 2048 + 1 rounds back to 2048
for dt in (dtypes.half, dtypes.bfloat16):
  ast = Tensor(x).cast(dt).sum(axis=1, dtype=dt).schedule_linear().src[-1].src[0]
  uops = to_program(ast.replace(arg=replace(ast.arg, opts_to_apply=())), renderer=Device["VULKAN"].renderer).src[1].src
  assert [u.dtype for u in uops if u.op is Ops.BUFFER and u.addrspace == AddrSpace.REG] == [dt], uops
""", ren)

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_bfloat16_in_words(ren):
  # bfloat16 without shaderInt16 (renderer/passes/half.py, as half): declared supported, so tinygrad's tests of it run; a cast into it
  # rounds to nearest even, stores round once, an accumulator rounds on every step
  in_words_run("""
import numpy as np
from tinygrad import Tensor, Device, dtypes
assert "i16" not in Device["VULKAN"].caps and dtypes.bfloat16 in Device["VULKAN"].renderer.supported_dtypes()
def bf(x):   # float32 -> bfloat16 bits, round to nearest even (no NaN here)
  u = np.asarray(x, np.float32).view(np.uint32)
  return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
def f(b): return (b.astype(np.uint32) << 16).view(np.float32)
rng = np.random.default_rng(0)
x, y = rng.uniform(-3, 3, 1031).astype(np.float32), rng.uniform(-3, 3, 1031).astype(np.float32)
assert Tensor(x).cast(dtypes.bfloat16).bitcast(dtypes.ushort).numpy().tolist() == bf(x).tolist()
out = (Tensor(x).cast(dtypes.bfloat16) * Tensor(y).cast(dtypes.bfloat16)).bitcast(dtypes.ushort).numpy()
assert out.tolist() == bf(f(bf(x)) * f(bf(y))).tolist()
a = f(bf(rng.uniform(1, 2, (5, 37))))
seq = np.zeros(5, np.float32)
for j in range(37): seq = f(bf(seq + a[:, j]))   # bfloat16 additions in order, each rounded
assert (seq != a.sum(axis=1)).all()
assert Tensor(a).cast(dtypes.bfloat16).sum(axis=1, dtype=dtypes.bfloat16).bitcast(dtypes.ushort).numpy().tolist() == bf(seq).tolist()
""", ren)

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_half_in_words_ops_round(ren):
  # every op on half values rounds its result to half, as with shaderFloat16 (and on CPU): without it (renderer/passes/half.py) products
  # stayed float up to the store, so x % 1.25 of multiples of 1.25 (x * half(0.8) just under the integer in float, on it in half)
  # gave 1.25; and a bfloat16 chain rounds per op as with shaderInt16
  in_words_run("""
import numpy as np
from tinygrad import Tensor, Device, dtypes
assert "f16" not in Device["VULKAN"].caps and "i16" not in Device["VULKAN"].caps
x = (np.arange(-40, 41) * 1.25).astype(np.float16)
assert ((Tensor(x) % 1.25).numpy() == 0).all()
y = np.random.default_rng(0).uniform(-3, 3, 1031).astype(np.float16)
ref = (y * np.float16(3) + np.float16(1)) * y - y   # numpy rounds each half op
assert ((Tensor(y) * 3 + 1) * Tensor(y) - Tensor(y)).numpy().view(np.uint16).tolist() == ref.view(np.uint16).tolist()
def bf(v): u = np.asarray(v, np.float32).view(np.uint32); return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
b = bf(y.astype(np.float32))
out = (Tensor(b).cast(dtypes.bfloat16) * 3 + 1).float().numpy()
assert out.view(np.uint32).tolist() == bf(bf(b * 3) + 1).view(np.uint32).tolist()
""", ren)
