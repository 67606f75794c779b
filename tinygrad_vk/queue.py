"""Recording, barriers, submission and retirement on one VkQueue.

Work is recorded into an open command buffer (a `Batch`) and submitted with a fence on `synchronize()`, a read back, or once
the batch holds `VULKAN_BATCH` commands. A global memory barrier is recorded only before a command that touches a byte range
written by a command since the last barrier, or writes a range read since then (tinygrad's `DepsTracker` range logic). The
tracked ranges survive submission: a barrier also orders against earlier submissions on the same queue, so the first
dependent command of the next batch gets one.
"""
from __future__ import annotations
import collections, decimal, time
from typing import Callable
from tinygrad.helpers import getenv, PROFILE, ProfileRangeEvent
from tinygrad.device import Compiled
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new

UINT64_MAX = 0xFFFFFFFFFFFFFFFF
STAGES = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
WRITES = vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
ACCESS = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
QUERIES = 256   # timestamp slots per batch: a batch is flushed when they run out

Range = tuple[int, int, int]   # (id of the root buffer, start byte, end byte)
def byte_range(x) -> Range: return (id(x.root), x.offset, x.offset + x.size)

class Hazards:
  """Byte ranges read and written since the last barrier, per root buffer; `everything` after an untracked command (a graph)."""
  def __init__(self): self.reads: dict[int, list[tuple[int, int]]] = {}; self.writes: dict[int, list[tuple[int, int]]] = {}; self.everything = False
  @staticmethod
  def _hit(table, k, s, e) -> bool: return any(st < e and s < en for st, en in table.get(k, ()))
  def conflict(self, reads:list[Range], writes:list[Range]) -> bool:
    return self.everything or any(self._hit(self.writes, *r) for r in reads + writes) or any(self._hit(self.reads, *w) for w in writes)
  def add(self, reads:list[Range], writes:list[Range]):
    for table, rs in ((self.reads, reads), (self.writes, writes)):
      for k, s, e in rs: table.setdefault(k, []).append((s, e))
  def dirty(self) -> bool: return self.everything or bool(self.reads) or bool(self.writes)
  def clear(self): self.reads.clear(); self.writes.clear(); self.everything = False

class Batch:
  """An open command buffer. Used as `with q.prepare(...) as b:`, the queue never submits it while the block records into it."""
  def __init__(self, q:CommandQueue):
    self.q, self.cmd, self.seq, self.ncmds, self.nqueries = q, q.new_command_buffer(), 0, 0, 0
    self.fence = ffi.new("VkFence*")
    check(lib.vkCreateFence(q.device, new("VkFenceCreateInfo"), NULL, self.fence), "vkCreateFence")
    self.query_pool = ffi.new("VkQueryPool*")
    check(lib.vkCreateQueryPool(q.device, new("VkQueryPoolCreateInfo", queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=QUERIES), NULL,
                                self.query_pool), "vkCreateQueryPool")
    self.desc_pools: list = []
    self.profile: list[tuple[int, str, bytes|None]] = []   # (first query, kernel name, profile key)
    # reused for every descriptor set allocation: this is on the launch path
    self.set_layout, self.set_out = ffi.new("VkDescriptorSetLayout[1]"), ffi.new("VkDescriptorSet[1]")
    self.set_info = new("VkDescriptorSetAllocateInfo", descriptorSetCount=1, pSetLayouts=self.set_layout)

  def __enter__(self) -> Batch: return self
  def __exit__(self, *exc): self.q.recorded(self)

  def begin(self, seq:int):
    self.seq, self.ncmds, self.nqueries = seq, 0, 0
    check(lib.vkBeginCommandBuffer(self.cmd, new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)),
          "vkBeginCommandBuffer")
    lib.vkCmdResetQueryPool(self.cmd, self.query_pool[0], 0, QUERIES)

  def alloc_set(self, layout) -> object:
    """A descriptor set that lives until this batch retires."""
    self.set_layout[0] = layout
    if self.desc_pools:
      self.set_info.descriptorPool = self.desc_pools[-1]
      res = lib.vkAllocateDescriptorSets(self.q.device, self.set_info, self.set_out)
      if res == 0: return self.set_out[0]
      if res not in (vk.VK_ERROR_OUT_OF_POOL_MEMORY, vk.VK_ERROR_FRAGMENTED_POOL): check(res, "vkAllocateDescriptorSets")
    self.desc_pools.append(self.q.get_desc_pool())
    self.set_info.descriptorPool = self.desc_pools[-1]
    check(lib.vkAllocateDescriptorSets(self.q.device, self.set_info, self.set_out), "vkAllocateDescriptorSets")
    return self.set_out[0]

  def timestamp(self) -> int|None:
    """Record a timestamp after all earlier commands complete; None when the queue has no timestamps or the batch is full."""
    if not self.q.timestamp_bits or self.nqueries >= QUERIES: return None
    lib.vkCmdWriteTimestamp(self.cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.query_pool[0], self.nqueries)
    self.nqueries += 1
    return self.nqueries - 1

  def read_timestamps(self, first:int, count:int) -> list[int]:
    out = ffi.new("uint64_t[]", count)
    check(lib.vkGetQueryPoolResults(self.q.device, self.query_pool[0], first, count, ffi.sizeof(out), out, 8,
                                    vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT), "vkGetQueryPoolResults")
    return [v & self.q.timestamp_mask for v in out]

