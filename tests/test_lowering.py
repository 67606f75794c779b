"""Regression tests for the lowering (renderer/glsl.py, renderer/spirv.py): each one failed before its fix in the GLSL renderer, and runs on
whichever renderer DEV picks. Every element is checked against numpy."""
import numpy as np
import pytest
from tinygrad import Device
from tinygrad.dtype import dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import run_kernel, run_python, kernel_sources, kernel_source, BindSpy, bind_align, needs, shows, in_words, flushed, rng, vectors
from util import kernel_programs, data

N = 13   # not a multiple of any workgroup size

def words(n:int) -> np.ndarray: return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)

def as_np(b:Buffer, npdt) -> np.ndarray: return np.frombuffer(b.as_memoryview(), dtype=npdt).copy()

# ---- buffer views inside a kernel: INDEX(BITCAST(SHRINK(PARAM))). Before: the renderer emitted C pointer casts, which glslang rejects.
# The buffers are themselves Buffer.views one word past minStorageBufferOffsetAlignment: bound at a non-zero descriptor offset,
# with the element offset _o = 1 in the push constants, through a pipeline variant (BindSpy checks both).

@pytest.mark.skipif("i64" not in Device["VULKAN"].caps, reason="a 64-bit view of a uint32 buffer needs shaderInt64 (not split into pairs)")
def test_view_wide_load(monkeypatch):
  """uint64 elements read through a view of a uint32 buffer at an odd word: each put together from two words."""
  spy, W = BindSpy(monkeypatch), bind_align() // 4
  base_np = words(W+2*N+5)
  src = Buffer("VULKAN", W+2*N+5, dtypes.uint32, initial_value=base_np.tobytes()).view(2*N+4, dtypes.uint32, 4*(W+1))
  out = Buffer("VULKAN", N, dtypes.uint64).allocate()
  s, o = UOp.param(0, dtypes.uint32, (2*N+4,)), UOp.param(1, dtypes.uint64, (N,))
  r = UOp.range(N, 0, AxisType.LOOP)
  run_kernel([o.index(r).store(s.shrink(((3, 2*N+3),)).bitcast(dtypes.uint64).index(r)).end(r)], [src, out])
  np.testing.assert_array_equal(as_np(out, np.uint64), base_np[W+4:W+4+2*N].view(np.uint64))
  assert spy.offset_bound(0) and spy.variant_used(0)

def test_view_wide_load_refused_without_int64():
  """Without shaderInt64 int64 is split into 32-bit pairs; a 64-bit view of a uint32 buffer is not, and is refused by name."""
  r = run_python("""
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import run_kernel
src, out = Buffer("VULKAN", 20, dtypes.uint32, initial_value=np.arange(20, dtype=np.uint32).tobytes()), Buffer("VULKAN", 4, dtypes.uint64).allocate()
s, o, r = UOp.param(0, dtypes.uint32, (20,)), UOp.param(1, dtypes.uint64, (4,)), UOp.range(4, 0, AxisType.LOOP)
try: run_kernel([o.index(r).store(s.shrink(((3, 11),)).bitcast(dtypes.uint64).index(r)).end(r)], [src, out])
except Exception as e: print(type(e).__name__, e)""", {"VULKAN_DISABLE": "i64"})
  assert "CompileError" in r.stdout and "64-bit view" in r.stdout, r.stdout + r.stderr

