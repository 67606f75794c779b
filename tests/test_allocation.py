"""Device memory: suballocation from a few VkDeviceMemory blocks, allocation limits, the heap budget, allocation faults."""
import dataclasses
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer, BufferSpec
from tinygrad_vk import memory
from util import data, rng, run_python, run_kernel, MemoryCount

def dedicated_size() -> int:
  """Bytes that get a VkDeviceMemory of their own (over half the largest block) on every memory type."""
  alloc = Device["VULKAN"].allocator
  return max(alloc.block_limit(t.index) for t in Device["VULKAN"].phys.memory_types) // 2 + 4096

def test_ten_thousand_buffers_few_device_memories(monkeypatch):
  mc = MemoryCount(monkeypatch, memory)
  sizes = rng.integers(1, 16 << 10, 10_000)
  fill = [rng.integers(0, 256, int(n), dtype=np.uint8) for n in sizes]
  bufs = [Buffer("VULKAN", len(f), dtypes.uint8, options=BufferSpec(nolru=True), initial_value=f.tobytes()) for f in fill]
  for b, f in zip(bufs, fill): assert bytes(b.as_memoryview()) == f.tobytes()   # no two buffers overlap
  assert mc.peak <= 24, f"{mc.peak} VkDeviceMemory objects for 10,000 buffers ({int(sizes.sum()) >> 20} MiB)"
  # staged copies (VULKAN_FORCE_STAGING=1) reuse their staging buffers (before: 608 MiB of memory for these 78 MiB)
  assert mc.peak_bytes <= 2 * int(sizes.sum()) + (64 << 20), f"{mc.peak_bytes >> 20} MiB of memory for {int(sizes.sum()) >> 20} MiB of buffers"
  x = data(1003)   # kernels bind buffers at their offsets inside the blocks
  np.testing.assert_array_equal((Tensor(x) * 2 + Tensor(x[::-1].copy())).numpy(), x * 2 + x[::-1])

def test_small_staged_copies_reuse_staging_buffers():
  # staging buffers are made in multiples of 64 KiB: a small copy takes one back from the cache (before: only a copy of at
  # least a quarter of it did, so copies under 16 KiB each made a new one and the cache filled up with them)
  alloc = Device["VULKAN"].allocator
  st = alloc.get_staging(100)
  alloc.put_staging(st)
  again = alloc.get_staging(100)
  alloc.put_staging(again)
  assert again is st

def test_buffer_sizes_around_block_sizes():
  # in a fresh process (empty pools): a first buffer bigger than the first block, then sizes on either side of the block sizes
  r = run_python("""
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Device, dtypes
from tinygrad.device import Buffer
from tinygrad_vk import memory
alloc = Device["VULKAN"].allocator
half = max(alloc.block_limit(t.index) for t in Device["VULKAN"].phys.memory_types) // 2
keep = []
for n in (3 * memory.BLOCK_FIRST, memory.BLOCK_FIRST - 4, memory.BLOCK_FIRST + 4, half, half + 4, 4096):
  x = np.arange(n // 4, dtype=np.uint32) * 2654435761
  keep.append(b := Buffer("VULKAN", n // 4, dtypes.uint32, initial_value=x.tobytes()))
  assert np.array_equal(np.frombuffer(b.as_memoryview(), np.uint32), x), n
print("ok", alloc.count, "allocations")""")
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_freed_range_is_not_reused_before_queued_work_is_done(monkeypatch):
  # a buffer freed while a queued kernel still reads it returns its range only when that kernel is done: a new buffer written
  # from the host in between must not land on it
  from tinygrad.uop.ops import UOp, AxisType
  monkeypatch.setattr(Device["VULKAN"].queue, "max_cmds", 64)   # the kernel stays queued whatever VULKAN_BATCH the suite runs with
  n, x = 4099, data(4099)
  src = Buffer("VULKAN", n, dtypes.float32, options=BufferSpec(nolru=True), initial_value=x.tobytes())
  out = Buffer("VULKAN", n, dtypes.float32).allocate()
  s, o, r = UOp.param(0, dtypes.float32, (n,)), UOp.param(1, dtypes.float32, (n,)), UOp.range(n, 0, AxisType.LOOP)
  Device["VULKAN"].synchronize()
  run_kernel([o.index(r).store(s.index(r) * 3).end(r)], [src, out])
  q = Device["VULKAN"].queue
  assert q.cur is not None, "the kernel should still be queued"
  seq = q.cur.seq
  blk, start, end = src._buf.block, src._buf.offset, src._buf.offset + src._buf.size
  del src
  # small buffers written from the host fill the smallest holes first: src's range would be taken early if it were free already
  others, overlap = [], False
  for _ in range(2000):
    others.append(b := Buffer("VULKAN", 1000, dtypes.float32, options=BufferSpec(nolru=True), initial_value=bytes(4000)))
    # (staged copies fill batches, so the kernel may complete meanwhile: then its range is rightly free again)
    if overlap := (b._buf.block is blk and start <= b._buf.offset < end and q.done_seq < seq): break
  np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), np.float32), x * 3)
  assert not overlap, "a freed range was handed out while queued work still used it"
  del others