class CommandQueue:
  def __init__(self, dev, device, queue, family:int, timestamp_bits:int, timestamp_period:float):
    self.dev, self.device, self.queue = dev, device, queue
    self.timestamp_bits, self.timestamp_period = timestamp_bits, timestamp_period
    self.timestamp_mask = (1 << timestamp_bits) - 1 if timestamp_bits < 64 else UINT64_MAX
    pool = ffi.new("VkCommandPool*")
    check(lib.vkCreateCommandPool(device, new("VkCommandPoolCreateInfo", queueFamilyIndex=family,
                                              flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), NULL, pool), "vkCreateCommandPool")
    self.pool = pool[0]
    self.cur: Batch|None = None
    self.inflight: collections.deque[Batch] = collections.deque()
    self.free: list[Batch] = []
    self.free_desc_pools: list = []
    self.next_seq, self.done_seq = 1, 0
    self.held = 0   # open `with q.prepare(...)` blocks: the batch they record into must not be submitted under them
    self.hazards = Hazards()
    self.deferred: collections.deque[tuple[int, Callable[[], None]]] = collections.deque()
    self.max_cmds = getenv("VULKAN_BATCH", 64)
    self.barrier_info = new("VkMemoryBarrier", srcAccessMask=WRITES, dstAccessMask=ACCESS)
    self.host_barrier = new("VkMemoryBarrier", srcAccessMask=WRITES, dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)

  def new_command_buffer(self, secondary=False):
    out = ffi.new("VkCommandBuffer*")
    level = vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY if secondary else vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY
    check(lib.vkAllocateCommandBuffers(self.device, new("VkCommandBufferAllocateInfo", commandPool=self.pool, level=level,
                                                        commandBufferCount=1), out), "vkAllocateCommandBuffers")
    return out[0]

  def get_desc_pool(self):
    if self.free_desc_pools: return self.free_desc_pools.pop()
    sizes = ffi.new("VkDescriptorPoolSize[1]", [{"type": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "descriptorCount": 4096}])
    out = ffi.new("VkDescriptorPool*")
    check(lib.vkCreateDescriptorPool(self.device, new("VkDescriptorPoolCreateInfo", maxSets=512, poolSizeCount=1, pPoolSizes=sizes),
                                     NULL, out), "vkCreateDescriptorPool")
    return out[0]

  # ---- recording

  def batch(self) -> Batch:
    if self.cur is None:
      self.cur = self.free.pop() if self.free else Batch(self)
      self.cur.begin(self.next_seq)
      self.next_seq += 1
    return self.cur

  def prepare(self, reads:list, writes:list) -> Batch:
    """The open batch, ready for a command that reads and writes these buffers (VulkanBuffer views). Record in a `with` block:
    a nested recording (a new pipeline's warm-up dispatch inside a launch) shares the batch, and it is submitted only after
    the outermost block ends."""
    b = self.batch()
    self.held += 1
    rr, wr = [byte_range(x) for x in reads], [byte_range(x) for x in writes]
    if self.hazards.conflict(rr, wr): self.barrier(b.cmd)
    self.hazards.add(rr, wr)
    for x in reads: x.root.last_use = b.seq
    for x in writes: x.root.last_use = b.seq
    return b

  def prepare_opaque(self, bufs:list) -> Batch:
    """The open batch, for a command whose accesses are not tracked one by one (a graph replay, which orders its own kernels):
    it is ordered after everything recorded since the last barrier, and everything after it is ordered after it."""
    b = self.batch()
    self.held += 1
    if self.hazards.dirty(): self.barrier(b.cmd)
    self.hazards.everything = True
    for x in bufs: x.root.last_use = b.seq
    return b

  def barrier(self, cmd, hazards:Hazards|None=None):
    lib.vkCmdPipelineBarrier(cmd, STAGES, STAGES, 0, 1, self.barrier_info, 0, NULL, 0, NULL)
    (hazards or self.hazards).clear()

  def recorded(self, b:Batch):
    self.held -= 1
    b.ncmds += 1
    if not self.held and (b.ncmds >= self.max_cmds or b.nqueries + 2 > QUERIES): self.flush()

  def copy(self, src, dst, size:int):
    """Queue-ordered copy between two buffers (views) of this device."""
    with self.prepare([src], [dst]) as b:
      region = ffi.new("VkBufferCopy*", {"srcOffset": src.offset, "dstOffset": dst.offset, "size": size})
      lib.vkCmdCopyBuffer(b.cmd, src.handle, dst.handle, 1, region)
    return b

  # ---- submission and completion

  def flush(self):
    if (b := self.cur) is None: return
    if self.held: raise RuntimeError("VULKAN: internal error: submitting a command buffer that is still being recorded")
    self.cur = None
    lib.vkCmdPipelineBarrier(b.cmd, STAGES, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, self.host_barrier, 0, NULL, 0, NULL)
    check(lib.vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer")
    cmds = ffi.new("VkCommandBuffer[1]", [b.cmd])
    check(lib.vkQueueSubmit(self.queue, 1, new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=cmds), b.fence[0]), "vkQueueSubmit")
    self.inflight.append(b)
    self.retire()

  def wait(self, seq:int):
    """Block until the batch `seq` (and all before it) completed."""
    if self.cur is not None and self.cur.seq <= seq: self.flush()
    while self.inflight and self.inflight[0].seq <= seq:
      check(lib.vkWaitForFences(self.device, 1, self.inflight[0].fence, 1, UINT64_MAX), "vkWaitForFences")
      self.retire()
    self.dev.check_validation()

  def synchronize(self): self.wait(self.next_seq - 1)

  def idle(self, seq:int) -> bool:
    if seq > self.done_seq: self.retire()
    return seq <= self.done_seq

  def retire(self):
    """Recycle every batch whose fence has signalled, in order, and run what waited for it."""
    while self.inflight and lib.vkGetFenceStatus(self.device, self.inflight[0].fence[0]) == 0:
      b = self.inflight.popleft()
      if b.profile: self._profile(b)
      for p in b.desc_pools: check(lib.vkResetDescriptorPool(self.device, p, 0), "vkResetDescriptorPool")
      self.free_desc_pools += b.desc_pools
      b.desc_pools, b.profile = [], []
      check(lib.vkResetFences(self.device, 1, b.fence), "vkResetFences")
      self.done_seq = b.seq
      self.free.append(b)
    while self.deferred and self.deferred[0][0] <= self.done_seq: self.deferred.popleft()[1]()

  def defer(self, seq:int, fn:Callable[[], None]):
    """Run fn once batch `seq` completed (now if it already has): frees of buffers that queued work may still use."""
    if seq <= self.done_seq: fn()
    else: self.deferred.append((seq, fn))

  def _profile(self, b:Batch):
    ts = b.read_timestamps(0, b.nqueries)
    for q, name, key in b.profile:
      st, en = (decimal.Decimal(ts[q+i]) * decimal.Decimal(self.timestamp_period) / 1000 for i in (0, 1))
      Compiled.profile_events.append(ProfileRangeEvent(self.dev.device, name, st, en, key))

  def timed_wait(self, b:Batch, t0:int|None, t1:int|None) -> float:
    """Wait for batch b; the seconds between its timestamps t0 and t1, or the wall time of the wait where the queue has none."""
    st = time.perf_counter()
    self.wait(b.seq)
    if t0 is None or t1 is None: return time.perf_counter() - st
    ts = b.read_timestamps(t0, 2)
    return ((ts[1] - ts[0]) & self.timestamp_mask) * self.timestamp_period * 1e-9

  @staticmethod
  def profiling() -> bool: return bool(PROFILE)
