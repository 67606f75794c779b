"""llvmpipe exits every loop of a SIMD vector of invocations after 65535 passes in total: kernels with long reductions are reshaped
to fit (tinygrad_vk/renderer/passes/loops.py: spread over the workgroup, local dims traded for lanes, innermost loops unrolled) and must
still be right; what cannot be reshaped is refused. Tests that give the renderer a budget of their own run on any device."""
import numpy as np
import pytest
from tinygrad import Tensor, Device, nn, dtypes
from tinygrad.device import CompileError, Buffer, TinyELF
from tinygrad.uop.ops import UOp, Ops, AxisType
from tinygrad.codegen import to_program
from tinygrad.engine.realize import run_linear
from tinygrad.codegen.opt import Opt, OptOps
from tinygrad.helpers import Context, Target, prod
from tinygrad_vk.renderer.passes.loops import loop_passes
from util import data, kernel_programs, run_python, run_kernel, shows, glsl_compiler, renderer_with

BUDGET = Device["VULKAN"].renderer.caps.maxloop
needs_budget = pytest.mark.skipif(not BUDGET, reason="the driver has no loop budget (measured, probe.py: only llvmpipe before Mesa 25.0 has one)")

def run_glsl(body:str, local:int) -> np.ndarray:
  """(c1, c2) per invocation of one workgroup running `body`, which counts loop iterations in c1 and c2."""
  src = f"""#version 450
layout(local_size_x={local}) in;
layout(set=0, binding=0, std430) buffer B0 {{ int out_[]; }};
void main() {{ int i = int(gl_LocalInvocationID.x); int c1 = 0, c2 = 0;
{body}
out_[2*i] = c1; out_[2*i+1] = c2; }}"""
  buf = Buffer("VULKAN", 2 * local, dtypes.int).allocate()
  prg = Device["VULKAN"].runtime(TinyELF(glsl_compiler().compile(src), "limiter", Target("VULKAN"), ((None, 0, dtypes.int, ()),)))
  prg(buf._buf, global_size=(1, 1, 1), local_size=(local, 1, 1), wait=True)
  return np.frombuffer(buf.as_memoryview(), dtype=np.int32).reshape(-1, 2)

def test_loop_budget_is_measured():
  # the budget is what a loop really completes on this driver (probe.py): llvmpipe before Mesa 25.0 stops at 65535 passes, Mesa 25
  # and other drivers run all of them (budget 0). Before, every llvmpipe got 65535 from its driver ID, Mesa 25 too.
  n = (1 << 17) + 3
  assert run_glsl(f"for (int k = 0; k < {n}; k++) c1++;", 1)[0, 0] == (min(n, BUDGET) if BUDGET else n)

@needs_budget
def test_limiter_semantics():
  # what renderer/passes/loops.py assumes, measured: a loop of n iterations runs min(n, budget) of them...
  c = run_glsl("int n = 65530 + i; for (int k = 0; k < n; k++) c1++;", 16)[:, 0]
  assert c.tolist() == [min(65530 + i, BUDGET) for i in range(16)]
  # ...the counter belongs to a SIMD vector (4 or 8 lanes along x): a lane with a short first loop pays for a neighbour's long one
  # (a loop of n iterations costs n+1 passes)...
  c = run_glsl("int n1 = (i % 4 == 0) ? 60000 : 10; for (int k = 0; k < n1; k++) c1++; for (int k = 0; k < 10000; k++) c2++;", 16)[:, 1]
  assert c.tolist() == [BUDGET - 60001] * 16
  # ...and not to the workgroup: every vector of the largest workgroup the device allows runs 60000 iterations
  caps = Device["VULKAN"].renderer.caps
  assert (run_glsl("for (int k = 0; k < 60000; k++) c1++;", min(256, caps.wginv, caps.wgsize[0]))[:, 0] == 60000).all()

@pytest.mark.parametrize("n", [65537, 200003, 10_000_019])
def test_long_reduction_in_one_kernel(n):
  # a prime size keeps tinygrad from splitting the reduction into two kernels: one workgroup reduces all n elements
  x = data(n, lo=0.0, hi=2.0)
  t = Tensor(x)
  # spread, the workgroup's partial sums are closer to float64 than one float32 loop, whose 10M terms drift 2e-5 (as on tinygrad's CPU)
  np.testing.assert_allclose(t.sum().numpy(), x.astype(np.float64).sum(), rtol=1e-5 if BUDGET else 1e-4)
  np.testing.assert_allclose(t.max().numpy(), x.max())
  [p] = kernel_programs(t.sum())
  # spread over a workgroup only where the driver has a loop budget; elsewhere one invocation's loop does it all
  assert shows(p.src[2].arg, "shared") == bool(BUDGET) and (prod(p.arg.local_size) > 1) == bool(BUDGET)

