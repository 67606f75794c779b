"""Buffers past maxStorageBufferRange where the device has bufferDeviceAddress: by address, or through windows and pieces where
loads by address were measured much slower (caps.FLAGS "reach", probe.py ADDR_KERNEL; renderer/abi.py)."""
import pytest
from tinygrad import Device
from tinygrad_vk.caps import Caps, disabled_flags, env_text
from tinygrad_vk.renderer.abi import kernel_abi, INT32_MAX
from util import run_python

needs_bda = pytest.mark.skipif("bda" not in Device["VULKAN"].caps, reason="bufferDeviceAddress missing or VULKAN_DISABLE=bda")
needs_reach = pytest.mark.skipif("reach" in disabled_flags(env_text("VULKAN_DISABLE")), reason="VULKAN_DISABLE=reach")

def test_choice_follows_flag():
  bufs = [(4, 100), (4, 1 << 18), (2, None)]   # in range, past it, symbolic
  addr = kernel_abi(Caps(frozenset({"bda"}), range=1 << 20), bufs, [])
  assert addr.address[1] is not None and addr.address[2] is not None and not addr.windowed
  reach = kernel_abi(Caps(frozenset({"bda", "reach"}), range=1 << 20), bufs, [])
  assert reach.address[:2] == (None, None) and reach.binding[1] == 1 and reach.windowed   # past the range: a window, in pieces
  assert reach.address[2] is not None   # a symbolic size has no windows to plan: by address
  # more elements than an int32 index reaches: by address whatever was measured
  assert kernel_abi(Caps(frozenset({"bda", "i64", "reach"}), range=1 << 20), [(1, INT32_MAX + 1000)], []).address[0] is not None

MEASURED = """
from tinygrad import Device
from tinygrad_vk.probe import measure, ADDR_SLOW
dev = Device["VULKAN"]
cost = measure(dev.phys).address_cost
assert cost > 0 and ("reach" in dev.caps) == (cost > ADDR_SLOW), (cost, dev.caps.flags)
print("ok", dev.phys.driver, cost, "reach" in dev.caps)
"""

@needs_bda
@needs_reach
def test_choice_follows_measurement():
  r = run_python(MEASURED, {"VULKAN_REACH": ""})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  for force, want in (("1", True), ("0", False)):
    r = run_python('from tinygrad import Device; print("reach" in Device["VULKAN"].caps)', {"VULKAN_REACH": force})
    assert r.returncode == 0 and r.stdout.split()[-1] == str(want), r.stdout + r.stderr

# kernels over buffers past a 64 KiB range, nonuniform inputs, sizes no multiple of a workgroup, every element checked with numpy;
# prints how many programs passed a buffer by address and how many were windowed
BIG = """
import numpy as np
from tinygrad import Tensor
from tinygrad_vk.program import VulkanProgram
progs = []
orig = VulkanProgram.__init__
def init(self, dev, obj):
  orig(self, dev, obj)
  progs.append((sum(a is not None for a in self.abi.address), self.abi.windowed))
VulkanProgram.__init__ = init
rng = np.random.default_rng(0)
n = 3 * 16384 + 77                                   # 196 KiB of floats
a, b = (rng.standard_normal(n) * 10).astype(np.float32), rng.standard_normal(n).astype(np.float32)
ta, tb = Tensor(a).realize(), Tensor(b).realize()
np.testing.assert_array_equal((ta * tb + 1).numpy(), a * b + 1)
np.testing.assert_array_equal((ta[::-1] - tb).numpy(), a[::-1] - b)
np.testing.assert_allclose(ta.sum().numpy(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
np.testing.assert_array_equal(ta.cat(tb).numpy(), np.concatenate([a, b]))     # two halves of one output
m, k, p = 211, 301, 97                               # B: 114 KiB, read whole by every workgroup (split into windows)
x, y = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, p)).astype(np.float32)
np.testing.assert_allclose((Tensor(x) @ Tensor(y)).numpy(), x @ y, rtol=1e-4, atol=1e-3)
idx = rng.integers(0, n, 5000).astype(np.int32)      # an index read from memory: no per-workgroup bound
np.testing.assert_array_equal(ta[Tensor(idx)].numpy(), a[idx])   # by address: SwiftShader died of SIGILL on its float4 loads
import hashlib
Tensor.manual_seed(3)
r = Tensor.rand(n).numpy()                           # writes its two halves from one workgroup: 98 KiB apart
assert r.min() >= 0 and r.max() < 1 and r[: n // 2].std() > 0.2 and r[n // 2:].std() > 0.2
print(hashlib.md5(r.tobytes()).hexdigest(), "ok", sum(1 for s, _ in progs if s), sum(1 for _, w in progs if w), len(progs))
"""

@needs_bda
@needs_reach
def test_past_range_both_choices():
  out = {}
  for reach in ("1", "0"):
    r = run_python(BIG, {"VULKAN_MAX_STORAGE_RANGE": str(1 << 16), "VULKAN_REACH": reach})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    out[reach] = r.stdout.split()[-5:]
  assert int(out["1"][2]) == 0 and int(out["1"][3]) > 0, out   # windows and pieces, no address
  assert int(out["0"][2]) > 0, out
  assert out["1"][0] == out["0"][0], out                         # the same random numbers either way

GATHER = """
import numpy as np
from tinygrad import Tensor
from tinygrad_vk.program import VulkanProgram
progs = []
orig = VulkanProgram.__init__
def init(self, dev, obj):
  orig(self, dev, obj)
  progs.append(sum(a is not None for a in self.abi.address))
VulkanProgram.__init__ = init
rng = np.random.default_rng(1)
a, idx = rng.standard_normal(50007).astype(np.float32), rng.integers(0, 50007, 3001).astype(np.int32)
np.testing.assert_array_equal(Tensor(a)[Tensor(idx)].numpy(), a[idx])
print("ok", sum(1 for s in progs if s))
"""

@needs_bda
@needs_reach
def test_too_many_windows_go_by_address():
  # an index read from memory splits a 196 KiB buffer into 4 windows of 64 KiB: with the other buffers, more than 4 descriptors.
  # Windows are only preferred to addresses, so that slot goes by address (without bda the kernel is refused: test_address.py)
  r = run_python(GATHER, {"VULKAN_MAX_STORAGE_RANGE": str(1 << 16), "VULKAN_REACH": "1", "VULKAN_PROFILE": "powervr"})
  assert r.returncode == 0 and "ok" in r.stdout and int(r.stdout.split()[-1]) > 0, r.stdout + r.stderr
