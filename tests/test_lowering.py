"""Regression tests for the lowering (renderer/glsl.py, renderer/spirv.py): each one failed before its fix in the GLSL renderer, and runs on
whichever renderer DEV picks. Every element is checked against numpy."""
import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import run_kernel, kernel_sources, shows

rng = np.random.default_rng(7)
N = 13   # not a multiple of any workgroup size

def words(n:int) -> np.ndarray: return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)

def as_np(b:Buffer, npdt) -> np.ndarray: return np.frombuffer(b.as_memoryview(), dtype=npdt).copy()

# ---- buffer views inside a kernel: INDEX(BITCAST(SHRINK(PARAM))). Before: the renderer emitted C pointer casts, which glslang rejects.
# The source is itself a tinygrad view at a 4-byte offset, so the push-constant element offset _o is nonzero too.

def test_view_wide_load():
  """uint64 elements read through a view of a uint32 buffer at an odd word: each put together from two words."""
  base_np = words(2*N+5)
  src = Buffer("VULKAN", 2*N+5, dtypes.uint32, initial_value=base_np.tobytes()).view(2*N+4, dtypes.uint32, 4)
  out = Buffer("VULKAN", N, dtypes.uint64).allocate()
  s, o = UOp.param(0, dtypes.uint32, (2*N+4,)), UOp.param(1, dtypes.uint64, (N,))
  r = UOp.range(N, 0, AxisType.LOOP)
  run_kernel([o.index(r).store(s.shrink(((3, 2*N+3),)).bitcast(dtypes.uint64).index(r)).end(r)], [src, out])
  np.testing.assert_array_equal(as_np(out, np.uint64), base_np[4:4+2*N].view(np.uint64))

def test_view_wide_store():
  """float64 stores through a view of a uint32 buffer at an odd word: each split into two words, the other words untouched."""
  vals = rng.uniform(-1e6, 1e6, size=N)
  init = words(2*N+3)
  dst_base = Buffer("VULKAN", 2*N+3, dtypes.uint32, initial_value=init.tobytes())
  dst = dst_base.view(2*N+2, dtypes.uint32, 4)
  src = Buffer("VULKAN", N, dtypes.float64, initial_value=vals.tobytes())
  d, s = UOp.param(0, dtypes.uint32, (2*N+2,)), UOp.param(1, dtypes.float64, (N,))
  r = UOp.range(N, 0, AxisType.LOOP)
  run_kernel([d.shrink(((1, 2*N+1),)).bitcast(dtypes.float64).index(r).store(s.index(r) * 3.0).end(r)], [dst, src])
  exp = init.copy()
  exp[2:2+2*N] = (vals * 3.0).view(np.uint32)
  np.testing.assert_array_equal(as_np(dst_base, np.uint32), exp)

def test_view_narrow_load_store():
  """uint8 and uint16 views of uint32 buffers: an aliased declaration of the binding, addressed in bytes / halfwords."""
  a_np, b_init = words(N+2), words(N+2)
  a = Buffer("VULKAN", N+2, dtypes.uint32, initial_value=a_np.tobytes()).view(N+1, dtypes.uint32, 4)
  b_base = Buffer("VULKAN", N+2, dtypes.uint32, initial_value=b_init.tobytes())
  b = b_base.view(N+1, dtypes.uint32, 4)
  pa, pb = UOp.param(0, dtypes.uint32, (N+1,)), UOp.param(1, dtypes.uint32, (N+1,))
  r = UOp.range(2*N-1, 0, AxisType.LOOP)
  bytes_ = pa.shrink(((1, N+1),)).bitcast(dtypes.uint8)                  # 4N bytes from word 1 of the view
  halves = pb.shrink(((1, N+1),)).bitcast(dtypes.uint16)                 # 2N halfwords from word 1 of the view
  run_kernel([halves.index(r).store(bytes_.index(r + 1).cast(dtypes.uint16) * 3 + bytes_.index(r)).end(r)], [a, b])
  ab = a_np[2:2+N].view(np.uint8).astype(np.uint16)
  exp = b_init.copy()
  exp_h = exp[2:2+N].view(np.uint16)   # a view: writes go into exp
  exp_h[:2*N-1] = ab[1:2*N] * 3 + ab[:2*N-1]
  np.testing.assert_array_equal(as_np(b_base, np.uint32), exp)

# ---- bfloat16: 16-bit words, math in float, round-to-nearest-even conversions. Before: not in supported_dtypes, so tinygrad's
# emulation ran instead, which flushes bfloat16 denormals to zero.

def bf16_round(x:np.ndarray) -> np.ndarray:
  """float32 -> nearest bfloat16 (ties to even), as float32; finite inputs."""
  u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
  return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)

def test_bfloat16_roundtrip_and_math():
  from tinygrad import Tensor, Device
  assert dtypes.bfloat16 in Device["VULKAN"].renderer.supported_dtypes()
  x = np.concatenate([rng.uniform(-3, 3, 600), rng.uniform(-1, 1, 200) * 1e-38, rng.uniform(-1, 1, 231) * 1e-40]).astype(np.float32)
  y = rng.uniform(0.5, 2, x.size).astype(np.float32)
  tx, ty = Tensor(x, device="VULKAN").cast(dtypes.bfloat16), Tensor(y, device="VULKAN").cast(dtypes.bfloat16)
  np.testing.assert_array_equal(tx.cast(dtypes.float).numpy(), bf16_round(x))
  np.testing.assert_array_equal(tx.bitcast(dtypes.uint16).numpy(), bf16_round(x).view(np.uint32) >> 16)
  # every op rounds to bfloat16, as on tinygrad's CPU device
  np.testing.assert_array_equal((tx * ty + tx).cast(dtypes.float).numpy(), bf16_round(bf16_round(bf16_round(x) * bf16_round(y)) + bf16_round(x)))

# ---- coalesced (float4) loads and stores: LOAD/STORE of SHRINK(buf, offset, n) as n scalar accesses packed into a GLSL vector.
# Before: supports_float4 was off, so tinygrad never produced vector accesses for this renderer.

def test_vector_loads_and_stores():
  from tinygrad import Tensor, Device
  from tinygrad.dtype import _to_np_dtype
  assert Device["VULKAN"].renderer.supports_float4
  for dt, lo, hi in [(dtypes.float, -3, 3), (dtypes.half, -3, 3), (dtypes.int, -1000, 1000), (dtypes.uint, 0, 1000)]:
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

def test_vector_alias_and_misaligned_views():
  from tinygrad import Tensor
  assert any(shows(s, "vec4_var") for s in kernel_sources(Tensor.empty(4 * 257) + Tensor.empty(4 * 257))), "aligned float4 access should use a vec4 alias"
  base = rng.uniform(-5, 5, 4 * 257 + 8).astype(np.float32)
  t = Tensor(base, device="VULKAN").realize()
  for start in range(5):   # element offsets 0..4 inside the buffer: the runtime remainder _o is 0, 1, 2, 3, then 0 again
    a, b = t[start:start + 4 * 257], t[start + 3:start + 3 + 4 * 257]
    np.testing.assert_array_equal((a + b * 2).numpy(), base[start:start + 4 * 257] + base[start + 3:start + 3 + 4 * 257] * 2)