def test_int64_index_without_int64():
  """A gather whose index is computed in int64 (tinygrad's fused cross-entropy casts a loaded target to weakint): without
  shaderInt64 the index is an int one (renderer/passes/packing.py), not left as an unsplit int64 cast (CompileError before)."""
  r = run_python('''
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import run_kernel
rng = np.random.default_rng(0)
for dt in (dtypes.float32, dtypes.bfloat16):
  xv = rng.uniform(-3, 3, 29).astype(np.float32)
  iv = rng.integers(0, 29, 13).astype(np.int32)
  if dt == dtypes.bfloat16: xv = ((xv.view(np.uint32) >> 16) << 16).view(np.float32); init = (xv.view(np.uint32) >> 16).astype(np.uint16).tobytes()
  else: init = xv.tobytes()
  x, i = Buffer("VULKAN", 29, dt, initial_value=init), Buffer("VULKAN", 13, dtypes.int32, initial_value=iv.tobytes())
  o = Buffer("VULKAN", 13, dtypes.float32).allocate()
  px, pi, po, r = UOp.param(0, dt, (29,)), UOp.param(1, dtypes.int32, (13,)), UOp.param(2, dtypes.float32, (13,)), UOp.range(13, 0, AxisType.LOOP)
  run_kernel([po.index(r).store(px.index(pi.index(r).cast(dtypes.long) + 1 - 1).cast(dtypes.float32)).end(r)], [x, i, o])
  res = np.frombuffer(o.as_memoryview(), np.float32)
  assert (res == xv[iv]).all(), (dt, res, xv[iv])
print("ok")
''', {"VULKAN_DISABLE": "i64"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

@needs(dtypes.float64)
def test_view_wide_store(monkeypatch):
  """float64 stores through a view of a uint32 buffer at an odd word: each split into two words, the other words untouched."""
  spy, W = BindSpy(monkeypatch), bind_align() // 4
  vals = rng.uniform(-1e6, 1e6, size=N)
  init = words(W+2*N+3)
  dst_base = Buffer("VULKAN", W+2*N+3, dtypes.uint32, initial_value=init.tobytes())
  dst = dst_base.view(2*N+2, dtypes.uint32, 4*(W+1))
  src = Buffer("VULKAN", N, dtypes.float64, initial_value=vals.tobytes())
  d, s = UOp.param(0, dtypes.uint32, (2*N+2,)), UOp.param(1, dtypes.float64, (N,))
  r = UOp.range(N, 0, AxisType.LOOP)
  run_kernel([d.shrink(((1, 2*N+1),)).bitcast(dtypes.float64).index(r).store(s.index(r) * 3.0).end(r)], [dst, src])
  exp = init.copy()
  exp[W+2:W+2+2*N] = (vals * 3.0).view(np.uint32)
  np.testing.assert_array_equal(as_np(dst_base, np.uint32), exp)
  assert spy.offset_bound(0) and spy.variant_used(0)

def test_view_narrow_load_store(monkeypatch):
  """uint8 and uint16 views of uint32 buffers: an aliased declaration of the binding, addressed in bytes / halfwords."""
  spy, W = BindSpy(monkeypatch), bind_align() // 4
  a_np, b_init = words(W+N+2), words(W+N+2)
  a = Buffer("VULKAN", W+N+2, dtypes.uint32, initial_value=a_np.tobytes()).view(N+1, dtypes.uint32, 4*(W+1))
  b_base = Buffer("VULKAN", W+N+2, dtypes.uint32, initial_value=b_init.tobytes())
  b = b_base.view(N+1, dtypes.uint32, 4*(W+1))
  pa, pb = UOp.param(0, dtypes.uint32, (N+1,)), UOp.param(1, dtypes.uint32, (N+1,))
  r = UOp.range(2*N-1, 0, AxisType.LOOP)
  bytes_ = pa.shrink(((1, N+1),)).bitcast(dtypes.uint8)                  # 4N bytes from word 1 of the view
  halves = pb.shrink(((1, N+1),)).bitcast(dtypes.uint16)                 # 2N halfwords from word 1 of the view
  run_kernel([halves.index(r).store(bytes_.index(r + 1).cast(dtypes.uint16) * 3 + bytes_.index(r)).end(r)], [a, b])
  ab = a_np[W+2:W+2+N].view(np.uint8).astype(np.uint16)
  exp = b_init.copy()
  exp_h = exp[W+2:W+2+N].view(np.uint16)   # a view: writes go into exp
  exp_h[:2*N-1] = ab[1:2*N] * 3 + ab[:2*N-1]
  np.testing.assert_array_equal(as_np(b_base, np.uint32), exp)
  assert all(spy.offset_bound(i) and spy.variant_used(i) for i in (0, 1))

# ---- bfloat16: 16-bit words, math in float, round-to-nearest-even conversions. Before: not in supported_dtypes, so tinygrad's
# emulation ran instead, which flushes bfloat16 denormals to zero.

def bf16_round(x:np.ndarray) -> np.ndarray:
  """float32 -> nearest bfloat16 (ties to even), as float32; finite inputs."""
  u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
  return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)

@needs(dtypes.bfloat16)
def test_bfloat16_roundtrip_and_math():
  from tinygrad import Tensor, Device
  assert dtypes.bfloat16 in Device["VULKAN"].renderer.supported_dtypes()
  x = np.concatenate([rng.uniform(-3, 3, 600), rng.uniform(-1, 1, 200) * 1e-38, rng.uniform(-1, 1, 231) * 1e-40]).astype(np.float32)
  y = rng.uniform(0.5, 2, x.size).astype(np.float32)
  tx, ty = Tensor(x, device="VULKAN").cast(dtypes.bfloat16), Tensor(y, device="VULKAN").cast(dtypes.bfloat16)
  np.testing.assert_array_equal(tx.cast(dtypes.float).numpy(), bf16_round(x))
  np.testing.assert_array_equal(tx.bitcast(dtypes.uint16).numpy(), bf16_round(x).view(np.uint32) >> 16)
  # every op rounds to bfloat16, as on tinygrad's CPU device
  # (a driver that flushes float32 denormals flushes the operands and results of the float math: util.flushed)
  bx, by = flushed(bf16_round(x)), flushed(bf16_round(y))
  np.testing.assert_array_equal((tx * ty + tx).cast(dtypes.float).numpy(), bf16_round(flushed(flushed(bf16_round(flushed(bx * by))) + bx)))

# ---- coalesced (float4) loads and stores: LOAD/STORE of SHRINK(buf, offset, n) as n scalar accesses packed into a GLSL vector.
# Before: supports_float4 was off, so tinygrad never produced vector accesses for this renderer.

def test_vector_loads_and_stores():
  from tinygrad import Tensor, Device
  from tinygrad.dtype import _to_np_dtype
  assert Device["VULKAN"].renderer.supports_float4
  for dt, lo, hi in [(dtypes.float, -3, 3), (dtypes.half, -3, 3), (dtypes.int, -1000, 1000), (dtypes.uint, 0, 1000)]:
    if in_words(dt): continue   # half without shaderFloat16 (VULKAN_PROFILE=min) is in 16-bit words: no vectors of it
    npdt = _to_np_dtype(dt)
    x = rng.uniform(lo, hi, 4*37+5).astype(npdt)
    t = Tensor(x, device="VULKAN").realize()[3:3+4*37]   # an odd start: vectors of 1, 2 and 4 lanes
    # kernel_sources schedules its tensor without running it: a tensor given to it must not be read afterwards
    assert any(shows(s, "vec4") for s in kernel_sources(t * 3 + 1)), f"{dt}: expected coalesced vector accesses"
    out = t * 3 + 1
    exp = x[3:3+4*37] * npdt(3) + npdt(1)
    if dt == dtypes.half: np.testing.assert_allclose(out.numpy(), exp, rtol=1e-3)
    else: np.testing.assert_array_equal(out.numpy(), exp)
  a, b = rng.uniform(-1, 1, (13, 8)).astype(np.float32), rng.uniform(-1, 1, (8, 12)).astype(np.float32)
  assert any(shows(s, "vec4") for s in kernel_sources(Tensor(a, device="VULKAN") @ Tensor(b, device="VULKAN")))
  mm = Tensor(a, device="VULKAN") @ Tensor(b, device="VULKAN")
  np.testing.assert_allclose(mm.numpy(), a @ b, rtol=1e-5, atol=1e-5)

# ---- aligned float4 accesses read a vec4 declaration of the binding; a view whose offset breaks the alignment takes the
# packed scalar path at launch. Before: every vector access was packed from scalar loads.

def test_vector_alias_and_misaligned_views(monkeypatch):
  """Buffer.views at element offsets 0..4 past the binding alignment: the runtime remainder _o is 0, 1, 2, 3, then 0 again, so
  the aligned pipeline (vec4 loads) and the variants that pack scalars both run. (Tensor slices would not do: tinygrad folds
  them into the kernel's index arithmetic.)"""
  spy, A, n = BindSpy(monkeypatch), bind_align(), 4 * 257
  base = rng.uniform(-5, 5, A + n + 16).astype(np.float32)
  whole = Buffer("VULKAN", base.size, dtypes.float32, initial_value=base.tobytes())
  pa, pb, po = UOp.param(0, dtypes.float32, (n,)), UOp.param(1, dtypes.float32, (n,)), UOp.param(2, dtypes.float32, (n,))
  r = UOp.range(n, 0, AxisType.GLOBAL)   # a GLOBAL axis: tinygrad's optimizer upcasts it into float4 accesses
  stores = [po.index(r).store(pa.index(r) + pb.index(r) * 2).end(r)]
  if vectors(4 * n): assert shows(kernel_source(stores), "vec4_var"), "aligned float4 access should use a vec4 alias"
  for start in range(5):
    a, b = whole.view(n, dtypes.float32, A + 4 * start), whole.view(n, dtypes.float32, A + 4 * (start + 3))
    out = Buffer("VULKAN", n, dtypes.float32).allocate()
    run_kernel(stores, [a, b, out])
    s = A // 4 + start
    np.testing.assert_array_equal(as_np(out, np.float32), base[s:s + n] + base[s + 3:s + 3 + n] * 2)
  assert [key[0] for _, key, _ in spy.binds] == [4, 1, 2, 1, 4] and all(offs[0] > 0 for offs, _, _ in spy.binds), spy.binds

# ---- a buffer of the kernel whose accesses were all folded away: tinygrad passes the others only. Before: "buffer slots of ...
# are not 0..n-1" (under VULKAN_PROFILE=min tinygrad's 4-buffer splitting made such a kernel in test_ops::test_simple_cumprod).

def test_kernel_with_an_unused_buffer():
  a_np = rng.uniform(-2, 2, N).astype(np.float32)
  out, unused = Buffer("VULKAN", N, dtypes.float32).allocate(), Buffer("VULKAN", 4, dtypes.float32).allocate()
  src = Buffer("VULKAN", N, dtypes.float32, initial_value=a_np.tobytes())
  o, s = UOp.param(0, dtypes.float32, (N,)), UOp.param(2, dtypes.float32, (N,))
  r = UOp.range(N, 0, AxisType.LOOP)
  run_kernel([o.index(r).store(s.index(r) * 2.0 + 1.0).end(r)], [out, unused, src])
  np.testing.assert_array_equal(as_np(out, np.float32), a_np * 2 + 1)

@needs(dtypes.half)
def test_half_sin_and_exp2_in_float():
  # tinygrad decomposes sin and exp2 of half in half; the renderer keeps both and decomposes them in float32 (renderer/kernel.py
  # transcendental_matcher): Vulkan promises little for float16 math, and lavapipe compiles it slowly. No half arithmetic is left
  from tinygrad import Tensor
  from tinygrad.uop.ops import GroupOp
  special = [0.0, -0.0, 30.0, np.inf, -np.inf, np.nan]
  for f, ref, x in ((Tensor.sin, np.sin, np.concatenate([data((997,), lo=-40.0, hi=40.0), [1000.0], special])),
                    (Tensor.exp2, np.exp2, np.concatenate([data((997,), lo=-14.0, hi=15.0), special]))):
    x = x.astype(np.float16)
    for p in kernel_programs(f(Tensor(x))):
      assert not [u.op for u in p.src[1].src if u.op in GroupOp.ALU and u.dtype == dtypes.half], p.src[2].arg
    with np.errstate(invalid="ignore", over="ignore"):
      np.testing.assert_allclose(f(Tensor(x)).numpy().astype(np.float64), ref(x.astype(np.float64)).astype(np.float16), atol=1e-3, rtol=1e-3)
