"""Buffers past maxStorageBufferRange: passed to kernels by buffer device address (renderer/abi.py), or in pieces where the device has
flag `reach` (loads by address measured slow: tests/test_reach.py)."""
import os
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType, Ops, KernelInfo, buffers
from tinygrad.engine.realize import run_linear
from tinygrad.helpers import Context
from tinygrad.codegen import to_program
from tinygrad_vk.caps import Caps
from tinygrad_vk.renderer.abi import kernel_abi
from util import data, run_python, shows

needs_bda = pytest.mark.skipif("bda" not in Device["VULKAN"].caps, reason="bufferDeviceAddress missing or VULKAN_DISABLE=bda")

def address_slots(monkeypatch) -> list[int]:
  """Counts, for every program built from now on, how many of its buffers go by address."""
  from tinygrad_vk.program import VulkanProgram
  orig, out = VulkanProgram.__init__, []
  def init(self, dev, obj):
    orig(self, dev, obj)
    out.append(sum(a is not None for a in self.abi.address))
  monkeypatch.setattr(VulkanProgram, "__init__", init)
  return out

def test_abi_layout():
  # the layout every renderer emits and the runtime packs: offset words, then 8-aligned addresses in slot order, then the vars
  caps = Caps(frozenset({"bda"}), align=16, range=1 << 20)
  abi = kernel_abi(caps, [(4, 100), (4, 1 << 18), (2, 10), (1, (1 << 20) - 14), (8, 5)], [dtypes.int, dtypes.long])
  assert abi.binding == (0, None, 1, None, 2) and abi.address == (None, 8, None, 16, None)
  assert abi.vars == ((24, dtypes.int), (32, dtypes.long)) and abi.pc_size == 40 and abi.ndesc == 3
  assert kernel_abi(Caps(frozenset(), range=1 << 20), [(4, 1 << 18)], []).address == (None,)   # without bda: the descriptor (refused at bind)
  assert kernel_abi(caps, [(4, None)], []).address == (8,)                                     # a symbolic size may be any size

@needs_bda
@pytest.mark.skipif(Device["VULKAN"].caps.range + 4012 > Device["VULKAN"].phys.max_buffer,
                    reason="no buffer is past maxStorageBufferRange: it is as large as the largest buffer (maxBufferSize)")
