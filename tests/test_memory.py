"""Buffers: the staging path, views at odd offsets, copies between devices, allocation failures."""
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer
from tinygrad.dtype import _to_np_dtype
from tinygrad.uop.ops import UOp, AxisType
from util import data, run_python, run_kernel, BindSpy, bind_align, missing

def test_staging_path_forced():
  # lavapipe memory is host-visible, so only the switch exercises the discrete-GPU path: device buffers unmapped, staged copies
  r = run_python("""
import numpy as np
from tinygrad import Tensor, Device
from tinygrad.device import Buffer
from tinygrad import dtypes
a = np.random.default_rng(0).uniform(-2, 2, 100003).astype(np.float32)
t = Tensor(a).realize()
assert t.uop.buffer._buf.ptr is None, "device buffer should not be mapped with VULKAN_FORCE_STAGING=1"
np.testing.assert_array_equal((t * 2 + 1).numpy(), a * 2 + 1)
np.testing.assert_array_equal(t[7:1000].numpy(), a[7:1000])
b = Buffer("VULKAN", 5, dtypes.float32).allocate()
for i in range(3):   # the same buffer rewritten while earlier copies are queued: every copy lands in order
  b.copy_from(Buffer("PYTHON", 5, dtypes.float32, initial_value=(np.arange(5, dtype=np.float32) + 10 * i).tobytes()))
assert np.frombuffer(b.as_memoryview(), np.float32).tolist() == [20.0, 21.0, 22.0, 23.0, 24.0]
big = np.random.default_rng(1).uniform(-2, 2, 5_000_003).astype(np.float32)   # > 2 staging chunks and a remainder, both ways
np.testing.assert_array_equal((Tensor(big) + 1).numpy(), big + 1)
print("ok")""", {"VULKAN_FORCE_STAGING": "1"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

@pytest.mark.parametrize("dt,start", [(dtypes.float32, 3), (dtypes.float32, 5), (dtypes.int8, 7), (dtypes.half, 1), (dtypes.int64, 3),
                                      (dtypes.uint8, 13)], ids=str)
def test_views_at_odd_offsets(monkeypatch, dt, start):
  # Buffer.views `start` elements past minStorageBufferOffsetAlignment: bound at the aligned-down (non-zero) offset, the rest in a
  # push constant, through a pipeline variant. (Tensor slices would not do: tinygrad folds them into index arithmetic.)
  if (m := missing(dt)): pytest.skip(m)
  spy, n, npdt = BindSpy(monkeypatch), 101, _to_np_dtype(dt)
  first = bind_align() // dt.itemsize + start
  a = data(first + n + 8, npdt, lo=-40, hi=40).round().astype(npdt)   # small integers: exact in every dtype
  whole = Buffer("VULKAN", a.size, dt, initial_value=a.tobytes())
  v, w = whole.view(n, dt, first * dt.itemsize), whole.view(n, dt, (first + 1) * dt.itemsize)
  out = Buffer("VULKAN", n, dt).allocate()
  pv, pw, po = UOp.param(0, dt, (n,)), UOp.param(1, dt, (n,)), UOp.param(2, dt, (n,))
  r = UOp.range(n, 0, AxisType.GLOBAL)
  run_kernel([po.index(r).store(pv.index(r) * 3 + pw.index(r)).end(r)], [v, w, out])
  with np.errstate(over="ignore"): ref = a[first:first + n] * npdt(3) + a[first + 1:first + 1 + n]
  np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), npdt), ref)
  if 0 in spy.words:   # 8/16-bit types packed in words (renderer/passes/packing.py): a view inside a word is moved to a whole word
    assert spy.moved == {i for i, e in ((0, first), (1, first + 1)) if e * dt.itemsize % 4}, (spy.moved, spy.words)
  else: assert spy.offset_bound(0) and spy.offset_bound(1) and spy.variant_used(0), spy.binds

def test_write_into_view(monkeypatch):
  # a kernel storing through a Buffer.view: only the view's bytes change
  spy, A, n = BindSpy(monkeypatch), bind_align(), 100
  a = data(A + 257)
  whole = Buffer("VULKAN", a.size, dtypes.float32, initial_value=a.tobytes())
  first = A // 4 + 5
  po, r = UOp.param(0, dtypes.float32, (n,)), UOp.range(n, 0, AxisType.GLOBAL)
  run_kernel([po.index(r).store(r.cast(dtypes.float32) * 0.5 - 7).end(r)], [whole.view(n, dtypes.float32, 4 * first)])
  ref = a.copy()
  ref[first:first + n] = np.arange(n, dtype=np.float32) * np.float32(0.5) - np.float32(7)
  np.testing.assert_array_equal(np.frombuffer(whole.as_memoryview(), np.float32), ref)
  assert spy.offset_bound(0) and spy.variant_used(0), spy.binds

def test_assign_into_slice():
  # tinygrad folds the slice into the kernel's index arithmetic: the whole buffer is bound
  a = data(257)
  t = Tensor(a).realize()
  t[5:105].assign(Tensor(np.arange(100, dtype=np.float32))).realize()
  ref = a.copy()
  ref[5:105] = np.arange(100)
  np.testing.assert_array_equal(t.numpy(), ref)

def test_cpu_vulkan_copies():
  a = data((33, 17))
  t = Tensor(a, device="CPU").to("VULKAN")
  np.testing.assert_array_equal(t.numpy(), a)
  np.testing.assert_array_equal((t * 3).to("CPU").numpy(), a * 3)

def test_vulkan0_vulkan1_copies():
  a = data(10007)
  t0 = Tensor(a, device="VULKAN")
  t1 = (t0 + 1).to("VULKAN:1")
  assert t1.device == "VULKAN:1"
  np.testing.assert_array_equal(t1.numpy(), a + 1)
  back = (t1 * 2).to("VULKAN")
  np.testing.assert_array_equal(back.numpy(), (a + 1) * 2)
  np.testing.assert_array_equal((back + t0).numpy(), (a + 1) * 2 + a)

def test_same_device_copy_is_queue_ordered():
  a = data(4099)
  t = Tensor(a).realize()
  for _ in range(5): t = (t + 1).contiguous().realize()   # several kernels and copies queued before the read
  np.testing.assert_allclose(t.clone().numpy(), a + 5, rtol=1e-6)

def test_buffer_reuse_after_free():
  # the LRU hands a freed buffer straight back: a host copy into it must not overtake queued work that still reads it
  for i in range(20):
    src = data(1000) + i
    x = Tensor(src)
    y = (x * 2).realize()
    del x
    np.testing.assert_array_equal(y.numpy(), src * 2)

def test_allocation_over_device_limit_is_memory_error():
  limit = Device["VULKAN"].phys.max_buffer
  with pytest.raises(MemoryError) as e:
    Buffer("VULKAN", limit + 1, dtypes.uint8).allocate()
  assert "over" in str(e.value.__cause__) and Device["VULKAN"].phys.name in str(e.value.__cause__)

def test_many_inputs_are_split_under_the_buffer_limit():
  # the hook registers VULKAN's per-kernel buffer limit before the first schedule: a 40-input sum becomes several kernels
  xs = [data(101) for _ in range(40)]
  def total():   # a fresh graph each time: schedule_linear() hands the schedule to the caller, who must run it
    t = Tensor(xs[0])
    for x in xs[1:]: t = t + Tensor(x)
    return t
  from tinygrad.uop.ops import Ops
  calls = [c for c in total().schedule_linear().src if c.src[0].op is Ops.SINK]
  assert len(calls) > 1 and all(len(c.src) - 1 <= 31 for c in calls)
  np.testing.assert_allclose(total().numpy(), np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
