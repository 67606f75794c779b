"""On llvmpipe (flag "rows"), a reduction tinygrad would share among a workgroup's lanes runs whole on each lane, rows on the lanes
and unrolled by 4 (tinygrad_vk/renderer/opts.py): the matrix-vector products of a language model's decode step, a norm fused in, run
without shared memory or barriers. Every element is checked on any device; the structure checks run on llvmpipe and fail under
VULKAN_DISABLE=rows."""
import numpy as np
import pytest
import util
from tinygrad import Tensor, Device, dtypes
from tinygrad.uop.ops import Ops

LLVMPIPE = "rows" in Device["VULKAN"].phys.flags()   # the driver's flags, whatever VULKAN_DISABLE says

def shared(t:Tensor, flags) -> list[bool]:
  """Per kernel of t, whether it shares memory among its lanes (tinygrad's GROUP: a BARRIER)."""
  return [any(u.op is Ops.BARRIER for u in p.src[0].toposort()) for p in util.kernel_programs(t, ren=util.renderer_with(flags=flags))]

def ffn_up(x, nw, w1, w3):
  """A LLaMA FFN's up projection beside its gate, RMSNorm fused in: two reductions in one kernel."""
  if isinstance(x, Tensor): return ((xn := x * (x.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * nw) @ w1.T).silu() * (xn @ w3.T)
  a, b = ((xn := x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * nw) @ w1.T), xn @ w3.T
  return a / (1 + np.exp(-a)) * b

# shapes tinygrad groups (2048 outputs or fewer, a reduction it can split by 16), none a multiple of 32 outputs
CASES = {
  "matvec": (lambda x, w: x @ w.T, [(1, 304), (515, 304)]),
  "ffn_up": (ffn_up, [(1, 1, 304), (304,), (260, 304), (260, 304)]),
  "column_sums": (lambda x: x.sum(0), [(1008, 300)]),
}

@pytest.mark.parametrize("dtype", [dtypes.float, dtypes.half], ids=["float", "half"])
@pytest.mark.parametrize("case", CASES)
def test_rows_on_the_lanes(case, dtype):
  if dtype == dtypes.half and (m := util.missing(dtypes.half)): pytest.skip(m)
  f, shapes = CASES[case]
  xs = [util.data(s, lo=-1.0, hi=1.0) for s in shapes]
  ts = [Tensor(x).cast(dtype).realize() for x in xs]
  if LLVMPIPE:
    flags = Device["VULKAN"].renderer.caps.flags
    # the last kernel makes the outputs (an FFN's first one reduces x to its RMS, one number, and keeps its GROUP)
    rows, plain = shared(f(*ts), flags), shared(f(*ts), flags - {"rows"})
    assert plain[-1] and not rows[-1], (plain, rows)
  ref = f(*[x.astype(np.float16 if dtype == dtypes.half else np.float32).astype(np.float64) for x in xs])
  tol = 1e-4 if dtype == dtypes.float else 2e-2
  np.testing.assert_allclose(f(*ts).float().numpy(), ref, rtol=tol, atol=tol * np.abs(ref).max())

def test_rows_in_compile_workers():
  # tinygrad compiles a schedule's kernels in worker processes (engine/worker.py, PARALLEL): the start-up hook puts the renderer's
  # choice there too, so the FFN's kernels reach the parent without barriers
  r = util.run_python("""
import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program_cache
from tinygrad.helpers import PARALLEL
assert PARALLEL.value >= 2
rng = np.random.default_rng(1)
x, nw, w1, w3, w2 = (Tensor(rng.uniform(-1, 1, s).astype(np.float32)) for s in [(1, 304), (304,), (260, 304), (260, 304), (304, 260)])
xn = x * (x.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * nw
y = (((xn @ w1.T).silu() * (xn @ w3.T)) @ w2.T).numpy()
print(len(to_program_cache), sum(any(u.op is Ops.BARRIER for u in p.src[0].toposort()) for p in to_program_cache.values()))
""", env={"PARALLEL": "2"})
  assert r.returncode == 0, r.stderr
  kernels, with_barriers = map(int, r.stdout.split())
  assert kernels >= 3, r.stdout
  # the RMS of x, a kernel that reduces to one number, keeps its GROUP: nothing else does
  if LLVMPIPE: assert with_barriers == 1, r.stdout
