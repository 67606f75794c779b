"""On a driver that packs invocations into SIMD vectors along local x only (llvmpipe: the "fillx" flag), a kernel whose local x is
narrower than a vector gets its local dims merged into x (tinygrad_vk/renderer/passes/simd.py); every element stays right. The structure
checks run on llvmpipe and fail under VULKAN_DISABLE=fillx; the values are checked on any device."""
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

def local_sizes(t:Tensor, flags) -> list[tuple[int, ...]]:
  ren = Device["VULKAN"].renderer
  r = type(ren)(replace(ren.target, arch=replace(ren.caps, flags=flags).encode()))
  return [to_program(c.src[0], r).arg.local_size for c in t.linear_with_vars()[0].src if c.src[0].op is Ops.SINK]

@pytest.mark.parametrize("m,k,n", [(40, 301, 128), (12, 1001, 64), (40, 3001, 112)])
def test_matmul_local_dims_merged(m, k, n):
  # tinygrad gives these matmuls local dims (2, 16) or (4, 16): two or four live lanes per llvmpipe vector
  a, b = data((m, k)), data((k, n))
  if LLVMPIPE:
    caps = Device["VULKAN"].renderer.caps
    merged, plain = local_sizes(Tensor(a) @ Tensor(b), caps.flags), local_sizes(Tensor(a) @ Tensor(b), caps.flags - {"fillx"})
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
  prg = to_program(new.src[0], Device["VULKAN"].renderer)
  if LLVMPIPE: assert prg.arg.local_size[0] >= 8 and prg.arg.local_size[1:] == (1, 1), prg.arg.local_size
  run_linear(lin.replace(src=tuple(new if c is call else c for c in lin.src)), var_vals)
  np.testing.assert_allclose(np.frombuffer(new.src[1].buffer.as_memoryview(), np.float32), xn.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
