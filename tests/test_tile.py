"""On llvmpipe (the "tile" flag) an invocation of a reduction in loops does the work of 2 or 4 launch indices, sharing the loads
that do not depend on them (tinygrad_vk/renderer/passes/tile.py): tinygrad's 4x4 matmul tiles become up to 8x8. The structure checks run
on llvmpipe, for every case, and fail under VULKAN_DISABLE=tile; the values are checked on any device."""
from dataclasses import replace
import numpy as np
import util
import pytest
from tinygrad import Tensor, Device, TinyJit
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program

LLVMPIPE = "tile" in Device["VULKAN"].phys.flags()   # the driver has the path, whatever VULKAN_DISABLE says
def data(shape, lo=-2.0, hi=2.0) -> np.ndarray: return util.data(shape, lo=lo, hi=hi)

def replayed(fn):
  """fn() run as the first call of a TinyJit (tinygrad runs it as it is), so its kernels compile with the tile pass's bound for kernels
  a JIT's graph replays (Caps.jit, TILE_MIN_WORK); launched eagerly only kernels of 2^25 accumulator updates and up are doubled."""
  return TinyJit(fn)()

def programs(t:Tensor, flags, jit=1) -> list:
  """The programs of the kernels realizing t, rendered with these flags, inside a TinyJit call (jit=1) or not."""
  ren = Device["VULKAN"].renderer
  r = type(ren)(replace(ren.target, arch=replace(ren.caps, flags=flags, jit=jit).encode()))
  return [to_program(c.src[0], r) for c in t.linear_with_vars()[0].src if c.src[0].op is Ops.SINK]
def groups(t:Tensor, flags, jit=1) -> list[int]:
  """Workgroups of each kernel realizing t would run, rendered with these flags."""
  return [int(np.prod(p.arg.global_size)) for p in programs(t, flags, jit)]

# (m, k, n, whether the pass doubles it): 37 x 23 has no even launch dim to double along; 40 x 301 x 128 is under TILE_MIN_WORK
# accumulator updates, which its first launch would pay for in compile time (it was doubled twice before that bound)
MATMULS = [(512, 512, 512, True), (40, 301, 128, False), (64, 1001, 96, True), (37, 45, 23, False)]

@pytest.mark.parametrize("m,k,n,even", MATMULS)
def test_matmul_tiles(m, k, n, even):
  a, b = data((m, k)), data((k, n))
  np.testing.assert_allclose(replayed(lambda: (Tensor(a) @ Tensor(b)).numpy()), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=2e-4)

@pytest.mark.skipif(not LLVMPIPE, reason="the tile path is llvmpipe's (flag 'tile')")
@pytest.mark.parametrize("m,k,n,even", MATMULS)
def test_matmul_tile_structure(m, k, n, even):
  a, b, caps = data((m, k)), data((k, n)), Device["VULKAN"].renderer.caps
  tiled, plain = groups(Tensor(a) @ Tensor(b), caps.flags), groups(Tensor(a) @ Tensor(b), caps.flags - {"tile"})
  # a doubling keeps at least two workgroups per llvmpipe thread (tile.py): a launch of fewer stays as it is
  if even and plain[-1] >= 4 * max(caps.threads, 1): assert tiled[-1] < plain[-1], (tiled, plain)
  else: assert tiled == plain, (tiled, plain)

def gelu(x:np.ndarray) -> np.ndarray:   # tinygrad's: the tanh approximation
  x = x.astype(np.float64)
  return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

def uops(t:Tensor, flags) -> int:
  """UOps of the last kernel realizing t, rendered with these flags."""
  return len(next(s for s in programs(t, flags)[-1].src if s.op is Ops.LINEAR).src)

# (epilogue fused after a 200 x 256 @ 256 x 512 matmul, its numpy reference, whether it outweighs the loop body): BERT's FFN fuses
# GELU (~40 UOps an output) after its matmul; doubled with it, it took lavapipe 389 ms to compile against 159 ms once in a loop
# over the copies (tile.py). A ReLU is small next to the loop body: it is doubled with it
EPILOGUES = [(Tensor.gelu, gelu, True), (Tensor.relu, lambda x: np.maximum(x, 0), False)]

@pytest.mark.parametrize("epilogue,ref,heavy", EPILOGUES)
def test_matmul_epilogue(epilogue, ref, heavy):
  a, b = data((200, 256)), data((256, 512))
  np.testing.assert_allclose(replayed(lambda: epilogue(Tensor(a) @ Tensor(b)).numpy()), ref(a.astype(np.float64) @ b), rtol=1e-4, atol=2e-4)
  if not LLVMPIPE: return
  caps, out = Device["VULKAN"].renderer.caps, lambda: epilogue(Tensor(a) @ Tensor(b))
  assert groups(out(), caps.flags)[-1] < groups(out(), caps.flags - {"tile"})[-1]   # doubled either way
  # the heavy epilogue once: the kernel grows by its loop body (1.75x its UOps untiled), where doubled with it the kernel was 3.6x
  if heavy: assert uops(out(), caps.flags) < 2 * uops(out(), caps.flags - {"tile"}), (uops(out(), caps.flags), uops(out(), caps.flags - {"tile"}))

