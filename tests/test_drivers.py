"""Two real drivers in one process: lavapipe and SwiftShader (scripts/drivers.sh) as VULKAN:0 and VULKAN:1, in either order. tinygrad
compiles a kernel that spans devices once, for the first of them, so both render for what both can do (Caps.meet)."""
import os, pathlib
import pytest
from tinygrad_vk.caps import Caps
from util import run_python

DRIVERS = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "tinygrad_vk" / "drivers"
LAVAPIPE = next(iter(sorted(pathlib.Path("/usr/share/vulkan/icd.d").glob("lvp_icd*.json"))), None)

def icd(name:str) -> str|None:
  env = DRIVERS / f"{name}.env"
  return dict(kv.split("=", 1) for kv in env.read_text().split()).get("VK_ICD_FILENAMES") if env.exists() else None

def test_meet():
  a = Caps(frozenset({"texel", "i64", "bda"}), align=16, wginv=1024, wgsize=(1024, 1024, 1024), maxloop=65535, threads=2, bufs=32)
  b = Caps(frozenset({"bda", "denorm"}), align=256, wginv=256, wgsize=(256, 256, 64), maxloop=0, threads=0, bufs=30)
  for m in (a.meet(b), b.meet(a)):
    assert m == Caps(frozenset({"bda"}), align=256, wginv=256, wgsize=(256, 256, 64), maxloop=65535, threads=2, bufs=30)

SHARDED = """
import numpy as np
from tinygrad import Tensor, Device, dtypes, nn
from tinygrad.nn.optim import SGD
from tinygrad.helpers import Context
devs = ("VULKAN:0", "VULKAN:1")
assert len({Device[d].phys.driver for d in devs}) == 2 and Device[devs[0]].caps == Device[devs[1]].caps
rng = np.random.default_rng(0)
a, b = rng.uniform(-1, 1, (36, 70)).astype(np.float32), rng.uniform(-1, 1, (70, 50)).astype(np.float32)
np.testing.assert_allclose((Tensor(a).shard(devs, axis=0) @ Tensor(b).shard(devs)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
h = (Tensor(a, dtype=dtypes.half).shard(devs, axis=0) @ Tensor(b, dtype=dtypes.half).shard(devs)).numpy().astype(np.float32)
np.testing.assert_allclose(h, a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32), rtol=2e-2, atol=2e-2)
# a data-parallel SGD step: the batch split over both devices, the weights on both, against the same step on the CPU
x, y, w0 = rng.uniform(-1, 1, (36, 70)).astype(np.float32), rng.integers(0, 5, 36), rng.uniform(-0.1, 0.1, (5, 70)).astype(np.float32)
def step(dev, shard):
  lin = nn.Linear(70, 5, bias=False)
  lin.weight = Tensor(w0, device=dev if not shard else "CPU").contiguous()
  if shard: lin.weight = lin.weight.shard(devs).contiguous()
  X, Y = Tensor(x, device=dev if not shard else "CPU"), Tensor(y, device=dev if not shard else "CPU")
  if shard: X, Y = X.shard(devs, axis=0), Y.shard(devs, axis=0)
  opt = SGD([lin.weight], lr=0.5)
  with Context(TRAINING=1):
    opt.zero_grad()
    lin(X).sparse_categorical_crossentropy(Y).backward()
    opt.step()
  return lin.weight.numpy()
np.testing.assert_allclose(step(devs, True), step("CPU", False), rtol=1e-4, atol=1e-5)
print("ok")
"""

@pytest.mark.skipif(LAVAPIPE is None or icd("swiftshader") is None, reason="needs the system's lavapipe and SwiftShader (scripts/drivers.sh)")
@pytest.mark.skipif(bool(os.environ.get("VULKAN_PROFILE") or os.environ.get("VK_ICD_FILENAMES")) or os.environ.get("DEV", "VULKAN") != "VULKAN",
                    reason="picks its own drivers: runs in the default pass")
@pytest.mark.parametrize("order", ["0,1", "1,0"])
def test_sharded_across_two_drivers(order):
  # before: with lavapipe first, SwiftShader was sent kernels reading texel buffers ("this device's texel path is off")
  r = run_python(SHARDED, {"VK_ICD_FILENAMES": f"{LAVAPIPE}:{icd('swiftshader')}", "VULKAN_DEVICES": order})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr[-3000:]
