"""On llvmpipe (flag "quads", tinygrad_vk/renderer/opts.py) the first upcast tinygrad's heuristic makes along a broadcast is 4, not 3,
and the lanes of a large elementwise kernel take 16 neighbours each: their reads are float4s. Every element is checked on any device;
the structure checks run on llvmpipe and fail under VULKAN_DISABLE=quads."""
import numpy as np
import pytest
import util
from tinygrad import Tensor, Device
from tinygrad.codegen.opt import OptOps

LLVMPIPE = "texel4" in Device["VULKAN"].phys.flags()   # the driver has RGBA32 texel buffers (quads needs them), whatever VULKAN_DISABLE says

def upcasts(t:Tensor, flags) -> list[tuple[int, ...]]:
  """Per kernel of t (a renderer of 2 driver threads), the elements each lane takes along each axis: the upcasts' sizes."""
  ren = util.renderer_with(flags=flags, threads=2)
  return [tuple(o.arg for o in p.src[0].arg.applied_opts if o.op is OptOps.UPCAST) for p in util.kernel_programs(t, ren=ren)]

def lamb_update(p, v, w, b1, b2):
  """An Adam/LAMB update of one weight as tinygrad's optimizer writes it: 3 inputs, 2 scalars broadcast (the betas' powers)."""
  if isinstance(p, Tensor): return p / ((1 - b1) * ((v / (1 - b2)).sqrt() + 1e-6)) + 0.01 * w
  return p / ((1 - b1) * (np.sqrt(v / (1 - b2)) + 1e-6)) + 0.01 * w

def trust_step(p, g, w):
  """LAMB's step: the weight less its update scaled by the ratio of two norms, reductions fused into the elementwise kernel."""
  if isinstance(p, Tensor): return p - (w.square().sum().sqrt() / g.square().sum().sqrt()) * g
  return p - np.sqrt((w.astype(np.float64) ** 2).sum()) / np.sqrt((g.astype(np.float64) ** 2).sum()) * g

def matmul(a, b): return a @ b

# sizes a multiple of 3 and of 16 (the matmul's columns of 12), neither a multiple of 256 lanes; the update over 2^20 elements, as
# its 16-element lanes need
CASES = {"lamb_update": (lamb_update, [(3 * 16 * 21851,)] * 3 + [(1,)] * 2),
         "trust_step": (trust_step, [(12 * 1031,), (12 * 1031,), (300,)]),
         "matmul": (matmul, [(37, 70), (70, 12 * 7)])}

@pytest.mark.parametrize("case", CASES)
def test_float4_lanes(case):
  f, shapes = CASES[case]
  xs = [util.data(s, lo=0.05, hi=1.0) for s in shapes]   # positive: the update's square root
  ts = [Tensor(x).realize() for x in xs]
  if LLVMPIPE:
    flags = Device["VULKAN"].renderer.caps.flags
    quads, plain = upcasts(f(*ts), flags), upcasts(f(*ts), flags - {"quads"})
    # the kernel that makes the output: tinygrad's heuristic upcasts by 3 (three floats a lane, read one by one); float4s with quads,
    # 16 neighbours a lane (4 float4s) in the elementwise kernel
    assert plain[-1][:1] == (3,) and quads[-1][:1] == ((16,) if case == "lamb_update" else (4,)), (quads, plain)
  np.testing.assert_allclose(f(*ts).numpy(), f(*[x.astype(np.float64) for x in xs]), rtol=1e-5, atol=1e-5)
