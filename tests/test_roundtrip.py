"""The minimal path, and elementwise kernels at boundary sizes."""
import subprocess, sys, os
import numpy as np
import pytest
from tinygrad import Tensor
from util import ROOT, data

@pytest.mark.parametrize("args", [["--size", "1001"], ["--size", "70001", "--device", "1"]])
def test_roundtrip_script(args):
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "roundtrip.py"), *args], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stdout + r.stderr
  assert "OK: all" in r.stdout and "compile" in r.stdout and "run" in r.stdout

@pytest.mark.parametrize("n", [1, 7, 255, 257, 65537])
def test_elementwise_sizes(n):
  a, b, c = data(n), data(n, lo=0.5, hi=4.0), data(n)
  ta, tb, tc = Tensor(a), Tensor(b), Tensor(c)
  out = ((ta * tb - tc) / tb + tb.sqrt() + ta.maximum(tc) + (ta < tc).where(ta, 2.0)).numpy()
  ref = (a * b - c) / b + np.sqrt(b) + np.maximum(a, c) + np.where(a < c, a, np.float32(2.0))
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)

def test_elementwise_transcendental():
  a = data(1031, lo=-4, hi=4)
  out = Tensor(a).exp().numpy(), Tensor(a).abs().log().numpy(), Tensor(a).sin().numpy(), Tensor(a).cos().numpy()
  refs = np.exp(a), np.log(np.abs(a)), np.sin(a), np.cos(a)
  for o, r in zip(out, refs): np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)