@needs_budget
@pytest.mark.parametrize("shape,fn", [
  ((4, 70001), lambda x: x.sum(1)), ((4, 70001), lambda x: x.min(1)), ((3, 70001), lambda x: x.std(1)),
  ((2, 70001), lambda x: x.argmax(1)), ((3, 70001), lambda x: (x > 2.99).any(1)), ((3, 70001), lambda x: (x * 100).cast(dtypes.int).sum(1)),
  ((2, 70001), lambda x: x.softmax(1)), ((70001, 4), lambda x: x[:, :3].sum()),    # two reduce loops that do not merge
  ((4, 70001), lambda x: x.sum(1).contiguous(arg=(Opt(OptOps.UPCAST, 0, 4),)))],    # user opts: applied, then spread
  ids=["sum", "min", "std", "argmax", "any", "int sum", "softmax", "2 loops", "user opts"])
def test_spread_reductions(shape, fn, request):
  x = data(shape)
  # float32 sums of 70001 terms that cancel to ~0.1 are off by ~1e-3 in any order (seen under VULKAN_PROFILE=mobile; "2 loops",
  # 210003 terms, by 7e-3 under VULKAN_PROFILE=moltenvk's 1024 invocations); a lost
  # element moves them by ~1. The other cases keep 1e-3: softmax's values are ~1e-5.
  atol = 1e-2 if request.node.callspec.id in ("sum", "user opts", "2 loops") else 1e-3
  # "int sum" truncates x * 100: in float64 an element can land on the other side of an integer than the float32 product does
  ref = Tensor(x, device="CPU") if request.node.callspec.id == "int sum" else Tensor(x, device="CPU").cast(dtypes.float64)
  np.testing.assert_allclose(fn(Tensor(x)).numpy(), fn(ref).numpy(), rtol=1e-4, atol=atol)

@needs_budget
def test_noopt_and_matvec():
  # float32 sums of 70001 terms: 3e-3 off the float64 sum with some draws (a dot product, seen under pytest -n 2); a lost term
  # moves them by ~1, as in test_spread_reductions
  a, v = data((5, 70001)), data(70001)
  with Context(NOOPT=1): np.testing.assert_allclose(Tensor(a).sum(1).numpy(), a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-2)
  np.testing.assert_allclose((Tensor(a) @ Tensor(v)).numpy(), a.astype(np.float64) @ v, rtol=1e-4, atol=1e-2)

def test_loops_side_by_side_bounded_without_linearizing(monkeypatch):
  # two reductions beside each other in one kernel (as an FFN's gate and up projection): 2 x 3002 loop passes, under a budget of
  # 10000 that counting each loop as nested in the other (18 million) would exceed. fit_budget takes the kernel as it is without
  # linearizing it to find the nesting (passes/loops.py read_bound: a 51000-UOp prefill kernel of half in 16-bit words took 40 s)
  import tinygrad_vk.renderer.passes.loops as L
  calls, orig = [], L.linearize
  monkeypatch.setattr(L, "linearize", lambda *a, **kw: calls.append(1) or orig(*a, **kw))
  L._find_loops.cache_clear()
  a, b = data((3, 3001)), data((3, 3001))
  with Context(NOOPT=1):
    [call] = [c for c in (Tensor(a).sum(1) + Tensor(b).max(1)).schedule_linear().src if c.src[0].op is Ops.SINK]
    prg = to_program(call.src[0], renderer_with(maxloop=10000))
    np.testing.assert_allclose((Tensor(a).sum(1) + Tensor(b).max(1)).numpy(), a.astype(np.float64).sum(1) + b.max(1), rtol=1e-4, atol=1e-3)
  assert not calls and loop_passes(list(prg.src[1].src)) <= 10000

@needs_budget
def test_loops_nested_through_a_dependency():
  # tinygrad's masked_select counts with three nested reduce loops (20 x 320 x 320); the innermost one does not use the outermost
  # index but still runs inside it (upstream test_ops::test_masked_select)
  x = data((32, 10))
  np.testing.assert_array_equal(Tensor(x).masked_select(Tensor(True)).numpy(), x.reshape(-1))

@needs_budget
@pytest.mark.parametrize("shape", [(4, 2, 16, 8), (3, 2, 13, 6)])
def test_flash_attention_loops_in_sequence(shape):
  # PCONTIG=2 keeps attention in one kernel: loops that fill shared memory (WEAK ranges), then loops that read it. The reading
  # loops depend on the filling loops' indices but run after them, not inside them (upstream test_rangeify::TestPcontig).
  # The reference is the same kernel on tinygrad's CPU device: tinygrad 0.14's PCONTIG=2 attention differs from softmax(qk^T)v
  # there too (by ~0.5), so numpy's attention is no reference for it; PCONTIG=0 would hit tinygrad's schedule cache of this graph
  q, k, v = (data(shape, lo=0.0, hi=1.0) for _ in range(3))
  with Context(PCONTIG=2):
    out, ref = (Tensor(q, device=d).scaled_dot_product_attention(Tensor(k, device=d), Tensor(v, device=d)).numpy() for d in ("VULKAN", "CPU"))
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)