def test_sum_past_storage_buffer_range(monkeypatch):
  # a real binding past the device's maxStorageBufferRange: a reduction and an elementwise kernel over it
  slots = address_slots(monkeypatch)
  n = Device["VULKAN"].caps.range // 4 + 1003
  a = data(n, lo=-1, hi=1)
  t = Tensor(a).realize()
  np.testing.assert_allclose(t.sum().numpy(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
  out = (t[n - 5000:] * 2 + t[:5000]).numpy()   # reads the end of the buffer, past the range, and its start
  np.testing.assert_array_equal(out, a[n - 5000:] * 2 + a[:5000])
  if "reach" in Device["VULKAN"].caps:   # loads by address measured slow here: the big buffer is read in pieces (test_reach.py)
    assert not any(slots), f"with flag reach the kernels should read the big buffer in pieces, not by address: {slots}"
  else: assert sum(1 for s in slots if s) >= 2, f"the kernels reading the big buffer should read it by address: {slots}"

def test_oversize_gather_past_the_descriptors_is_refused():
  # without bda a buffer past the range is read in pieces or through windows (tests/test_windows.py); a gather from one that
  # needs more windows than the 4 descriptors hold beside the others is refused at compile time, naming the limits (with flag
  # texel, one storage texel buffer holds it: test_windows.py test_past_the_range_texel)
  r = run_python("""
import numpy as np
from tinygrad import Tensor, Device
n = 3 * Device["VULKAN"].caps.range // 4 + 16   # 3 windows, and the index and the output: 5 descriptors
try: Tensor.empty(n)[Tensor(np.array([0, 5, n - 1], dtype=np.int32))].realize()
except Exception as e: print("raised", type(e).__name__, e)""",
                 {"VULKAN_PROFILE": "min", "VULKAN_MAX_STORAGE_RANGE": str(1 << 20), "VULKAN_DISABLE": "texel"})
  assert r.returncode == 0 and "raised CompileError VULKAN: buffer" in r.stdout and "over maxStorageBufferRange" in r.stdout, r.stdout + r.stderr
  assert "need 5 descriptors, the device has 4" in r.stdout and "needs bufferDeviceAddress" in r.stdout, r.stdout

# the zoo's row sums GROUPed through shared memory as tinygrad shapes them, where llvmpipe's "rows" (renderer/opts.py) would run
# them whole on each lane (test_rows.py runs those by address in scripts/test.sh's staging pass)
GROUPED = {"VULKAN_DISABLE": ",".join(filter(None, (os.environ.get("VULKAN_DISABLE"), "rows")))}
SMALL_RANGE = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, TinyJit, Variable, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from tinygrad_vk.program import VulkanProgram
from util import data, run_kernel, kernel_sources, shows
progs, writes, init = [], [], VulkanProgram.__init__
def traced_init(self, dev, obj):
  init(self, dev, obj)
  progs.append(len(self.abi.address) - self.ndesc)
  writes.append(self.written)
VulkanProgram.__init__ = traced_init
a, b = data((67, 45)), data((45, 53))
np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
x = data(10007)
tx = Tensor(x).realize()
np.testing.assert_allclose(tx.sum().numpy(), x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)
np.testing.assert_allclose(tx.reshape(10007, 1).expand(10007, 3).max(0).numpy(), [x.max()] * 3)
y = data((37, 4000))   # a reduction across the lanes of a workgroup: shared memory and barriers
assert any(shows(s, "shared") and shows(s, "address") for s in kernel_sources(Tensor(y).sum(1)))
np.testing.assert_allclose(Tensor(y).sum(1).numpy(), y.sum(1), rtol=1e-4, atol=1e-3)
np.testing.assert_array_equal((tx[3:9000] * 2 + 1).numpy(), x[3:9000] * np.float32(2) + np.float32(1))     # float4 accesses
np.testing.assert_array_equal((tx > 0).where(tx, -tx).numpy(), np.abs(x))                                    # bool buffers
np.testing.assert_array_equal(tx.bitcast(dtypes.uint32).numpy(), x.view(np.uint32))                          # a view in the kernel
for dt in (np.int8, np.uint8, np.float16, np.int64):
  y = data(5003, dt)
  np.testing.assert_array_equal((Tensor(y) * 3).numpy(), y * dt(3))
@TinyJit
def f(p, q): return (p * q + 1).realize()
for i in range(4):   # a graph replayed with new input buffers
  p, q = data(5003), data(5003)
  np.testing.assert_allclose(f(Tensor(p), Tensor(q)).numpy(), p * q + 1, rtol=1e-6)
v = Variable("n", 1, 10007).bind(4001)
np.testing.assert_allclose(tx[:v].sum().item(), x[:4001].astype(np.float64).sum(), rtol=1e-4, atol=1e-3)   # a symbolic size
# a view bound at an odd element offset: the aligned-down address plus the element offset _o
n, base = 3001, Buffer("VULKAN", 3010, dtypes.float32, initial_value=x[:3010].tobytes())
for off in (0, 1, 2, 5):
  out = Buffer("VULKAN", n, dtypes.float32).allocate()
  s, o, r = UOp.param(0, dtypes.float32, (n,)), UOp.param(1, dtypes.float32, (n,)), UOp.range(n, 0, AxisType.LOOP)
  run_kernel([o.index(r).store(s.index(r) * 2.5).end(r)], [base.view(n, dtypes.float32, 4 * off), out])
  np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), np.float32), x[off:off + n] * np.float32(2.5))
assert len(progs) >= 10 and all(progs), progs
assert all(len(w) == 1 for w in writes), f"only the output is written: readonly buffers passed by address are read from SPIR-V ({writes})"
print("ok", sum(1 for p in progs if p), "of", len(progs), "programs pass buffers by address")
"""

@needs_bda
def test_small_buffers_by_address():
  # VULKAN_MAX_STORAGE_RANGE lowers the range, so every buffer over 2 KiB takes the address path: the whole kernel zoo on it
  r = run_python(SMALL_RANGE, {"VULKAN_MAX_STORAGE_RANGE": "2048", "VULKAN_REACH": "0", **GROUPED})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  # with the path off, kernels run in pieces and windows (tests/test_windows.py) until one needs more windows than descriptors: the
  # minimum profile's 4 (lavapipe 22.3 has 32, Mesa 25 a million, where every kernel of the zoo fits)
  off = run_python(SMALL_RANGE, {"VULKAN_MAX_STORAGE_RANGE": "2048", "VULKAN_PROFILE": "min"})
  assert off.returncode != 0 and "over maxStorageBufferRange" in off.stderr and "needs bufferDeviceAddress" in off.stderr, off.stdout + off.stderr

VECTORS = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor
from util import data, kernel_sources, shows
x, y = data(4 * 2503), data(4 * 2503)   # float4 lanes: a multiple of 4, of no workgroup size
srcs = [s for s in kernel_sources(Tensor(x) * 2 + Tensor(y)) if shows(s, "vec4")]   # (consumes its tensor)
np.testing.assert_array_equal((Tensor(x) * 2 + Tensor(y)).numpy(), x * np.float32(2) + y)
print("ok", len(srcs), any(shows(s, "address") for s in srcs), any(shows(s, "vec4_var") for s in srcs))
"""