def test_reductions_keep_their_values():
  # a batched matmul, a conv (padded: gated loads inside the loops), a max and a sum along an axis: coarsened or not, every element
  x, w = data((4, 8, 33, 30)), data((16, 8, 3, 3))
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  ref = sum(np.einsum("bchw,oc->bohw", xp[:, :, i:i + 33, j:j + 30], w[:, :, i, j]) for i in range(3) for j in range(3))
  np.testing.assert_allclose(replayed(lambda: Tensor(x).conv2d(Tensor(w), padding=1).numpy()), ref, rtol=1e-4, atol=2e-4)
  a, b = data((6, 64, 70)), data((6, 70, 48))
  np.testing.assert_allclose(replayed(lambda: (Tensor(a) @ Tensor(b)).numpy()), a.astype(np.float64) @ b, rtol=1e-4, atol=2e-4)
  y = data((96, 1003))
  np.testing.assert_allclose(replayed(lambda: Tensor(y).max(1).numpy()), y.max(1))
  np.testing.assert_allclose(replayed(lambda: Tensor(y).sum(0).numpy()), y.astype(np.float64).sum(0), rtol=1e-4, atol=1e-4)

def test_tiles_in_a_graph():
  # a TinyJit graph replays the coarsened kernels with new inputs
  @TinyJit
  def f(a:Tensor, b:Tensor) -> Tensor: return (a @ b).relu().realize()
  for i in range(4):
    a, b = data((64, 96)), data((96, 128))
    np.testing.assert_allclose(f(Tensor(a), Tensor(b)).numpy(), np.maximum(a.astype(np.float64) @ b, 0), rtol=1e-4, atol=2e-4, err_msg=f"call {i}")

@pytest.mark.parametrize("t", [1, 2, 4, 5])
def test_matmul_fused_with_a_pad(t):
  # Whisper's decoder writes its prompt's keys into a KV cache padded to 448 rows: one kernel, its loads of x gated to the rows
  # that exist. Doubling along the row groups left copy 1 of the first group loads whose gate is false and whose index lies past
  # x (1536 floats for 4 tokens), which tinygrad cannot size: "invalid shrink" at compile time. Such a load is its alternative now.
  x, w = data((1, t, 384)), data((384, 384))
  cache = Tensor.zeros(1, 448, 384).contiguous().realize()
  replayed(lambda: cache.assign((Tensor(x) @ Tensor(w).T).pad((None, (0, 448 - t), None)).contiguous()).realize())
  ref = np.zeros((1, 448, 384))
  ref[:, :t] = x.astype(np.float64) @ w.T.astype(np.float64)
  np.testing.assert_allclose(cache.numpy(), ref, rtol=1e-4, atol=2e-4)

@pytest.mark.skipif(not LLVMPIPE, reason="the tile path is llvmpipe's (flag 'tile')")
def test_eager_kernels_tile_only_when_large():
  # a kernel launched eagerly costs tinygrad host time at every launch in proportion to its UOps and compiles for a few launches:
  # doubled from 2^25 accumulator updates (GEMM 512), where one a TinyJit graph replays is from 2^22 (LLaMA's 64-token prefill's
  # matmuls, 2^22-2^23.4, ran slower tiled, warm and cold). The renderer knows which from the TinyJit calls running (Caps.jit)
  seen = []
  def f(a:Tensor, b:Tensor) -> Tensor:
    seen.append(Device["VULKAN"].renderer.caps.jit)
    return (a @ b).realize()
  a, b, caps = data((64, 1001)), data((1001, 96)), Device["VULKAN"].renderer.caps
  for out in (f(Tensor(a), Tensor(b)), TinyJit(f)(Tensor(a), Tensor(b))):
    np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=2e-4)
  assert seen == [0, 1]
  def mm(n): return Tensor(data((n, n))) @ Tensor(data((n, n)))
  assert groups(mm(256), caps.flags, jit=0) == groups(mm(256), caps.flags - {"tile"}, jit=0)   # 2^22: not in an eager kernel
  assert groups(mm(256), caps.flags, jit=1)[-1] < groups(mm(256), caps.flags - {"tile"}, jit=1)[-1]   # in a replayed one
  assert groups(mm(512), caps.flags, jit=0)[-1] < groups(mm(512), caps.flags - {"tile"}, jit=0)[-1]   # 2^25: in both
