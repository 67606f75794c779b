"""On a driver that packs invocations into SIMD vectors along local x only (llvmpipe: the "fillx" flag), a kernel whose local x is
narrower than a vector gets its local dims merged into x, and where it takes each workgroup as a task ("wide"), neighbouring workgroups
are joined along x (tinygrad_vk/renderer/passes/simd.py); every element stays right. The structure checks run on llvmpipe and fail
under VULKAN_DISABLE=fillx / wide; the values are checked on any device."""
from dataclasses import replace
import numpy as np
import util
import pytest
from tinygrad import Tensor, Device
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.engine.realize import run_linear

LLVMPIPE = "fillx" in Device["VULKAN"].phys.flags()   # the driver packs along x, whatever VULKAN_DISABLE says
def data(shape, lo=-2.0, hi=2.0) -> np.ndarray: return util.data(shape, lo=lo, hi=hi)

def renderer(flags): return util.renderer_with(flags=flags)
def local_sizes(t:Tensor, flags) -> list[tuple[int, ...]]:
  return [to_program(c.src[0], renderer(flags)).arg.local_size for c in t.linear_with_vars()[0].src if c.src[0].op is Ops.SINK]

@pytest.mark.parametrize("m,k,n", [(40, 301, 128), (12, 1001, 64), (40, 3001, 112)])
def test_matmul_local_dims_merged(m, k, n):
  # tinygrad gives these matmuls local dims (2, 16) or (4, 16): two or four live lanes per llvmpipe vector
  a, b = data((m, k)), data((k, n))
  if LLVMPIPE:
    caps = Device["VULKAN"].renderer.caps
    # fill_x alone: lanes_x (test_lanes_along_x) may already put the 16 on x
    merged, plain = (local_sizes(Tensor(a) @ Tensor(b), caps.flags - {"lanex", "wide"} - off) for off in (set(), {"fillx"}))
    assert any(p[0] < 8 and p[1] > 1 for p in plain), plain
    assert all(q[0] >= 8 or q[1:] == (1, 1) for q in merged) and [np.prod(q) for q in merged] == [np.prod(p) for p in plain], (plain, merged)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)

