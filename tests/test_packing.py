"""8/16-bit types packed in 32-bit words (renderer/passes/packing.py), tested on any device: each test runs in a fresh process with the
features switched off, either only the 8/16-bit storage (VULKAN_DISABLE=s8,s16, the rest native) or everything optional
(VULKAN_PROFILE=min). Every element is checked against numpy, on odd sizes and nonuniform data including the extremes."""
import os
import pytest
from util import run_python

# the min profile has no bufferDeviceAddress: a CI pass's VULKAN_MAX_STORAGE_RANGE=4096 (set to send big buffers by address) would
# leave its buffers unbindable, so it runs at the profile's own maxStorageBufferRange
ENVS = [{"VULKAN_DISABLE": "s8,s16"}, {"VULKAN_PROFILE": "min", "VULKAN_MAX_STORAGE_RANGE": ""}]
IDS = ["no-8/16-bit-storage", "profile-min"]

PRELUDE = """
import sys, numpy as np
sys.path.insert(0, "tests")
from tinygrad import Tensor, Device, dtypes
from tinygrad.dtype import _from_np_dtype as T
from tinygrad.device import Buffer
from tinygrad.helpers import prod
from tinygrad.uop.ops import UOp, AxisType
from util import run_kernel, kernel_sources, kernel_programs, shows
caps = Device["VULKAN"].caps
assert not {"s8", "i8", "s16", "i16"} & caps.flags, caps
rng = np.random.default_rng(5)
def ints(npdt, n):
  info = np.iinfo(npdt)
  x = rng.integers(info.min, info.max, n, endpoint=True).astype(npdt)
  x[:4] = [info.min, info.max, 0, info.max // 2 + 1]
  return x
def eq(got, exp, what): np.testing.assert_array_equal(got, exp, err_msg=what)
"""

