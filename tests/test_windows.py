"""Kernels with more buffers than the device has descriptors (renderer/abi.py, windowed kernels): under VULKAN_PROFILE=min (4
storage-buffer descriptors, no bufferDeviceAddress) a kernel of 20 inputs and one output stays whole, its buffers reached through
windows over the memory blocks they lie in, or, with VULKAN_DISABLE=share, through copies gathered into a scratch window."""
import pytest
from tinygrad import Device
from util import run_python
# the end of every script: all work finished, no validation message, "ok"
DONE = """
dev.synchronize()
assert not validation_messages, validation_messages
print("ok")"""

# min's own 128 MiB range, not a CI pass's 4 KiB: 20 inputs gathered into one 4 KiB window would not fit
MIN = {"VULKAN_PROFILE": "min", "VULKAN_VALIDATION": "1", "VULKAN_MAX_STORAGE_RANGE": ""}

WIDE = """
import sys, functools; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, Device, TinyJit, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from tinygrad_vk.instance import validation_messages
from tinygrad_vk.program import VulkanProgram
from util import data, run_kernel
N = 1003
DTS = [dtypes.float32, dtypes.int8, dtypes.bool, dtypes.half] * 5
NP = {dtypes.float32: np.float32, dtypes.int8: np.int8, dtypes.bool: np.bool_, dtypes.half: np.float16}
dev = Device["VULKAN"]
assert dev.caps.bufs == 4 and "bda" not in dev.caps, dev.caps
from tinygrad_vk import windows
places, place = [], windows.place
def spy(prg, bufs, piece=None):
  w = place(prg, bufs, piece)
  places.append((len(bufs), len(w.spans), len(w.copies)))
  return w
windows.place = spy
from tinygrad_vk.graph import VulkanGraph
records, record = [], VulkanGraph._record
VulkanGraph._record = lambda self: (records.append(len(self.calls)), record(self))[1]
def ref(arrs): return sum(a.astype(np.float32) * (k + 1) for k, a in enumerate(arrs))

# eager: 20 Buffer views at odd element offsets, mixed dtypes, one kernel that reads them all
arrs, views = [], []
for k, dt in enumerate(DTS):
  off = 2 * k + 1
  a = data(off + N + 3, NP[dt], lo=-4, hi=4)
  views.append(Buffer("VULKAN", a.size, dt, initial_value=a.tobytes()).view(N, dt, off * dt.itemsize))
  arrs.append(a[off:off + N])
out = Buffer("VULKAN", N, dtypes.float32).allocate()
r = UOp.range(N, 0, AxisType.GLOBAL)
terms = [UOp.param(k, dt, (N,)).index(r).cast(dtypes.float32) * (k + 1) for k, dt in enumerate(DTS)]
acc = functools.reduce(lambda x, y: x + y, terms)
run_kernel([UOp.param(len(DTS), dtypes.float32, (N,)).index(r).store(acc).end(r)], views + [out])
np.testing.assert_allclose(np.frombuffer(out.as_memoryview(), np.float32), ref(arrs), rtol=1e-5, atol=1e-4)
assert places and places[-1][0] == 21, places
print("eager", places[-1])

# TinyJit: the same sum of 20 tensors (sliced at odd starts) onto zeros in one kernel, replayed with new inputs
@TinyJit
def f(*xs): return sum((x[k % 3:k % 3 + N].cast(dtypes.float32) * (k + 1) for k, x in enumerate(xs)), Tensor.zeros(N)).realize()
for it in range(4):
  host = [data(N + 3, NP[dt], lo=-4, hi=4) for dt in DTS]
  got = f(*[Tensor(h).realize() for h in host]).numpy()
  np.testing.assert_allclose(got, ref([h[k % 3:k % 3 + N] for k, h in enumerate(host)]), rtol=1e-5, atol=1e-4)
assert records and all(n == 2 for n in records), records   # the zeros, then one kernel of 22 buffers: replayed in a graph
print("jit", places[-1])
print("gathered", dev.gathered)
""" + DONE

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_twenty_inputs_share_one_window(ren):
  # every buffer lies in the first memory block: one window, no copy
  r = run_python(WIDE, {**MIN, "DEV": f"VULKAN:{ren}"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  assert "eager (21, 1, 0)" in r.stdout and "jit (22, 1, 0)" in r.stdout and "gathered 0" in r.stdout, r.stdout

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_twenty_inputs_gathered(ren):
  # a window per buffer: the output and two inputs keep theirs, the others are copied into the scratch window first
  r = run_python(WIDE, {**MIN, "DEV": f"VULKAN:{ren}", "VULKAN_DISABLE": "share", "VULKAN_FORCE_STAGING": "1", "VULKAN_BATCH": "3"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  assert "eager (21, 4, 18)" in r.stdout and "jit (22, 4, 19)" in r.stdout and "gathered 0" not in r.stdout, r.stdout

def test_new_pipeline_keeps_the_launch_ordered():
  # a view at an odd offset makes the first launch build a pipeline variant, whose warm-up dispatch records a barrier: it was
  # recorded inside the launch's hazard bookkeeping and forgot the launch's store, so the staged read back that followed had no
  # barrier (synchronisation validation: READ_AFTER_WRITE). Now the variant is built before the launch is ordered.
  r = run_python("""
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Device, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import data, run_kernel
a = data(300)
whole = Buffer("VULKAN", 300, dtypes.float32, initial_value=a.tobytes())
for k, start in enumerate((0, 3)):   # a first program leaves its warm-up's write pending; the second's launch depends on nothing
  out = Buffer("VULKAN", 100, dtypes.float32).allocate()
  r = UOp.range(100, 0, AxisType.GLOBAL)
  run_kernel([UOp.param(1, dtypes.float32, (100,)).index(r).store(UOp.param(0, dtypes.float32, (100,)).index(r) * (k + 2)).end(r)],
             [whole.view(100, dtypes.float32, 4 * start), out])
  np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), np.float32), a[start:start + 100] * np.float32(k + 2))
Device["VULKAN"].synchronize()
print("ok")""", {"VULKAN_VALIDATION": "1", "VULKAN_FORCE_STAGING": "1"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

# ---- buffers past maxStorageBufferRange without bufferDeviceAddress: launched in pieces of workgroups (abi.py REACH). The range is
# lowered to 1 MiB so that a few MB show it; the acceptance sizes (a 1.2 GB sum) are in scripts/big_check.py.

MIN_1MIB = {**MIN, "VULKAN_MAX_STORAGE_RANGE": str(1 << 20)}

PIECES = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, Device, TinyJit, dtypes
from tinygrad.device import CompileError
from tinygrad_vk.instance import validation_messages
from tinygrad_vk.program import VulkanProgram
from util import data
dev = Device["VULKAN"]
assert "bda" not in dev.caps and dev.caps.range == 1 << 20, dev.caps
launches, pieces = [], VulkanProgram.pieces
VulkanProgram.pieces = lambda self, gx: (launches.append(len(p := pieces(self, gx))), p)[1]
N = 3_000_000   # 12 MB of float32; tinygrad splits its sum into workgroups of contiguous chunks (a size it cannot split is refused)
a, b = data(N), data(N, np.int8)
ta, tb = Tensor(a).realize(), Tensor(b).realize()
np.testing.assert_allclose(ta.sum().numpy(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
np.testing.assert_allclose((ta[5:] * 2 + tb[:-5]).numpy(), a[5:] * 2 + b[:-5], rtol=1e-6)   # odd offsets, int8 in words
np.testing.assert_allclose(ta.half()[::3].numpy(), a.astype(np.float16)[::3], rtol=1e-3)    # half in words, strided
assert max(launches) > 4, launches
@TinyJit
def f(x): return (x * 3 - 1).realize()
for _ in range(3):
  x = data(N)
  np.testing.assert_allclose(f(Tensor(x).realize()).numpy(), x * 3 - 1, rtol=1e-6)
print("pieces", max(launches))
try:   # a gather reads an index from memory: no workgroup's reach is bounded. One storage texel buffer holds `a` (flag texel)
  idx = data(7, np.int32, lo=0, hi=N - 1).astype(np.int32)
  np.testing.assert_array_equal(Tensor(a)[Tensor(idx)].numpy(), a[idx])
  print("gathered")
except CompileError as e: print("refused:", e)
print("texel", "texel" in dev.caps)
""" + DONE

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_past_the_range_in_pieces(ren):
  r = run_python(PIECES, {**MIN_1MIB, "DEV": f"VULKAN:{ren}"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  if "texel True" in r.stdout: assert "gathered" in r.stdout, r.stdout
  else: assert "refused:" in r.stdout and "needs bufferDeviceAddress" in r.stdout, r.stdout

SPLIT = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, Device, dtypes, nn
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from tinygrad_vk.instance import validation_messages
from tinygrad_vk.program import VulkanProgram
from util import data, run_kernel
dev = Device["VULKAN"]
assert "bda" not in dev.caps and dev.caps.range == 1 << 20, dev.caps
splits, init = [], VulkanProgram.__init__
VulkanProgram.__init__ = lambda self, d, obj: (init(self, d, obj), splits.append(sorted(k for k, _, _ in self.split_slots.values())))[0]
V, D = 601, 643   # 1.5 MB of float32: 2 windows of the 1 MiB range
w = data((V, D))
tw, toks = Tensor(w).realize(), np.array([[V - 1, 0, 17, V // 2, 3, V - 2, 5]], dtype=np.int32)
np.testing.assert_array_equal(tw[Tensor(toks)].numpy(), w[toks])   # tinygrad's gather: a one-hot reduction over the rows
emb = nn.Embedding(V, D); emb.weight = tw
np.testing.assert_array_equal(emb(Tensor(toks)).numpy(), w[toks])  # an index read from memory
# stores at indexes read from memory, into a split buffer: float32, and int8 in words (atomics on the shared words, under min)
for dt, npdt in ((dtypes.float32, np.float32), (dtypes.int8, np.int8)):
  n, m = (3 << 20) // 2 // dt.itemsize + 7, 1003
  big = data(n, npdt)
  idx = np.random.default_rng(5).choice(n, m, replace=False).astype(np.int32)
  vals = data(m, npdt)
  b = Buffer("VULKAN", n, dt, initial_value=big.tobytes())
  bi, bv = Buffer("VULKAN", m, dtypes.int32, initial_value=idx.tobytes()), Buffer("VULKAN", m, dt, initial_value=vals.tobytes())
  r = UOp.range(m, 0, AxisType.GLOBAL)
  po, pi, pv = UOp.param(0, dt, (n,)), UOp.param(1, dtypes.int32, (m,)), UOp.param(2, dt, (m,))
  i = pi.index(r).load()
  run_kernel([po.index(i).store(pv.index(r) + po.index(i)).end(r)], [b, bi, bv])
  ref = big.copy(); ref[idx] = vals + big[idx]
  np.testing.assert_array_equal(np.frombuffer(b.as_memoryview(), npdt), ref)
print("splits", max(max(s, default=0) for s in splits))
""" + DONE

# a buffer every workgroup reads whole (a matmul's B, an embedding's rows at indexes read from memory): read-only 32-bit elements
# go through one storage texel buffer (flag texel, llvmpipe: maxTexelBufferElements is 4x maxStorageBufferRange), else split
TEXEL = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, Device, nn
from tinygrad_vk.instance import validation_messages
from tinygrad_vk.program import VulkanProgram
from util import data
dev = Device["VULKAN"]
assert "bda" not in dev.caps and dev.caps.range == 1 << 20, dev.caps
progs, init = [], VulkanProgram.__init__
VulkanProgram.__init__ = lambda self, d, obj: (init(self, d, obj), progs.append((len(self.split_slots), len(self.texel))))[0]
x, y = data((37, 301)), data((301, 1001))   # y: 1.2 MB
np.testing.assert_allclose((Tensor(x) @ Tensor(y)).numpy(), x @ y, rtol=1e-4, atol=1e-3)
V, D = 601, 643   # 1.5 MB
w, toks = data((V, D)), np.array([[V - 1, 0, 17, V // 2, 3, V - 2, 5]], dtype=np.int32)
emb = nn.Embedding(V, D); emb.weight = Tensor(w).realize()
np.testing.assert_array_equal(emb(Tensor(toks)).numpy(), w[toks])  # an index read from memory
print("split", sum(1 for s, _ in progs if s), "texel", sum(1 for _, t in progs if t))
""" + DONE

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
@pytest.mark.skipif("texel" not in Device["VULKAN"].caps, reason="no storage texel buffers of R32_UINT (the texel path: llvmpipe only)")
def test_past_the_range_texel(ren):
  r = run_python(TEXEL, {**MIN_1MIB, "DEV": f"VULKAN:{ren}"})
  assert r.returncode == 0 and "ok" in r.stdout and "split 0 texel 2" in r.stdout, r.stdout + r.stderr
  off = run_python(TEXEL, {**MIN_1MIB, "DEV": f"VULKAN:{ren}", "VULKAN_DISABLE": "texel"})
  assert off.returncode == 0 and "ok" in off.stdout and "split 2 texel 0" in off.stdout, off.stdout + off.stderr

@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_past_the_range_split(ren):
  r = run_python(SPLIT, {**MIN_1MIB, "DEV": f"VULKAN:{ren}"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  assert "splits 2" in r.stdout, r.stdout
