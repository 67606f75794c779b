"""A reduction whose value does not depend on the launch indices (LAMB's trust ratio ||w|| / ||update||, fused by tinygrad into the
elementwise update) is computed once per workgroup, spread over its invocations, in few workgroups (tinygrad_vk/renderer/passes/hoist.py),
and every element stays right. Runs on any device: the fold's workgroup count is checked with the device's and a GPU's threads."""
import numpy as np
from util import data, renderer_with
import pytest
from tinygrad import Tensor, Device, Variable
from tinygrad.helpers import prod
from tinygrad_vk.renderer.passes.loops import loop_passes
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program


@pytest.fixture(params=["device", "gpu"])
def ren(request, monkeypatch):
  """The device's renderer, and one that knows no thread count (a GPU's fold); both run on the real device. Both keep tinygrad's
  GROUPs (no "rows" flag: renderer/opts.py runs most of them whole on each lane on llvmpipe), the kernels these paths reshape."""
  flags = Device["VULKAN"].renderer.caps.flags - {"rows"}
  r = renderer_with(flags=flags) if request.param == "device" else renderer_with(threads=0, flags=flags)
  monkeypatch.setattr(type(Device["VULKAN"]), "renderer", property(lambda self: r))
  return r

def check_hoisted(make, ren, flag="hoist"):
  """The kernels of make() do at least 2x less work than without the flag's path (the test fails when it is switched off)."""
  plain = renderer_with(flags=ren.caps.flags - {flag})
  def total(r):
    t = make()
    return sum(prod(p.arg.global_size) * prod(p.arg.local_size) * loop_passes(list(p.src[1].src))
               for p in (to_program(c.src[0], r) for c in t.linear_with_vars()[0].src if c.src[0].op is Ops.SINK))
  hoisted, before = total(ren), total(plain)
  assert hoisted * 2 <= before, f"{hoisted} loop passes over the launch, {before} without hoisting"

def lamb(w:Tensor, u:Tensor) -> Tensor: return w - 0.01 * (w.square().sum().sqrt() / u.square().sum().sqrt()) * u

@pytest.mark.parametrize("shape", [(128, 128), (97, 131), (3, 7, 1001), (30011,)])
def test_trust_ratio(ren, shape):
  # (128, 128): BERT tiny's 128x128 weights give the LAMB kernel r_1024_8_4_4_2048_16384; the others do not divide evenly
  w, u = data(shape), data(shape, lo=-0.5, hi=2.0)
  check_hoisted(lambda: lamb(Tensor(w), Tensor(u)), ren)
  ref = w.astype(np.float64) - 0.01 * (np.sqrt((w.astype(np.float64) ** 2).sum()) / np.sqrt((u.astype(np.float64) ** 2).sum())) * u
  np.testing.assert_allclose(lamb(Tensor(w), Tensor(u)).numpy(), ref, rtol=1e-5, atol=1e-6)

def test_assign_in_place(ren):
  # LAMB assigns the update to the weight it takes the norm of: no workgroup may see another's new values
  w, u = data((128, 128)), data((128, 128))
  t = Tensor(w).realize()
  t.assign(lamb(t, Tensor(u))).realize()
  ref = w.astype(np.float64) - 0.01 * (np.sqrt((w.astype(np.float64) ** 2).sum()) / np.sqrt((u.astype(np.float64) ** 2).sum())) * u
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("fn,ref", [
  (lambda x: x / x.abs().max(), lambda x: x / np.abs(x).max()),                         # a max, over a 2-D launch
  (lambda x: x - x.mean(), lambda x: x - x.mean()),
  (lambda x: x - x.mean(1, keepdim=True) + x.max(), lambda x: x - x.mean(1, keepdims=True) + x.max()),   # a row's mean is not invariant
])
def test_other_reductions(ren, fn, ref):
  x = data((37, 1001))
  np.testing.assert_allclose(fn(Tensor(x)).numpy(), ref(x.astype(np.float64)), rtol=1e-5, atol=1e-5)

def test_row_reduction_in_folded_loop(ren):
  # rows summed beside a norm of another tensor: the folded loop runs the row sums, each with its accumulator reset
  x, y = data((1000, 33)), data(30011, lo=-1.0, hi=1.0)
  check_hoisted(lambda: Tensor(x).sum(1) * Tensor(y).square().sum(), ren)
  ref = x.astype(np.float64).sum(1) * (y.astype(np.float64) ** 2).sum()
  np.testing.assert_allclose((Tensor(x).sum(1) * Tensor(y).square().sum()).numpy(), ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max())

def test_symbolic_size(ren):
  # a symbolic size: its invariant reductions are still right
  x = data(3001)
  v = Variable("n", 1, 3001).bind(2999)
  t = Tensor(x)[:v]
  got = (t - t.square().sum().sqrt()).abs().sum().item()
  xs = x[:2999].astype(np.float64)
  np.testing.assert_allclose(got, np.abs(xs - np.sqrt((xs ** 2).sum())).sum(), rtol=1e-5)

# ---- group: a reduction that reads the workgroup index but not the local dims, beside one tinygrad GROUPs over them

def swiglu(x:Tensor, nw:Tensor, w1:Tensor, w3:Tensor) -> Tensor:
  """A LLaMA decoder's FFN input for one token: RMSNorm, then the gate and the up projection, which tinygrad fuses into one kernel of
  two reductions per output (it GROUPs one of them over the workgroup; the other ran whole on every lane)."""
  n = x * (x.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * nw
  return (n @ w1.T).silu() * (n @ w3.T)

@pytest.mark.parametrize("dim,hidden", [(512, 1376), (208, 301)])
def test_second_reduction_grouped(ren, dim, hidden):
  x, nw, w1, w3 = data((1, 1, dim)), data(dim, lo=0.5, hi=1.5), data((hidden, dim), lo=-0.1, hi=0.1), data((hidden, dim), lo=-0.1, hi=0.1)
  check_hoisted(lambda: swiglu(Tensor(x), Tensor(nw), Tensor(w1), Tensor(w3)), ren, "group")
  x64 = x.astype(np.float64)
  n = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * nw
  g, u = n @ w1.T.astype(np.float64), n @ w3.T.astype(np.float64)
  np.testing.assert_allclose(swiglu(Tensor(x), Tensor(nw), Tensor(w1), Tensor(w3)).numpy(), g / (1 + np.exp(-g)) * u, rtol=1e-4, atol=1e-5)
