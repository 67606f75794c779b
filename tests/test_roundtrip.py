"""The minimal path, and elementwise kernels at boundary sizes."""
import re, subprocess, sys, os
import numpy as np
import pytest
from tinygrad import Tensor
from util import ROOT, data

@pytest.mark.parametrize("args", [["--size", "1001"], ["--size", "70001", "--device", "1"]])
def test_roundtrip_script(args):
  r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "roundtrip.py"), *args], capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr
  # every figure it reports is there and measured: compile and pipeline times, and a GPU time from the timestamps for both runs
  n = int(args[1])
  assert f"OK: all {n} elements match numpy" in r.stdout, r.stdout
  assert re.search(r"^device +VULKAN(:1)?: .+, Vulkan \d+\.\d+\.\d+$", r.stdout, re.M), r.stdout
  assert re.search(rf"^kernel +\S+: {n} elements, local size \(\d+, \d+, \d+\), \(\d+, \d+, \d+\) workgroups$", r.stdout, re.M), r.stdout
  for what in ("compile", "pipeline", "first run", "run"):
    m = re.search(rf"^{what} +(\d+\.\d+) ms", r.stdout, re.M)
    assert m and float(m.group(1)) > 0, (what, r.stdout)

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

def test_plugin_from_any_directory_and_in_compile_workers(tmp_path):
  # an unmodified script, run outside the checkout: the .pth hook registers DEV=VULKAN, also in tinygrad's spawned compile workers
  code = """
import numpy as np
from tinygrad import Tensor, Device
import tinygrad.engine.worker as w
a = Tensor(np.arange(1, 38, dtype=np.float32))
x, y = (a * 2).contiguous(), (a + 3).sqrt().contiguous()   # two kernels compiled at once: in the worker pool
Tensor.realize(x, y)
assert w.worker_pool is not None, "kernels were not compiled in worker processes"
np.testing.assert_allclose((x + y).numpy(), np.arange(1, 38) * 2 + np.sqrt(np.arange(1, 38) + 3), rtol=1e-6)
print(Device.DEFAULT, "ok")
"""
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                     env={**os.environ, "DEV": "VULKAN", "PARALLEL": "2", "CACHELEVEL": "0"})
  assert r.returncode == 0 and "VULKAN ok" in r.stdout, r.stdout + r.stderr

def test_vulkan_is_never_the_default_device():
  r = subprocess.run([sys.executable, "-c", "from tinygrad import Device; print(Device.DEFAULT)"], capture_output=True, text=True,
                     env={k: v for k, v in os.environ.items() if k != "DEV"})
  assert r.returncode == 0 and r.stdout.strip() != "VULKAN", r.stdout + r.stderr