def test_allocation_past_max_allocation_size_is_memory_error(monkeypatch):
  phys = Device["VULKAN"].phys
  if phys.max_alloc >= phys.max_buffer: pytest.skip(f"maxMemoryAllocationSize of {phys.name} is not below its largest buffer")
  mc = MemoryCount(monkeypatch, memory)
  size = phys.max_alloc + (phys.max_alloc >> 2)   # lavapipe: 2.5 GiB, under maxBufferSize (4 GiB), over the 2 GiB allocation limit
  with pytest.raises(MemoryError) as e: Buffer("VULKAN", size, dtypes.uint8).allocate()
  assert "maxMemoryAllocationSize" in str(e.value.__cause__), e.value.__cause__
  assert mc.peak == 0, "nothing should have been allocated"

def test_max_memory_allocation_count(monkeypatch):
  # a driver with a low maxMemoryAllocationCount (4096 is the Vulkan minimum): thousands of buffers still fit in two allocations
  dev, mc = Device["VULKAN"], MemoryCount(monkeypatch, memory)
  dev.allocator.free_cache()   # no spare blocks: the count is what the live buffers need
  monkeypatch.setattr(dev, "caps", dataclasses.replace(dev.caps, allocs=dev.allocator.count + 1))   # as VULKAN_PROFILE lowers it
  bufs = [Buffer("VULKAN", 1000 + i, dtypes.uint8, options=BufferSpec(nolru=True)).allocate() for i in range(3000)]
  assert mc.peak <= 1
  monkeypatch.setattr(dev, "caps", dataclasses.replace(dev.caps, allocs=dev.allocator.count))
  with pytest.raises(MemoryError) as e: Buffer("VULKAN", dedicated_size(), dtypes.uint8, options=BufferSpec(nolru=True)).allocate()
  assert "maxMemoryAllocationCount" in str(e.value.__cause__), e.value.__cause__
  del bufs

def test_heap_budget_trims_the_lru_cache():
  # a 64 MiB heap: buffers of random sizes allocated and freed, tinygrad's LRU cache keeping what is freed. Allocation stops at the
  # budget (80% of the heap: the driver reports none) with a MemoryError, the LRU cache is freed and the allocation retried.
  # Before: the cache grew past the heap (10,000 cycles on lavapipe's 2 GiB heap: RSS 184 -> 2014 MiB).
  r = run_python("""
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad_vk import memory
from tinygrad_vk.instance import instance
from util import MemoryCount
class Patch:
  setattr = staticmethod(setattr)
phys, heap = instance().devices[0], 64 << 20
phys.heaps = [(heap, f) for _, f in phys.heaps]
phys.extensions.discard(memory.BUDGET_EXT)   # a driver's reported budget (Mesa 25) would be the real heap's
for t in phys.memory_types: t.heap_size = heap
mc = MemoryCount(Patch, memory)
from tinygrad import Device, dtypes
from tinygrad.device import Buffer
rng = np.random.default_rng(0)
for i in range(1000):
  n = int(rng.integers(1, 1 << 20))
  x = rng.integers(0, 256, n, dtype=np.uint8)
  b = Buffer("VULKAN", n, dtypes.uint8, initial_value=x.tobytes())
  assert bytes(b.as_memoryview()) == x.tobytes()
  del b
print("peak", mc.peak_bytes >> 20, "MiB", mc.peak, "allocations")
assert mc.peak_bytes <= 0.8 * heap, mc.peak_bytes
""", {"VULKAN_LRU_CACHE_MB": "1024"})   # the budget trims the cache here, not its own cap
  assert r.returncode == 0 and "peak" in r.stdout, r.stdout + r.stderr

