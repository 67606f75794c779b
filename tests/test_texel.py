"""On llvmpipe (the "texel" flag) a kernel reads its read-only 32-bit buffers through storage texel buffers, not storage buffers
(renderer/plan.py texel_slots): gallivm loads a storage buffer lane by lane, a texel buffer with one gather. The runtime binds an
R32_UINT view of each buffer range (R32G32B32A32_UINT where the kernel reads it in aligned float4s only, flag texel4), made once
and destroyed with the buffer (program.py, memory.py). The structure checks run on
llvmpipe and fail under VULKAN_DISABLE=texel; the values are checked first, on any device and path, and a structure check that
cannot apply skips naming why."""
import functools
import numpy as np
import util
import pytest
from tinygrad import Tensor, Device, TinyJit, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import kernel_sources, run_kernel, is_spirv

LLVMPIPE = "texel" in Device["VULKAN"].phys.flags()   # the driver has the path, whatever VULKAN_DISABLE says
# a buffer past maxStorageBufferRange (VULKAN_MAX_STORAGE_RANGE lowers it) is passed by address instead, never as a texel buffer
def structure(*arrays) -> None:
  """Skip the rest of the test (its values already checked) where no texel buffer can be expected."""
  if not LLVMPIPE: pytest.skip("structure: texel buffers are llvmpipe's path (flag 'texel')")
  if any(a.nbytes + 256 > Device["VULKAN"].caps.range for a in arrays):
    pytest.skip("structure: a buffer past maxStorageBufferRange is passed by address, not as a texel buffer")
  if any(a.size + 64 > Device["VULKAN"].caps.texels for a in arrays):   # VULKAN_PROFILE=swiftshader: 65536
    pytest.skip("structure: a buffer past maxTexelBufferElements is read as a storage buffer (renderer/plan.py texel_ok)")
def data(shape, lo=-2.0, hi=2.0) -> np.ndarray: return util.data(shape, lo=lo, hi=hi)

def texel_reads(src:str) -> int: return src.count("OpImageRead" if is_spirv(src) else "imageLoad(")
def texel_buffers(src:str) -> int: return src.count("OpVariable %puc_img" if is_spirv(src) else "uimageBuffer ")

def test_matmul_reads_texels():
  # both inputs read only: texel buffers; the output a storage buffer. 37 x 301 @ 301 x 45: no size a multiple of the tiles
  a, b = data((37, 301)), data((301, 45))
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
  structure(a, b)
  srcs = kernel_sources(Tensor(a) @ Tensor(b))
  assert any(texel_reads(s) for s in srcs), srcs[0][:2000]

def test_32bit_types_through_texels():
  # one R32_UINT format for every 32-bit type: int, uint and float bits come back unchanged (negative ints, NaN payloads too)
  xi = util.rng.integers(-2**31, 2**31, 1003, dtype=np.int64).astype(np.int32)
  xu = util.rng.integers(0, 2**32, 1003, dtype=np.uint64).astype(np.uint32)
  xf = np.concatenate([data(1000), np.array([np.nan, -0.0, np.inf], np.float32)])
  def out(): return (Tensor(xi) ^ Tensor(xu).bitcast(dtypes.int32)) + Tensor(xf).bitcast(dtypes.int32)
  ref = (xi ^ xu.view(np.int32)).astype(np.int64) + xf.view(np.int32)
  np.testing.assert_array_equal(out().numpy(), ref.astype(np.int32))
  structure(xi, xu, xf)
  assert texel_reads(kernel_sources(out())[0]) == 3

def test_gated_and_vector_reads():
  # a padded read (gated: no texel past the buffer is fetched) and float4 reads (lanes of texels), 1001 columns
  x = data((7, 1001))
  out = Tensor(x).pad(((2, 1), (3, 0))) * 2 + 1
  ref = np.pad(x, ((2, 1), (3, 0))) * 2 + 1
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
  y = data((64, 1024))
  np.testing.assert_allclose((Tensor(y) + Tensor(y[::-1].copy())).numpy(), y + y[::-1], rtol=1e-6)
  structure(x, y)
  assert texel_reads(kernel_sources(Tensor(x).pad(((2, 1), (3, 0))) * 2 + 1)[0]), "the padded read is not through a texel buffer"
  assert texel_reads(kernel_sources(Tensor(y) + Tensor(y[::-1].copy()))[-1]), "the float4 reads are not through texel buffers"

