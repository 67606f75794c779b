"""llvmpipe exits every loop of a shader invocation after 65535 back-edges in total; long loops must still be right."""
import numpy as np
import pytest
from tinygrad import Tensor
from tinygrad.device import CompileError
from tinygrad_vk.renderer.loops import fit_loop_budget
from util import data

@pytest.mark.parametrize("n", [65536, 70001, 200003])
def test_long_single_thread_reduction(n):
  # a prime size keeps tinygrad from splitting the reduction: one invocation loops n times
  x = data(n, lo=0.0, hi=2.0)
  np.testing.assert_allclose(Tensor(x).sum().numpy(), x.astype(np.float64).sum(), rtol=1e-4)
  np.testing.assert_array_equal(Tensor(np.ones(n, np.float32)).sum().numpy(), n)

def test_unrolled_text_keeps_budget():
  body = ["  float acc = 0.0;", "  for (int Ridx0 = 0; Ridx0 < 100000; Ridx0++) {", "    acc += 1.0;", "  }"]
  out = fit_loop_budget(body, {"Ridx0": 100000}, 65535, "k")
  assert "Ridx0_u += 2" in out[1] and "    { int Ridx0 = Ridx0_u+0;" in out and "    { int Ridx0 = Ridx0_u+1;" in out
  assert fit_loop_budget(body, {"Ridx0": 100000}, 0, "k") is body   # no budget on other drivers: untouched

def test_impossible_budget_is_refused():
  body = ["  for (int Lidx0 = 0; Lidx0 < 70000; Lidx0++) {", "    for (int Ridx1 = 0; Ridx1 < 3; Ridx1++) {", "      x += 1;", "    }", "  }"]
  with pytest.raises(CompileError, match="LP_MAX_TGSI_LOOP_ITERATIONS"):
    fit_loop_budget(body, {"Lidx0": 70000, "Ridx1": 3}, 65535, "k")