def check(code:str, env:dict):
  if all(os.environ.get(k, "") == v for k, v in env.items()): return exec(PRELUDE + code, {})   # this process runs so already
  r = run_python(PRELUDE + code + "\nprint('ok')", env)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-6000:]

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_narrow_int_arithmetic(env):
  # char/short sign-extended and uchar/ushort zero-extended in 32 bits, re-wrapped after every op that leaves the range
  check("""
for npdt in (np.int8, np.uint8, np.int16, np.uint16):
  a, b = ints(npdt, 1031), ints(npdt, 1031)[::-1].copy()
  b[b == 0] = 3
  ta, tb = Tensor(a), Tensor(b)
  with np.errstate(all="ignore"):
    for name, f in [("a+b*a-b", lambda x, y: x + y * x - y), ("//", lambda x, y: x // y), ("%", lambda x, y: x % y), ("^", lambda x, y: x ^ y),
                    ("&|", lambda x, y: (x & y) | (y ^ 5)), ("max", lambda x, y: x.maximum(y) if isinstance(x, Tensor) else np.maximum(x, y)),
                    ("<<3", lambda x, y: x << 3), (">>2", lambda x, y: x >> 2), ("neg", lambda x, y: -x), ("<", lambda x, y: x < y),
                    ("==", lambda x, y: x == y), ("where", lambda x, y: ((x + y) < 7).where(x * y, x) if isinstance(x, Tensor) else
                                                  np.where((x + y) < 7, x * y, x))]:
      eq(f(ta, tb).numpy(), f(a, b), f"{npdt.__name__} {name}")
  eq(ta.cast(dtypes.float32).numpy(), a.astype(np.float32), f"{npdt.__name__} -> float")
  eq(ta.cast(dtypes.int32).numpy(), a.astype(np.int32), f"{npdt.__name__} -> int")
  f = rng.uniform(np.iinfo(npdt).min, np.iinfo(npdt).max, 1031).astype(np.float32)
  eq(Tensor(f).cast(T(npdt)).numpy(), f.astype(npdt), f"float -> {npdt.__name__}")
  other = {np.int8: np.uint8, np.uint8: np.int8, np.int16: np.uint16, np.uint16: np.int16}[npdt]
  eq(ta.bitcast(T(other)).numpy(), a.view(other), f"{npdt.__name__} bitcast")
  eq(ta.cast(T(other)).numpy(), a.astype(other), f"{npdt.__name__} cast")
  eq(Tensor(a[:1030]).reshape(10, 103).max(axis=1).numpy(), a[:1030].reshape(10, 103).max(axis=1), f"{npdt.__name__} max")
  eq(Tensor(a).sum().numpy(), a.astype(np.int64).sum(), f"{npdt.__name__} sum")
""", env)

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_masks_comparisons_where(env):
  # bool buffers are bytes: 4 to a word
  check("""
x, y = rng.uniform(-3, 3, 1031).astype(np.float32), rng.uniform(-3, 3, 1031).astype(np.float32)
tx, ty = Tensor(x), Tensor(y)
m = (tx > ty).realize()
eq(m.numpy(), x > y, "cmp")
eq((m & (tx < 1)).numpy(), (x > y) & (x < 1), "and")
eq((m ^ (ty > 0)).logical_not().numpy(), ~((x > y) ^ (y > 0)), "xor not")
eq(m.where(tx, 0.5).numpy(), np.where(x > y, x, np.float32(0.5)), "where")
eq(m.sum().numpy(), (x > y).sum(), "count")
eq(m[:1030].reshape(10, 103).any(axis=1).numpy(), (x > y)[:1030].reshape(10, 103).any(axis=1), "any")
eq(m[:1030].reshape(103, 10).all(axis=1).numpy(), (x > y)[:1030].reshape(103, 10).all(axis=1), "all")
idx = rng.integers(0, 10, 77).astype(np.int32)
eq(Tensor(idx).one_hot(10).numpy(), np.eye(10, dtype=np.int32)[idx], "one_hot")
eq(tx.masked_select(m).numpy(), x[x > y], "masked_select")
eq(Tensor(x > 0).cast(dtypes.float32).numpy(), (x > 0).astype(np.float32), "bool in")
# chains of six packed fields (tinygrad's repeat tests): one expression of six byte fields, each cut from its word
bs = [rng.random(1031) < 0.5 for _ in range(6)]
for name, f in (("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)):
  got, exp = Tensor(bs[0]), bs[0]
  for b in bs[1:]: got, exp = getattr(got, f"__{name}__")(Tensor(b)), f(exp, b)
  eq(got.numpy(), exp, f"{name} of 6")
""", env)

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_quantized_weights(env):
  # int8 weights with a per-row scale, uint8 with a zero point: dequantized in the kernel, against float32 numpy
  check("""
w8 = ints(np.int8, 37 * 19).reshape(37, 19)
u8 = ints(np.uint8, 37 * 19).reshape(37, 19)
scale = rng.uniform(0.01, 0.1, (37, 1)).astype(np.float32)
act = rng.uniform(-1, 1, (5, 37)).astype(np.float32)
got = (Tensor(act) @ (Tensor(w8).cast(dtypes.float32) * Tensor(scale))).numpy()
np.testing.assert_allclose(got, act @ (w8.astype(np.float32) * scale), rtol=1e-5, atol=1e-5)
got = (Tensor(act) @ ((Tensor(u8).cast(dtypes.float32) - 128) * Tensor(scale))).numpy()
np.testing.assert_allclose(got, act @ ((u8.astype(np.float32) - 128) * scale), rtol=1e-5, atol=1e-5)
q = (Tensor(act) * 100).cast(dtypes.int8).realize()   # quantize in the kernel
eq(q.numpy(), (act * 100).astype(np.int8), "quantize")
""", env)

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_concurrent_stores_to_one_word(env):
  # neighbouring invocations write neighbouring bytes of the same word at once: the read-modify-write must be atomic (with
  # plain stores lavapipe's SIMD lanes lose each other's bytes). One lane may also write 4 bytes (a devectorized store).
  check("""
n = (37, 96)   # rows of 96: workgroups along them
a, b = ints(np.uint8, 37 * 96).reshape(n), ints(np.uint8, 37 * 96)[::-1].reshape(n).copy()
out = Tensor(a) + Tensor(b) * 3
ps = kernel_programs(Tensor(a) + Tensor(b) * 3)
assert any(shows(p.src[2].arg, "atomic") for p in ps), [p.src[2].arg for p in ps]
assert any(prod(p.arg.local_size) > 1 for p in ps), "expected a workgroup of several invocations"
eq(out.numpy(), a + b * np.uint8(3), "bytes")
h = ints(np.int16, 37 * 96).reshape(n)
eq((Tensor(h) - 7).numpy(), h - np.int16(7), "halfwords")
m = ints(np.uint8, 37 * 96).reshape(n) > 100
eq((Tensor(m) ^ Tensor(a > 50)).numpy(), m ^ (a > 50), "bools")
""", env)

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_views_at_byte_offsets(env):
  # buffer views at byte offsets that are not multiples of 4 (the sub-word offset is the push-constant _o), as inputs and
  # as outputs, the neighbouring bytes outside the view untouched
  check("""
for npdt, starts in ((np.uint8, (1, 2, 3, 5, 258)), (np.int8, (7,)), (np.bool_, (1, 3)), (np.int16, (1, 3))):
  a = (rng.random(601) < 0.4) if npdt == np.bool_ else ints(npdt, 601)
  t = Tensor(a).realize()
  for s in starts:
    eq(t[s:s + 301].numpy(), a[s:s + 301], f"{npdt.__name__} view at {s}")
    # .contiguous() of a slice: a kernel reading the buffer bound as a view
    if npdt == np.bool_: eq(t[s:s + 301].contiguous().logical_not().numpy(), ~a[s:s + 301], f"bool bound view at {s}")
    else: eq((t[s:s + 301].contiguous() + t[s + 1:s + 302]).numpy(), a[s:s + 301] + a[s + 1:s + 302], f"{npdt.__name__} bound view at {s}")
    ref = a.copy()
    ref[s:s + 101] = ~a[s + 200:s + 301] if npdt == np.bool_ else a[s + 200:s + 301] * 3
    t2 = Tensor(a).realize()
    t2[s:s + 101].assign(t2[s + 200:s + 301].logical_not() if npdt == np.bool_ else t2[s + 200:s + 301] * 3).realize()
    eq(t2.numpy(), ref, f"{npdt.__name__} write into view at {s}")
# 8-bit views of a wider buffer and wider views of a byte buffer, both at odd positions: fields straddle words
N = 13
base = rng.integers(0, 2**32, 2 * N + 3, dtype=np.uint64).astype(np.uint32)
src = Buffer("VULKAN", 4 * (2 * N + 3), dtypes.uint8, initial_value=base.tobytes()).view(4 * N + 5, dtypes.uint8, 3)
out = Buffer("VULKAN", N, dtypes.uint32).allocate()
p, o = UOp.param(0, dtypes.uint8, (4 * N + 5,)), UOp.param(1, dtypes.uint32, (N,))
r = UOp.range(N, 0, AxisType.LOOP)
run_kernel([o.index(r).store(p.shrink(((1, 4 * N + 1),)).bitcast(dtypes.uint32).index(r)).end(r)], [src, out])
eq(np.frombuffer(out.as_memoryview(), np.uint32), base.view(np.uint8)[4:4 + 4 * N].view(np.uint32), "uint32 view of bytes at byte 4+0")
dst_base = Buffer("VULKAN", 4 * N + 8, dtypes.uint8, initial_value=bytes(range(4 * N + 8)))
dst = dst_base.view(4 * N + 5, dtypes.uint8, 1)
vals = Buffer("VULKAN", N, dtypes.uint32, initial_value=base[:N].tobytes())
d, v = UOp.param(0, dtypes.uint8, (4 * N + 5,)), UOp.param(1, dtypes.uint32, (N,))
run_kernel([d.shrink(((2, 4 * N + 2),)).bitcast(dtypes.uint32).index(r).store(v.index(r) ^ 0xFFFF).end(r)], [dst, vals])
exp = np.arange(4 * N + 8, dtype=np.uint8)
exp[3:3 + 4 * N] = (base[:N] ^ 0xFFFF).view(np.uint8)
eq(np.frombuffer(dst_base.as_memoryview(), np.uint8), exp, "uint32 stores into bytes at byte 3: two words each")
fbuf = Buffer("VULKAN", N + 2, dtypes.float32, initial_value=base[:N + 2].tobytes()).view(N + 1, dtypes.float32, 4)
bo = Buffer("VULKAN", 4 * N - 1, dtypes.uint8).allocate()
f, bb = UOp.param(0, dtypes.float32, (N + 1,)), UOp.param(1, dtypes.uint8, (4 * N - 1,))
r2 = UOp.range(4 * N - 1, 0, AxisType.LOOP)
run_kernel([bb.index(r2).store(f.bitcast(dtypes.uint8).index(r2 + 3) + 1).end(r2)], [fbuf, bo])
eq(np.frombuffer(bo.as_memoryview(), np.uint8), base.view(np.uint8)[7:7 + 4 * N - 1] + np.uint8(1), "uint8 view of floats")
""", env)

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_byte_gather_op_count(env):
  # tinygrad's test_arange test_index_mnist: a NOOPT gather of bytes costs under 13 counted ops a byte. A stored byte shares its
  # field's bit shift with the loaded one (views of packed slots start at a whole word: misaligned ones are moved, program.py
  # realign), and a gated-off load needs no select
  check("""
from tinygrad.helpers import Context, GlobalCounters
X = Tensor(ints(np.uint8, 60 * 784).reshape(60, 1, 28, 28)).realize()
with Context(NOOPT=1):
  idx = rng.integers(0, 60, 512)
  samples = Tensor(idx.astype(np.int32)).realize()
  GlobalCounters.reset()
  x = X[samples].numpy()
  assert GlobalCounters.global_ops < 512 * 784 * 13, GlobalCounters.global_ops / (512 * 784)
eq(x, X.numpy()[idx], "gathered bytes")
""", env)