@pytest.mark.parametrize("off", [1, 3, 4, 61])
def test_views_at_offsets(off):
  # a view bound at its element offset: the texel view starts at the aligned-down byte, the rest is the push-constant offset
  n = 301
  base = data(n + 64)
  src = Buffer("VULKAN", n + 64, dtypes.float32, initial_value=base.tobytes()).view(n, dtypes.float32, 4 * off)
  out = Buffer("VULKAN", n, dtypes.float32).allocate()
  p, o = UOp.param(0, dtypes.float32, (n,)), UOp.param(1, dtypes.float32, (n,))
  r = UOp.range(n, 0, AxisType.LOOP)
  run_kernel([o.index(r).store(p.index(r) * 3 + 1).end(r)], [src, out])
  np.testing.assert_allclose(np.frombuffer(out.as_memoryview(), np.float32), base[off:off + n] * 3 + 1, rtol=1e-6)

def rgba_buffers(src:str) -> int: return src.count("OpVariable %puc_img_rgba32ui" if is_spirv(src) else "rgba32ui")

@pytest.mark.parametrize("n", [4 * 257, 4 * 33 + 4096])
def test_float4_reads_as_rgba_texels(n):
  """Read only in float4s at indexes that are multiples of 4: an R32G32B32A32_UINT texel buffer ("texel4"), a texel a float4 where
  the view's element offset keeps it aligned, else a lane a component of a texel. Views at element offsets 0..4 past the binding
  alignment (tinygrad folds Tensor slices into index arithmetic: a Buffer.view is bound at its offset), so both run, and views
  that end inside a texel (its view rounded up to whole texels)."""
  A = util.bind_align()
  base = data(A + n + 16)
  whole = Buffer("VULKAN", base.size, dtypes.float32, initial_value=base.tobytes())
  pa, pb, po = UOp.param(0, dtypes.float32, (n,)), UOp.param(1, dtypes.float32, (n,)), UOp.param(2, dtypes.float32, (n,))
  r = UOp.range(n, 0, AxisType.GLOBAL)   # a GLOBAL axis: tinygrad's optimizer upcasts it into float4 accesses
  stores = [po.index(r).store(pa.index(r) + pb.index(r) * 2).end(r)]
  for start in range(5):
    a, b = whole.view(n, dtypes.float32, A + 4 * start), whole.view(n, dtypes.float32, A + 4 * (start + 3))
    out = Buffer("VULKAN", n, dtypes.float32).allocate()
    run_kernel(stores, [a, b, out])
    s = A // 4 + start
    np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), np.float32), base[s:s + n] + base[s + 3:s + 3 + n] * 2,
                                  err_msg=f"offset {start}")
  structure(base)
  if "texel4" not in Device["VULKAN"].phys.flags(): pytest.skip("structure: the driver has no RGBA32 texel buffers (flag texel4)")
  assert rgba_buffers(util.kernel_source(stores)) == 2, util.kernel_source(stores)[:3000]

@pytest.mark.parametrize("m,k,n", [(33, 70, 19), (36, 132, 76)])   # the second read in float4s: RGBA32 texel buffers (texel4)
def test_graph_replays_texels(m, k, n):
  # a TinyJit graph keeps its descriptor sets, and so its texel views, across replays with new inputs
  @TinyJit
  def f(a:Tensor, b:Tensor) -> Tensor: return (a @ b + 1).realize()
  for i in range(4):
    a, b = data((m, k)), data((k, n))
    np.testing.assert_allclose(f(Tensor(a), Tensor(b)).numpy(), a.astype(np.float64) @ b + 1, rtol=1e-4, atol=1e-4, err_msg=f"call {i}")

def test_views_freed_with_their_buffer():
  dev = Device["VULKAN"]
  x = data(4099)
  t = Tensor(x).realize()
  buf = t.uop.buffer._buf
  np.testing.assert_allclose((t * 2).numpy(), x * 2, rtol=1e-6)
  made = bool(buf.views)
  del t
  dev.allocator.free_cache()
  dev.synchronize()
  assert buf.views is None and buf.block is None
  structure(x)
  assert made, "no texel view was made for the input"

def test_at_most_max_texels():
  # 20 inputs: the first MAX_TEXELS are texel buffers, the rest storage buffers (llvmpipe slows down past 15, kernel.MAX_TEXELS)
  from tinygrad_vk.renderer.plan import MAX_TEXELS
  xs = [data(1001) for _ in range(20)]
  def out(): return functools.reduce(lambda p, q: p + q, [Tensor(x) for x in xs])
  np.testing.assert_allclose(out().numpy(), np.sum(np.stack(xs).astype(np.float64), 0), rtol=1e-5, atol=1e-5)
  structure(*xs)
  # with fewer storage-buffer descriptors than its 21 buffers (VULKAN_PROFILE=min: 4) the kernel is windowed, which reads no texels
  if Device["VULKAN"].caps.bufs < 21: pytest.skip(f"structure: {Device['VULKAN'].caps.bufs} descriptors, a kernel of 21 buffers is windowed")
  src = kernel_sources(out())[-1]
  assert texel_buffers(src) == MAX_TEXELS, src[:3000]