class ConvNet:
  """The first block of tinygrad's examples/beautiful_mnist.py, narrower: conv, conv, batch norm, max pool, then a linear layer."""
  def __init__(self, c:int=8):
    self.layers = [nn.Conv2d(1, c, 5), Tensor.relu, nn.Conv2d(c, c, 5), Tensor.relu, nn.BatchNorm(c), Tensor.max_pool2d,
                   lambda x: x.flatten(1), nn.Linear(c * 10 * 10, 10)]
  def __call__(self, x): return x.sequential(self.layers)


def conv_grads(device:str, x:np.ndarray, y:np.ndarray, dtype) -> tuple[float, list[np.ndarray], int]:
  """The loss, then the first convolution's weight and bias gradients, read one by one as a user would; and how many of the
  bias gradient's kernels are over the loop budget."""
  Tensor.manual_seed(0)
  m = ConvNet(32)
  for v in nn.state.get_parameters(m): v.replace(v.to(device).cast(dtype)).realize()
  with Context(TRAINING=1, DEFAULT_FLOAT="float64" if dtype == dtypes.float64 else "float32"):
    loss = m(Tensor(x, device=device).cast(dtype)).sparse_categorical_crossentropy(Tensor(y, device=device)).backward()
    l, w, b = loss.item(), m.layers[0].weight.grad.numpy(), m.layers[0].bias.grad
    # the bias gradient recomputes the second convolution inside a reduction of ~72000 loop passes per invocation
    lin, over = b.schedule_linear(), 0
    for c in lin.src:
      if c.src[0].op is Ops.SINK and device == "VULKAN":
        try: to_program(c.src[0], renderer_with(flags=Device["VULKAN"].renderer.caps.flags - {"spread"}))
        except CompileError: over += 1
    run_linear(lin)
    return l, [w, b.numpy()], over