def test_workgroups_joined():
  # row sums with local x = 2 and no shared memory: 5 neighbouring workgroups join x (10 invocations); values unchanged
  x = data((40, 1001))
  if LLVMPIPE: assert local_sizes(Tensor(x).sum(1), Device["VULKAN"].renderer.caps.flags) == [(10, 1, 1)]
  np.testing.assert_allclose(Tensor(x).sum(1).numpy(), x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("opts", [(Opt(OptOps.LOCAL, 0, 2), Opt(OptOps.GROUP, 0, 16)), (Opt(OptOps.GROUP, 0, 4), Opt(OptOps.LOCAL, 0, 3))],
                         ids=["local2_group16", "group4_local3"])
def test_grouped_reduction_merged(opts):
  # a reduction shared over the workgroup through shared memory, with local dims (2, 16) / (4, 3): each invocation indexes the same
  # shared memory after the merge
  xn = data((42, 304))
  lin, var_vals = Tensor(xn).sum(1).linear_with_vars()
  call = next(c for c in lin.src if c.src[0].op is Ops.SINK)
  new = call.replace(src=(call.src[0].replace(arg=replace(call.src[0].arg, opts_to_apply=opts)),) + call.src[1:])
  prg = to_program(new.src[0], renderer(Device["VULKAN"].renderer.caps.flags - {"lanex", "wide"}))   # fill_x alone
  if LLVMPIPE: assert prg.arg.local_size[0] >= 8 and prg.arg.local_size[1:] == (1, 1), prg.arg.local_size
  run_linear(lin.replace(src=tuple(new if c is call else c for c in lin.src)), var_vals)
  np.testing.assert_allclose(np.frombuffer(new.src[1].buffer.as_memoryview(), np.float32), xn.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)

WIDE = "wide" in Device["VULKAN"].phys.flags()
# n elements, each lane of tinygrad's kernel: upcast 3 in workgroups of 32, 5087 of them (a prime: no divisor joins them exactly, the
# last joined workgroup runs past the end); 3 x 32 x 4000 (joined 8 at a time exactly); 4 x 100003 (upcast 4, no local dims at all)
@pytest.mark.parametrize("n,plain", [(96 * 5087, (32, 1, 1)), (96 * 4000, (32, 1, 1)), (4 * 100003, (1, 1, 1))],
                         ids=["rounded_up", "exact", "no_locals"])
def test_workgroups_widened(n, plain):
  # in place (a = a * 0.75 + b): an invocation past the end that stored would write what it read again, scaled twice
  a, b = data(n), data(n)
  def step():
    x = Tensor(a).contiguous().realize()
    return x.assign(x * 0.75 + Tensor(b))
  if WIDE:
    caps = Device["VULKAN"].renderer.caps   # 256 invocations, or fewer where a profile's limits say so
    joined, flags = (min(256, caps.wgsize[0], caps.wginv), 1, 1), caps.flags - {"quads"}   # tinygrad's upcasts (renderer/opts.py)
    assert local_sizes(step(), flags - {"wide"}) == [plain] and local_sizes(step(), flags) == [joined]
  np.testing.assert_allclose(step().numpy(), a.astype(np.float64) * 0.75 + b, rtol=1e-6, atol=1e-6)

def test_workgroups_widened_across_the_grid():
  # BERT's decoder logits, smaller: tinygrad gives (40, 128) @ (128, 6 * 3299) workgroups of 4 invocations, 3299 (a prime) along x
  # and 5 along y: 65980 invocations in all, enough to round x up although x alone has 13196
  a, w = data((40, 128)), data((6 * 3299, 128))
  if WIDE:
    caps = Device["VULKAN"].renderer.caps
    assert local_sizes(Tensor(a) @ Tensor(w).T, caps.flags - {"wide"}) == [(4, 1, 1)]
    assert local_sizes(Tensor(a) @ Tensor(w).T, caps.flags) == [(min(256, caps.wgsize[0], caps.wginv), 1, 1)]
  np.testing.assert_allclose((Tensor(a) @ Tensor(w).T).numpy(), a.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)

def conv_ref(x:np.ndarray, w:np.ndarray) -> np.ndarray:
  """conv2d with padding 1 in float64: each 3x3 tap as one einsum over the padded input."""
  xp, (_, _, H, W) = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1))), x.shape
  return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + H, j:j + W], w[:, :, i, j].astype(np.float64)) for i in range(3) for j in range(3))

@pytest.mark.parametrize("kind,shapes", [("matmul", ((64, 33), (33, 48))), ("matmul", ((128, 45), (45, 72))),
                                         ("conv", ((3, 4, 16, 24), (8, 4, 3, 3))), ("conv", ((2, 5, 19, 21), (6, 5, 3, 3)))])
def test_lanes_along_x(kind, shapes):
  # tinygrad gives these local dims (8, 16): x along the output's rows, whose reads lie a row apart; lanes_x swaps x and y so that
  # x runs along the columns (neighbouring reads), the same invocations renumbered; every element stays right
  a, b = data(shapes[0]), data(shapes[1])
  def f(): return Tensor(a) @ Tensor(b) if kind == "matmul" else Tensor(a).conv2d(Tensor(b), padding=1)
  if "lanex" in Device["VULKAN"].phys.flags() and shapes[0] != (2, 5, 19, 21):   # the last: nothing to swap, values only
    flags = Device["VULKAN"].renderer.caps.flags - {"quads"}   # tinygrad's upcasts, and so its local dims (renderer/opts.py)
    on, off = local_sizes(f(), flags), local_sizes(f(), flags - {"lanex"})
    two = [i for i, p in enumerate(off) if p[1] > 1]
    assert two and all(on[i] == (off[i][1], off[i][0], off[i][2]) for i in two), (on, off)
  np.testing.assert_allclose(f().numpy(), a.astype(np.float64) @ b if kind == "matmul" else conv_ref(a, b), rtol=1e-4, atol=1e-4)