@needs_bda
def test_vector_accesses_by_address_lane_by_lane():
  # float4 accesses of a buffer passed by address read and write its lanes one by one (renderer/plan.py vector): a vec4 by
  # address was ~4x slower on lavapipe 22.3 and killed SwiftShader (SIGILL). Through descriptors they stay vec4 declarations.
  by_addr = run_python(VECTORS, {"VULKAN_MAX_STORAGE_RANGE": "4096", "VULKAN_REACH": "0"})
  assert by_addr.returncode == 0 and by_addr.stdout.split()[-4:] == ["ok", "1", "True", "False"], by_addr.stdout + by_addr.stderr
  if "vec" in Device["VULKAN"].caps:   # (the output at least: a texel slot's reads go lane by lane too, plan.py texel_slots)
    desc = run_python(VECTORS, {"VULKAN_MAX_STORAGE_RANGE": ""})
    assert desc.returncode == 0 and desc.stdout.split()[-4:] == ["ok", "1", "False", "True"], desc.stdout + desc.stderr

@needs_bda
@pytest.mark.skipif("i64" not in Device["VULKAN"].caps, reason="64-bit indexing needs shaderInt64")
def test_64bit_index_by_address(monkeypatch):
  # buffers declared with more than 2^31 elements: tinygrad indexes them with int64, so the element address is computed in 64
  # bits (base + index * itemsize). The real buffers are small; the symbolic start z keeps the index type int64.
  slots = address_slots(monkeypatch)
  N, n = 2**31 + 1000, 100
  a = data(300, np.uint8)
  src, out = Buffer("VULKAN", 300, dtypes.uint8, initial_value=a.tobytes()), Buffer("VULKAN", 300, dtypes.uint8, initial_value=bytes(300))
  s, o = UOp.param(0, dtypes.uint8, (N,)), UOp.param(1, dtypes.uint8, (N,))
  zb = UOp.variable("z", 0, N - n - 1)
  r, z = UOp.range(n, 0, AxisType.LOOP), zb.param_like(2)
  buf_uops = [UOp.new_buffer(b.device, b.size, b.dtype) for b in (src, out)]
  for u, b in zip(buf_uops, (src, out)): buffers[u] = b
  prg = UOp.sink(o.index(r + z).store(s.index(r + z) + 3).end(r), arg=KernelInfo())
  src = to_program(prg, Device["VULKAN"].renderer).src[2].arg
  assert shows(src, "address64"), src
  with Context(SPEC=2):
    run_linear(UOp(Ops.LINEAR, src=(prg.call(*buf_uops, zb.bind(7)),)), var_vals={"z": 7, "p2": 7})
  ref = np.zeros(300, np.uint8)
  ref[7:7 + n] = a[7:7 + n] + 3
  np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), np.uint8), ref)
  assert slots == [2]

def test_64bit_index_needs_int64():
  # more than 2^31 elements: tinygrad indexes in int64, which only an address slot with shaderInt64 can take; refused, naming both
  from tinygrad_vk.renderer.abi import kernel_abi
  from tinygrad_vk.caps import Caps
  for flags in ({"i64"}, {"bda"}, set()):
    with pytest.raises(ValueError, match=r"64-bit indexing, which needs bufferDeviceAddress and shaderInt64"):
      kernel_abi(Caps(frozenset(flags)), [(1, 2**31 + 1000)], [])
  assert kernel_abi(Caps(frozenset({"bda", "i64"})), [(1, 2**31 + 1000)], []).address[0] is not None

@needs_bda
def test_address_without_int64():
  # bufferDeviceAddress without shaderInt64 (the Raspberry Pi's v3dv, VULKAN_PROFILE=pi5): int32 indexes on pointer-typed push
  # constants, no Int64
  r = run_python(SMALL_RANGE + "\nfrom util import kernel_sources\n"
                 "assert 'Int64' not in ''.join(kernel_sources(Tensor(np.arange(3000, dtype=np.float32)) * 2))",
                 {"VULKAN_MAX_STORAGE_RANGE": "2048", "VULKAN_PROFILE": "pi5", "VULKAN_REACH": "0", **GROUPED})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

@needs_bda
def test_gpt2_small_by_address():
  # scripts/gpt2_check.py at toy size, the token embedding (and the tied head reading it) past a lowered range
  code = """
import sys; sys.path.insert(0, "scripts")
import gpt2_check
from tinygrad_vk.program import VulkanProgram
init, progs = VulkanProgram.__init__, []
VulkanProgram.__init__ = lambda self, dev, obj: (init(self, dev, obj), progs.append(sum(a is not None for a in self.abi.address)))[0]
rc = gpt2_check.main(["--dim", "64", "--heads", "4", "--vocab", "1000", "--layers", "2", "--tokens", "4"])
assert rc == 0
assert sum(1 for p in progs if p) >= 2, progs
print("ok")"""
  r = run_python(code, {"VULKAN_MAX_STORAGE_RANGE": str(1000 * 64 * 4 - 4096), "VULKAN_REACH": "0"})
  assert r.returncode == 0 and "ok" in r.stdout and "match" in r.stdout, r.stdout + r.stderr