def test_conv_net_gradient():
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal((32, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 32).astype(np.int32)
  loss, grads, over = conv_grads("VULKAN", x, y, dtypes.float32)
  if BUDGET: assert over >= 1
  ref_loss, ref, _ = conv_grads("CPU", x, y, dtypes.float64)
  assert abs(loss - ref_loss) <= 1e-4 * abs(ref_loss)
  for g, r in zip(grads, ref): np.testing.assert_allclose(g, r, rtol=0, atol=1e-3 * np.abs(r).max())

SUM_70001 = """import numpy as np
from tinygrad import Tensor
x = np.random.default_rng(1).uniform(0.5, 1.5, 70001).astype(np.float32)
got = Tensor(x).sum().item()
assert abs(got - x.astype(np.float64).sum()) < 0.25, got   # float32 accumulation error ~0.02; one lost element >= 0.5
print("ok")"""

def test_switched_off_is_refused():
  # a budget of 1000 passes (any device takes a lower budget than its own): spread, the sum is right; without spreading
  # (VULKAN_DISABLE=spread) the long reduction is refused, never cut short
  r = run_python(SUM_70001, env={"VULKAN_MAX_LOOP_ITERATIONS": "1000"})
  assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
  r = run_python(SUM_70001, env={"VULKAN_MAX_LOOP_ITERATIONS": "1000", "VULKAN_DISABLE": "spread"})
  assert r.returncode != 0 and "VULKAN_DISABLE=spread" in r.stderr and "CompileError" in r.stderr, r.stderr[-2000:]

@needs_budget
def test_budget_cannot_be_raised():
  # llvmpipe ends loops past 65535 passes silently: a budget above it would return a sum cut short, so it is refused
  r = run_python(SUM_70001.replace("70001", "10_000_019"), env={"VULKAN_MAX_LOOP_ITERATIONS": "2000000"})
  assert r.returncode != 0 and "VULKAN_MAX_LOOP_ITERATIONS=2000000" in r.stderr and "may only be lowered" in r.stderr, r.stderr[-2000:]

@needs_budget
def test_unsplittable_loop_is_refused():
  # a loop that stores on every iteration is not a reduction: its iterations cannot move to other invocations
  out = Buffer("VULKAN", 70001, dtypes.float).allocate()
  r = UOp.range(70001, 0, AxisType.LOOP)
  buf = UOp.placeholder((70001,), dtypes.float, 0)
  with pytest.raises(CompileError, match="cannot be spread over the workgroup: it is not a reduction"):
    run_kernel([buf.index(r).store(r.cast(dtypes.float)).end(r)], [out])

def test_too_long_for_the_workgroup_is_refused():
  # 1024 lanes x 100 passes cannot hold a reduction of 200003, even unrolled 16x (the lanes' partials alone take 1025 passes to
  # combine): refused, with the reason
  [call] = [c for c in Tensor.empty(200003).sum().schedule_linear().src if c.src[0].op is Ops.SINK]
  with pytest.raises(CompileError, match="it needs more than 1024 lanes .* even with its innermost loops unrolled 16x"):
    to_program(call.src[0], renderer_with(maxloop=100, wginv=1024, wgsize=(1024, 1024, 64)))

@pytest.fixture
def limits(monkeypatch):
  """limits(**caps): kernels compiled from then on see the device's renderer with these capabilities changed (the real device runs
  them); with a maxloop of its own a test reshapes kernels on any device, llvmpipe or not."""
  def set_caps(**caps):
    ren = renderer_with(**caps)
    monkeypatch.setattr(type(Device["VULKAN"]), "renderer", property(lambda self: ren))
    return ren
  return set_caps

SMALL = dict(maxloop=1000, wginv=64, wgsize=(64, 64, 64))   # 64 lanes x 1000 passes: less than one reduction of 100003

@pytest.mark.parametrize("fn", [lambda x: x.sum(1), lambda x: x.max(1), lambda x: x.argmax(1), lambda x: (x > 2.999).any(1),
                                lambda x: (x * 128).cast(dtypes.int).sum(1), lambda x: x.std(1)],
                         ids=["sum", "max", "argmax", "any", "int sum", "std"])
def test_unrolled_reductions(limits, fn):
  # the reductions do not fit 64 lanes x 1000 passes: their loops run 2 iterations per pass, the second one past the (odd) end
  # adds the reduction's identity. int sum scales by a power of two: exact in float32 as in the float64 reference, so both
  # truncate alike (with 100 some data truncated differently)
  limits(**SMALL)
  x = data((3, 100003))
  np.testing.assert_allclose(fn(Tensor(x)).numpy(), fn(Tensor(x, device="CPU").cast(dtypes.float64)).numpy(), rtol=1e-4, atol=1e-3)

def test_unrolled_nested_loops(limits):
  # a reduction over two axes that do not merge: nested loops, the inner one unrolled and spread
  limits(maxloop=150, wginv=64, wgsize=(64, 64, 64))
  x = data((301, 3, 307))
  np.testing.assert_allclose(Tensor(x).sum((0, 2)).numpy(), x.astype(np.float64).sum((0, 2)), rtol=1e-4, atol=1e-3)

def test_local_dims_traded_for_lanes(limits):
  # 16 outputs in one workgroup of 16 (a LOCAL opt, no shared memory) leave 4 of 64 invocations for lanes; 70001 / 4000 passes
  # needs 32: 8 of the outputs move to a second workgroup
  x = data((16, 70001))
  opts = (Opt(OptOps.LOCAL, 0, 16),)
  [before] = kernel_programs(Tensor(x).sum(1).contiguous(arg=opts))
  limits(maxloop=4000, wginv=64, wgsize=(64, 64, 64))
  [after] = kernel_programs(Tensor(x).sum(1).contiguous(arg=opts))
  assert prod(after.arg.global_size) > prod(before.arg.global_size) and shows(after.src[2].arg, "shared")
  np.testing.assert_allclose(Tensor(x).sum(1).contiguous(arg=opts).numpy(), x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)

def test_reshaping_switched_off_is_refused(limits):
  # without the "spread" path nothing is traded or unrolled either
  ren = Device["VULKAN"].renderer
  limits(**SMALL, flags=ren.caps.flags - {"spread"})
  with pytest.raises(CompileError, match="VULKAN_DISABLE=spread"): Tensor(data((3, 100003))).sum(1).numpy()

def test_beam_search_spreads_candidates():
  # BEAM compiles every candidate through the renderer: each one is spread to fit, and the winner is right
  r = run_python("""
import numpy as np
from tinygrad import Tensor
x = np.random.default_rng(0).uniform(-3, 3, (4, 70001)).astype(np.float32)
# float32 sums of 70001 terms cancelling to ~20: the order BEAM picks moves the result by a few 1e-3; a lost element moves it ~1
np.testing.assert_allclose(Tensor(x).sum(1).numpy(), x.astype(np.float64).sum(1), rtol=1e-4, atol=0.02)
print("ok")""", {"BEAM": "1", "IGNORE_BEAM_CACHE": "1", "LP_NUM_THREADS": "0"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