def test_allocation_waits_for_deferred_frees():
  # a 64 MiB heap (budget 51 MiB) holding a 24 MiB tensor that a queued kernel still reads: once the tensor is gone, a 30 MiB
  # buffer fits only after that kernel is done and the free deferred behind it has run. The allocator waits for the queue and
  # retries (tinygrad's own retry after emptying its cache would not wait: MemoryError)
  r = run_python("""
import numpy as np
from tinygrad_vk.instance import instance
from tinygrad_vk.memory import BUDGET_EXT
phys, heap = instance().devices[0], 64 << 20
phys.heaps = [(heap, f) for _, f in phys.heaps]
phys.extensions.discard(BUDGET_EXT)   # a driver's reported budget (Mesa 25) would be the real heap's
for t in phys.memory_types: t.heap_size = heap
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer
dev = Device["VULKAN"]
dev.queue.max_cmds = 1 << 20   # nothing is submitted before a synchronization, whatever VULKAN_BATCH is
x = np.random.default_rng(0).uniform(-1, 1, 6 << 20).astype(np.float32)
t = Tensor(x).realize()
dev.synchronize()
y = (t[:4099] * 2).realize()   # queued, reading t
assert dev.queue.cur is not None
del t
b = Buffer("VULKAN", 30 << 20, dtypes.uint8).allocate()
np.testing.assert_array_equal(y.numpy(), x[:4099] * 2)
print("ok")
""")
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_lru_cache_is_capped(monkeypatch):
  # freed buffers of sizes that never recur: tinygrad's LRU cache is emptied past VULKAN_LRU_CACHE_MB instead of holding them
  # up to the heap budget (before: 10,000 cycles of 1 KiB-16 MiB held 1.6 GiB, RSS 1791 MiB; now 631 MiB)
  alloc = Device["VULKAN"].allocator
  alloc.free_cache()
  monkeypatch.setattr(alloc, "lru_cap", 1 << 20, raising=False)
  def cached() -> int: return sum(size * len(bufs) for (size, _), bufs in alloc.cache.items())
  for i in range(200):
    n = 5000 + 4 * i
    x = rng.integers(0, 256, n, dtype=np.uint8)
    b = Buffer("VULKAN", n, dtypes.uint8, initial_value=x.tobytes())
    assert bytes(b.as_memoryview()) == x.tobytes()
    if i % 2: Buffer("VULKAN", n - 4, dtypes.uint8).allocate()   # a size freed just before: taken back from the cache
    del b
    assert cached() <= 1 << 20, f"the LRU cache holds {cached()} bytes"
  assert cached() == alloc.lru_bytes and cached() > 0