@pytest.mark.parametrize("env", ENVS, ids=IDS)
def test_jit_views_at_byte_offsets(env):
  # a TinyJit graph whose kernels read views of its input inside a word: moved to whole words (windows.py realign) on every
  # replay with a new input
  check("""
from tinygrad import TinyJit
from tinygrad_vk import windows
from tinygrad_vk.graph import VulkanGraph
moved, orig, orig_record, records = [], windows.realign, VulkanGraph._record, []
windows.realign = lambda prg, bufs: (r := orig(prg, bufs), moved.append(r is not None))[0]
VulkanGraph._record = lambda self: (records.append(bool(self.dirty)), orig_record(self))[1]
@TinyJit
def f(big, y): return (((big[3:304].contiguous() + 7).contiguous() * y).contiguous() + big[5:306].contiguous()).realize()
keep = []
for _ in range(6):
  a, y = ints(np.uint8, 601), ints(np.uint8, 301)
  keep.append((tb := Tensor(a).realize(), ty := Tensor(y).realize()))
  eq(f(tb, ty).numpy(), (a[3:304] + np.uint8(7)) * y + a[5:306], "bytes through views at bytes 3 and 5")
assert sum(records) == 5 and sum(moved) >= 5 * 2, (records, moved)
""", env)

def test_sin_without_int64():
  # tinygrad's sin reduces large arguments in uint64; split into int pairs that grew a sin into ~20000 UOps. sin32.py does it
  # in 32-bit words: a kernel of the usual size, 1 ULP like tinygrad's
  check("""
x = np.concatenate([rng.uniform(-1e4, 1e4, 500), rng.uniform(-3, 3, 31),
                    [29.99, 30.0, 30.01, 1e5, -1e6, 2.1e9, 4.29e9, 1e30, -3e38, 0.0, -0.0, np.nan, np.inf, -np.inf]]).astype(np.float32)
with np.errstate(invalid="ignore"): ref = np.sin(x.astype(np.float64))
np.testing.assert_allclose(Tensor(x).sin().numpy(), ref, atol=2e-6, rtol=2e-6)
assert all(s.count(chr(10)) < 300 for s in kernel_sources(Tensor(x).sin()))
""", {"VULKAN_DISABLE": "i64,s8,s16"})