def test_allocation_failing_mid_workload(monkeypatch):
  if "bda" not in Device["VULKAN"].caps and dedicated_size() > Device["VULKAN"].caps.range:
    pytest.skip("needs bufferDeviceAddress: the output that takes a VkDeviceMemory of its own is over maxStorageBufferRange")
  # vkAllocateMemory fails in the middle of a workload: a MemoryError (or a successful retry), tensors already on the device
  # read back bit-exact and the next computation is right
  mc = MemoryCount(monkeypatch, memory)
  a, b = data(1000), data(1000)
  ta, tb = Tensor(a).realize(), Tensor(b).realize()
  np.testing.assert_array_equal((ta * 2 + tb).numpy(), a * 2 + b)
  wide = 4 * 1000 * (dedicated_size() // 4000 + 1)   # an output that needs a new VkDeviceMemory
  mc.fail = 1 << 30
  with pytest.raises(MemoryError): (ta.reshape(1000, 1).expand(1000, wide // 4000) + 1).realize()
  mc.fail = 0
  assert ta.numpy().tobytes() == a.tobytes() and tb.numpy().tobytes() == b.tobytes()
  np.testing.assert_array_equal((ta * 2 + tb).numpy(), a * 2 + b)
  mc.fail = 1   # failing once: the retry succeeds
  out = (ta.reshape(1000, 1).expand(1000, wide // 4000) + tb.reshape(1000, 1)).contiguous().realize()
  assert mc.fail == 0, "the allocation should have been tried (and failed) once"
  np.testing.assert_array_equal(out[:, :3].numpy(), np.repeat((a + b).reshape(1000, 1), 3, axis=1))
  np.testing.assert_array_equal(out[:, -1].numpy(), a + b)
  del out

@pytest.mark.parametrize("call", ["vkBindBufferMemory", "vkMapMemory"])
def test_failed_bind_or_map_leaks_nothing(monkeypatch, vk_hooks, call):
  # every VkBuffer and VkDeviceMemory made while the call fails is gone again afterwards (before: both leaked)
  made, failed = {"vkCreateBuffer": set(), "vkAllocateMemory": set()}, []
  def create(name):
    def f(fn, dev, info, cb, out):
      if (res := fn(dev, info, cb, out)) == 0: made[name].add(out[0])
      return res
    return f
  def destroy(name):
    def f(fn, dev, handle, cb):
      made[name].discard(handle)
      return fn(dev, handle, cb)
    return f
  def fail(fn, *args):
    failed.append(1)
    return memory.vk.VK_ERROR_OUT_OF_DEVICE_MEMORY if call == "vkBindBufferMemory" else memory.vk.VK_ERROR_MEMORY_MAP_FAILED
  vk_hooks.update({"vkCreateBuffer": create("vkCreateBuffer"), "vkAllocateMemory": create("vkAllocateMemory"),
                   "vkDestroyBuffer": destroy("vkCreateBuffer"), "vkFreeMemory": destroy("vkAllocateMemory"), call: fail})
  with pytest.raises(MemoryError) as e:   # host memory is always mapped
    Buffer("VULKAN", dedicated_size(), dtypes.uint8, options=BufferSpec(host=True, nolru=True)).allocate()
  assert call in str(e.value.__cause__) and failed
  assert not made["vkCreateBuffer"] and not made["vkAllocateMemory"], made

def test_driver_memory_budget_bounds_allocation(monkeypatch, vk_hooks):
  # where the driver has VK_EXT_memory_budget (lavapipe has not: faked here), its budget left in the heap bounds new memory
  from tinygrad_vk.vk import ffi
  alloc = Device["VULKAN"].allocator
  def props2(fn, phys, out):
    b = ffi.cast("VkPhysicalDeviceMemoryBudgetPropertiesEXT*", out.pNext)
    for h in range(len(Device["VULKAN"].phys.heaps)):   # a dedicated buffer does not fit in what is left
      b.heapBudget[h], b.heapUsage[h] = 1 << 30, (1 << 30) - (dedicated_size() - 8192)
  monkeypatch.setattr(alloc, "budget_ext", True)
  vk_hooks["vkGetPhysicalDeviceMemoryProperties2"] = props2
  with pytest.raises(MemoryError) as e: Buffer("VULKAN", dedicated_size(), dtypes.uint8, options=BufferSpec(nolru=True)).allocate()
  assert "over the budget left in heap" in str(e.value.__cause__), e.value.__cause__
