"""Recording, barriers, submission and retirement on one VkQueue.

Work is recorded into an open command buffer (a `Batch`) and submitted with a fence on `synchronize()`, a read back, or once the
batch holds `VULKAN_BATCH` commands. `Hazards` records a barrier only where a command depends on an earlier one.

Faults. Every queue operation holds the queue's lock. While the main thread holds it, SIGINT is held back until the outermost
release (`Interrupts`); fence waits return to Python every 100 ms so an interrupt is still taken at once. Otherwise (a handler
installed later, another signal or thread) an exception may come right after any Vulkan call, before the bookkeeping after it, so
every step is safe to redo or finds out what happened: a batch is reset before it is begun again, retirement only moves batches
between lists, and an interrupted submission is settled by the batch's fence once the queue is idle (`settle`). A failed submit,
VK_ERROR_DEVICE_LOST, a fence not signalled within VULKAN_TIMEOUT_S, and os.fork() (a child inherits no driver threads) make the
queue lost: every later call raises the same `DeviceLost`, naming the device and the last kernels of the lost batches.
"""
from __future__ import annotations
import collections, decimal, gc, os, signal, sys, threading, time, weakref
from typing import Callable, TYPE_CHECKING, cast
from tinygrad.helpers import PROFILE, ProfileRangeEvent, suppress_finalizing
from tinygrad.device import Compiled
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new, result_name, VulkanError, ERROR_OUT_OF_POOL_MEMORY, ERROR_FRAGMENTED_POOL
if TYPE_CHECKING: from tinygrad_vk.device import VulkanDevice

STAGES = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
WRITES = vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
QUERIES = 256               # timestamp slots per batch: a batch is flushed when they run out
MAX_INFLIGHT = 16           # submitted batches the host may run ahead of the device by: each holds a command buffer and pools
WAIT_SLICE_NS = 100_000_000
FORKED = ("a forked child cannot use it (a Vulkan driver does not survive fork). Open Vulkan devices in the child only, e.g. with "
          "multiprocessing's 'spawn' start method")

class DeviceLost(VulkanError):
  """The device can no longer be used; every later call on it raises this again."""

def last(names:list[str], n:int) -> str: return ", ".join(names[-n:]) + (f" (after {len(names) - n} more)" if len(names) > n else "") or "none"
def byte_range(x) -> tuple[int, int, int]: return (id(x.root), x.offset, x.offset + x.size)

_BARRIER = new("VkMemoryBarrier", srcAccessMask=WRITES, dstAccessMask=WRITES | vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT)
_HOST_BARRIER = new("VkMemoryBarrier", srcAccessMask=WRITES, dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
_BEGIN = new("VkCommandBufferBeginInfo", flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)

class Hazards:
  """Byte ranges read and written since the last barrier of one command stream, per root buffer (tinygrad's DepsTracker logic): a
  command gets a barrier only if it touches a range written since, or writes a range read since. `everything` after a command
  whose accesses are not tracked (a graph replay). The queue's ranges survive submission: a barrier also orders against earlier
  submissions on the same queue."""
  def __init__(self):
    self.reads: dict[int, list[tuple[int, int]]] = {}
    self.writes: dict[int, list[tuple[int, int]]] = {}
    self.everything = False
  @staticmethod
  def _hit(table, k, s, e) -> bool: return any(st < e and s < en for st, en in table.get(k, ()))
  def order(self, cmd, reads:list, writes:list):
    rr, wr = [byte_range(x) for x in reads], [byte_range(x) for x in writes]
    if self.everything or any(self._hit(self.writes, *r) for r in rr + wr) or any(self._hit(self.reads, *w) for w in wr): self.barrier(cmd)
    for table, rs in ((self.reads, rr), (self.writes, wr)):
      for k, s, e in rs: table.setdefault(k, []).append((s, e))
  def order_all(self, cmd):
    if self.everything or self.reads or self.writes: self.barrier(cmd)
    self.everything = True
  def barrier(self, cmd):
    record_barrier(cmd)
    self.reads, self.writes, self.everything = {}, {}, False

# also between the dispatches of one launch (split along x, or the pieces of a windowed one): they write disjoint bytes, which needs
# no barrier, but synchronisation validation (layer 1.4, reading the SPIR-V) takes each to write its whole binding and reports a
# write-after-write hazard. Each part is large (maxComputeWorkGroupCount workgroups, or a window's reach), so the wait costs little.
def record_barrier(cmd): lib.vkCmdPipelineBarrier(cmd, STAGES, STAGES, 0, 1, _BARRIER, 0, NULL, 0, NULL)

def descriptor_pool(vkdev, sets:int, descriptors:int):
  """Room for `descriptors` of each kind a kernel binds: storage buffers and storage texel buffers (renderer/plan.py texel_slots)."""
  sizes = ffi.new("VkDescriptorPoolSize[2]", [{"type": t, "descriptorCount": descriptors}
                                              for t in (vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER)])
  out = ffi.new("VkDescriptorPool*")
  check(lib.vkCreateDescriptorPool(vkdev, new("VkDescriptorPoolCreateInfo", maxSets=sets, poolSizeCount=2, pPoolSizes=sizes), NULL, out),
        "vkCreateDescriptorPool")
  return out[0]

def record_copy(cmd, src, dst, size:int):
  lib.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1, ffi.new("VkBufferCopy*", {"srcOffset": src.offset, "dstOffset": dst.offset, "size": size}))

def timestamp_pool(vkdev, count:int):
  out = ffi.new("VkQueryPool*")
  check(lib.vkCreateQueryPool(vkdev, new("VkQueryPoolCreateInfo", queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=count), NULL, out),
        "vkCreateQueryPool")
  return out[0]

def read_timestamps(q:CommandQueue, pool, first:int, count:int) -> list[int]:
  out = ffi.new("uint64_t[]", count)
  check(lib.vkGetQueryPoolResults(q.vkdev, pool, first, count, ffi.sizeof(out), out, 8, vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults")
  return [v & q.timestamp_mask for v in out]

class Batch:
  """An open command buffer. Used as `with q.prepare(...) as b:`, the queue never submits it while the block records into it."""
  def __init__(self, q:CommandQueue):
    self.q, self.cmd, self.seq, self.ncmds, self.nqueries = q, q.new_command_buffer(), 0, 0, 0
    self.ending = False                  # vkEndCommandBuffer called
    self.ended: list[int] = []           # its result (see CommandQueue.end)
    self.fence = ffi.new("VkFence*")
    check(lib.vkCreateFence(q.vkdev, new("VkFenceCreateInfo"), NULL, self.fence), "vkCreateFence")
    self.query_pool = timestamp_pool(q.vkdev, QUERIES)
    self.desc_pools: list = []   # this batch's own, reused when it is begun again: a pool never belongs to two batches
    self.pool_at = 0             # the pool sets are taken from
    self.profile: list[tuple[int, str, bytes|None]] = []   # (first query, kernel name, profile key)
    self.names: list[str] = []                              # kernels launched, named if the batch is lost
    self.cmds = ffi.new("VkCommandBuffer[1]", [self.cmd])   # cffi does not keep a struct field's pointee alive: named here
    self.submit_info = new("VkSubmitInfo", commandBufferCount=1, pCommandBuffers=self.cmds)
    # reused for every descriptor set allocation: this is on the launch path
    self.set_layout, self.set_out = ffi.new("VkDescriptorSetLayout[1]"), ffi.new("VkDescriptorSet[1]")
    self.set_info = new("VkDescriptorSetAllocateInfo", descriptorSetCount=1, pSetLayouts=self.set_layout)
  def __enter__(self) -> Batch: return self
  def __exit__(self, *exc): self.q.recorded(self)
  def begin(self, seq:int):
    """Reset what the last use left (all idempotent, so a begin that an exception cut short is simply redone), then begin."""
    check(lib.vkResetCommandBuffer(self.cmd, 0), "vkResetCommandBuffer")
    check(lib.vkResetFences(self.q.vkdev, 1, self.fence), "vkResetFences")
    for p in self.desc_pools: check(lib.vkResetDescriptorPool(self.q.vkdev, p, 0), "vkResetDescriptorPool")
    self.pool_at, self.profile = 0, []
    check(lib.vkBeginCommandBuffer(self.cmd, _BEGIN), "vkBeginCommandBuffer")
    lib.vkCmdResetQueryPool(self.cmd, self.query_pool, 0, QUERIES)
    self.seq, self.ncmds, self.nqueries, self.ending, self.ended = seq, 0, 0, False, []
    self.names.clear()
  def alloc_set(self, layout) -> object:
    """A descriptor set that lives until this batch retires; a new pool when the current one runs out."""
    self.set_layout[0] = layout
    while True:
      if fresh := self.pool_at == len(self.desc_pools): self.desc_pools.append(self.q.new_desc_pool())
      self.set_info.descriptorPool = self.desc_pools[self.pool_at]
      res = lib.vkAllocateDescriptorSets(self.q.vkdev, self.set_info, self.set_out)
      if res == 0: return self.set_out[0]
      if fresh or res not in (ERROR_OUT_OF_POOL_MEMORY, ERROR_FRAGMENTED_POOL): check(res, "vkAllocateDescriptorSets")
      self.pool_at += 1
  def timestamp(self) -> int|None:
    """Record a timestamp after all earlier commands complete; None when the queue has no timestamps or the batch is full."""
    if not self.q.timestamp_bits or self.nqueries >= QUERIES: return None
    lib.vkCmdWriteTimestamp(self.cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.query_pool, self.nqueries)
    self.nqueries += 1
    return self.nqueries - 1

class CommandQueue:
  def __init__(self, dev:VulkanDevice, vkdev, vkqueue, family:int, timestamp_bits:int, timestamp_period:float, max_cmds:int, timeout_s:float):
    self.dev, self.vkdev, self.vkqueue, self.max_cmds, self.timeout_s = dev, vkdev, vkqueue, max_cmds, timeout_s
    self.timestamp_bits, self.timestamp_period, self.timestamp_mask = timestamp_bits, timestamp_period, (1 << min(timestamp_bits, 64)) - 1
    pool = ffi.new("VkCommandPool*")
    check(lib.vkCreateCommandPool(vkdev, new("VkCommandPoolCreateInfo", queueFamilyIndex=family,
                                             flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), NULL, pool), "vkCreateCommandPool")
    self.pool = pool[0]
    self.cur: Batch|None = None
    self.inflight: collections.deque[Batch] = collections.deque()
    self.free: list[Batch] = []
    self.doubt: Batch|None = None   # a batch whose vkQueueSubmit an exception interrupted: settle() finds out whether it ran
    self.next_seq, self.done_seq = 1, 0
    self.held = 0   # open `with q.prepare(...)` blocks: the batch they record into must not be submitted under them
    self.hazards = Hazards()
    self.deferred: collections.deque[tuple[int, Callable[[], object]]] = collections.deque()
    self.lock = threading.RLock()
    self.lost: str|None = None   # why the device is lost: checked by every call
    self.waiting = False         # in a fence wait, where SIGINT is taken at once
    # VULKAN_GUARD (set by the allocator): kernels completed and buffers used since the last guard check
    self.ran: list[str]|None = None
    self.touched: set|None = None
    interrupts.watch(self)
  def __enter__(self) -> CommandQueue:
    self.lock.acquire()
    return self
  def __exit__(self, *exc): self._release()
  def _release(self):
    self.lock.release()
    if interrupts.pending is not None: interrupts.deliver()
  def check_usable(self):
    if self.lost is not None: raise DeviceLost(self.lost)
  def lose(self, reason:str):
    names = [n for b in [*self.inflight, *(b for b in (self.doubt, self.cur) if b is not None)] for n in b.names]
    self.lost = (f"{self.dev.device} ({self.dev.phys.name}) is lost: {reason}. Last kernels submitted: {last(names, 8)}. "
                 f"Every later use of {self.dev.device} raises this error; restart the process")
    raise DeviceLost(self.lost)
  def new_command_buffer(self, secondary=False):
    out = ffi.new("VkCommandBuffer*")
    level = vk.VK_COMMAND_BUFFER_LEVEL_SECONDARY if secondary else vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY
    check(lib.vkAllocateCommandBuffers(self.vkdev, new("VkCommandBufferAllocateInfo", commandPool=self.pool, level=level,
                                                       commandBufferCount=1), out), "vkAllocateCommandBuffers")
    return out[0]
  def new_desc_pool(self): return descriptor_pool(self.vkdev, 512, 4096)

  # ---- recording
  def batch(self) -> Batch:
    """The open batch; a new one is begun if there is none. The caller holds the lock."""
    if self.doubt is not None: self.settle()
    if self.cur is not None and self.cur.ending: self.flush()   # closed by a flush that an exception cut short: it goes first
    if (b := self.cur) is None:
      b = self.free.pop() if self.free else Batch(self)
      # the number is taken first: an exception after it leaves a number no batch has, never one that two batches have
      seq, self.next_seq = self.next_seq, self.next_seq + 1
      try: b.begin(seq)
      except BaseException:
        self.free.append(b)
        raise
      self.cur = b
    return b
  def prepare(self, reads:list, writes:list, opaque=False) -> Batch:
    """The open batch, ready for a command that reads and writes these buffers (VulkanBuffer views), with the queue's lock held
    until the `with` block ends. A nested recording (a new pipeline's warm-up dispatch inside a launch) shares the batch, and it
    is submitted only after the outermost block ends. `opaque`: the command's accesses are not tracked one by one."""
    self.lock.acquire()
    try:
      self.check_usable()
      b = self.batch()
      if opaque: self.hazards.order_all(b.cmd)
      else: self.hazards.order(b.cmd, reads, writes)
      for x in (bufs := reads + writes): x.root.last_use = b.seq
      if self.touched is not None: self.touched.update(x.root for x in bufs)
    except BaseException:
      self._release()
      raise
    self.held += 1
    return b
  def prepare_opaque(self, bufs:list) -> Batch: return self.prepare(bufs, [], opaque=True)   # a graph replay orders its own kernels
  def recorded(self, b:Batch):
    try:
      self.held -= 1
      b.ncmds += 1
      if not self.held and (b.ncmds >= self.max_cmds or b.nqueries + 2 > QUERIES): self.flush()
    finally: self._release()
  def copy(self, src, dst, size:int) -> Batch:
    with self.prepare([src], [dst]) as b: record_copy(b.cmd, src, dst, size)
    return b

  # ---- submission and completion
  def flush(self):
    with self:
      self.settle()
      if (b := self.cur) is None: return
      if self.held: raise RuntimeError("VULKAN: internal error: submitting a command buffer that is still being recorded")
      self.check_usable()
      self.end(b)
      self.doubt, self.cur = b, None   # until the batch is in flight: after an exception, settle() finds out whether the submit ran
      if (res := lib.vkQueueSubmit(self.vkqueue, 1, b.submit_info, b.fence[0])) != 0: self.lose(f"vkQueueSubmit failed: {result_name(res)}")
      self.inflight.append(b)
      self.doubt = None
      self.retire()
      while len(self.inflight) > MAX_INFLIGHT: self._wait_fence(self.inflight[0])
  def end(self, b:Batch):
    """Close a batch for submission. vkEndCommandBuffer cannot be called twice, and no Vulkan call tells whether it ran: list.extend
    over map() makes the call and stores its result in one step of C code, where no Python signal handler can run. An exception
    out of the call itself (a Python hook in the tests) leaves it unknown, and the device is lost."""
    if not b.ended:
      if b.ending: self.lose("an exception interrupted vkEndCommandBuffer, so whether the commands recorded since the last submission "
                             "can be submitted is unknown")
      # recorded twice if an exception comes right after it: a second barrier changes nothing
      lib.vkCmdPipelineBarrier(b.cmd, STAGES, vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, _HOST_BARRIER, 0, NULL, 0, NULL)
      call = map(lib.vkEndCommandBuffer, b.cmds)
      b.ending = True
      b.ended.extend(call)
    if b.ended[0] != 0: self.lose(f"vkEndCommandBuffer failed: {result_name(b.ended[0])}")
  def settle(self):
    """Whether an interrupted submission happened: its fence was unsignalled before it, so once the queue is idle a signalled fence
    says it ran (it joins the batches in flight), an unsignalled one that it did not (it is open again, and the next flush submits
    it). Redone from the start if an exception cuts it short."""
    if (b := self.doubt) is None: return
    if b.seq > self.done_seq and b not in self.inflight:
      if (res := lib.vkQueueWaitIdle(self.vkqueue)) != 0: self.lose(f"vkQueueWaitIdle failed: {result_name(res)}")
      if (res := lib.vkGetFenceStatus(self.vkdev, b.fence[0])) == 0: self.inflight.append(b)
      elif res == vk.VK_NOT_READY: self.cur = b
      else: self.lose(f"vkGetFenceStatus failed: {result_name(res)}")
    self.doubt = None
  def wait(self, seq:int):
    """Block until the batch `seq` (and all before it) completed."""
    with self:
      self.check_usable()
      self.settle()
      if self.cur is not None and self.cur.seq <= seq: self.flush()
      while self.inflight and self.inflight[0].seq <= seq: self._wait_fence(self.inflight[0])
      if self.ran is not None: self.dev.allocator.check_guards(self.ran, cast(set, self.touched), self.done_seq)   # both set by VULKAN_GUARD
    self.dev.check_validation()
  def _wait_fence(self, b:Batch):
    """Wait for b's fence in slices, so SIGINT is taken during a long wait, then retire."""
    deadline = time.monotonic() + self.timeout_s
    while True:
      try:
        self.waiting = True
        res = lib.vkWaitForFences(self.vkdev, 1, b.fence, 1, WAIT_SLICE_NS)
      finally: self.waiting = False
      if res == 0: return self.retire()
      if res != vk.VK_TIMEOUT: self.lose(f"vkWaitForFences failed: {result_name(res)}")
      if time.monotonic() >= deadline: self.lose(f"a command buffer did not complete within VULKAN_TIMEOUT_S={self.timeout_s:g} seconds")
  def synchronize(self): self.wait(self.next_seq - 1)
  def idle(self, seq:int) -> bool:
    self.check_usable()
    if seq > self.done_seq:
      with self: self.retire()
    return seq <= self.done_seq
  def retire(self):
    """Recycle every batch whose fence has signalled, in order, and run what waited for it. The caller holds the lock. Only
    bookkeeping, in an order where an exception anywhere leaves at worst a batch that is never reused: Batch.begin resets it."""
    while self.inflight:
      b = self.inflight[0]
      if (res := lib.vkGetFenceStatus(self.vkdev, b.fence[0])) == vk.VK_NOT_READY: break
      if res != 0: self.lose(f"vkGetFenceStatus failed: {result_name(res)}")
      self.done_seq = b.seq
      self.inflight.popleft()
      if self.ran is not None: self.ran += b.names
      profile, b.profile = b.profile, []
      self.free.append(b)
      if profile: self._profile(b, profile)
    # popped before it runs: an exception in between leaks what fn frees rather than freeing it twice
    while self.deferred and self.deferred[0][0] <= self.done_seq: self.deferred.popleft()[1]()
  def defer(self, seq:int, fn:Callable[[], object]):
    """Run fn once batch `seq` completed (now if it already has): frees of objects that queued work may still use. A lost device
    runs nothing more (left to process exit). Finalizers call this from any thread, even inside another device's lock: when another
    thread holds this queue, fn joins the list that the next retire() runs instead of waiting."""
    if self.lost is not None: return
    if seq <= self.done_seq and self.lock.acquire(blocking=False):
      try: fn()
      finally: self.lock.release()
    else: self.deferred.append((seq, fn))
  def _profile(self, b:Batch, profile:list):
    ts = read_timestamps(self, b.query_pool, 0, b.nqueries)
    for q, name, key in profile:
      st, en = (decimal.Decimal(ts[q+i]) * decimal.Decimal(self.timestamp_period) / 1000 for i in (0, 1))
      Compiled.profile_events.append(ProfileRangeEvent(self.dev.device, name, st, en, key))
  def timed_wait(self, b:Batch, t0:int|None, t1:int|None) -> float:
    """Wait for batch b; the seconds between its timestamps t0 and t1, or the wall time of the wait where the queue has none."""
    st = time.perf_counter()
    self.wait(b.seq)
    if t0 is None or t1 is None: return time.perf_counter() - st
    ts = read_timestamps(self, b.query_pool, t0, 2)
    return ((ts[1] - ts[0]) & self.timestamp_mask) * self.timestamp_period * 1e-9
  @staticmethod
  def profiling() -> bool: return bool(PROFILE)

class Interrupts:
  """Delivers SIGINT only where it cannot be lost. Installed over Python's own handler (not over one the program installed) by the
  first queue created in the main thread (Python runs signal handlers in the main thread only). Held back while the main thread
  holds a queue's lock outside a fence wait, and delivered when the outermost lock is released. Held back too inside a finalizer
  (a `__del__`, tinygrad's suppress_finalizing wrapper of one, a weakref.finalize, anything the garbage collector runs), where
  Python would print the KeyboardInterrupt as "Exception ignored" and carry on: a SIGINT the main thread is sent 10 ms later
  delivers it, or waits again. One that lands in a finalizer no frame shows (a plain weakref callback) reaches sys.unraisablehook,
  which sends it again the same way. Presses while one is held back are one interrupt. A handler installed later replaces this
  one: interrupts then land anywhere, which every step survives."""
  def __init__(self):
    self.queues: list[CommandQueue] = []
    self.prev: Callable|None = None
    self.pending: tuple|None = None
    self.resent = False                  # the next SIGINT is the one resend() sent
    self.timer: threading.Timer|None = None
    self.collecting = False              # the garbage collector runs in the main thread
    self.unraisable = sys.unraisablehook  # the hook before ours
  def watch(self, q:CommandQueue):
    self.queues.append(q)
    if self.prev is None and threading.current_thread() is threading.main_thread() and \
       signal.getsignal(signal.SIGINT) is signal.default_int_handler:
      self.prev = signal.default_int_handler
      signal.signal(signal.SIGINT, self.handle)
      gc.callbacks.append(self._gc)
      self.unraisable, sys.unraisablehook = sys.unraisablehook, self._unraisable   # a KeyboardInterrupt Python dropped: again
  def _gc(self, phase, info): self.collecting = phase == "start" and threading.current_thread() is threading.main_thread()
  def _unraisable(self, u):
    if not isinstance(u.exc_value, KeyboardInterrupt) or self.prev is None: return self.unraisable(u)
    self.pending = self.pending or (signal.SIGINT, None)
    self._resend_soon()
  # typeshed's RLock leaves out _is_owned, which CPython's RLocks (C and Python) have
  def _held(self) -> bool: return any(q.lock._is_owned() and not q.waiting for q in self.queues)  # type: ignore[attr-defined]
  def _finalizing(self, frame) -> bool:
    while frame is not None:
      if frame.f_code.co_name == "__del__" or frame.f_code in _FINALIZERS: return True
      frame = frame.f_back
    return self.collecting
  def handle(self, signum, frame):
    resent, self.resent = self.resent, False
    if resent and self.pending is None: return   # delivered since it was sent
    self.pending = (signum, frame)
    self.deliver(frame)
  def deliver(self, frame=None):
    if self.pending is None or self.prev is None or self._held(): return
    if self._finalizing(frame or sys._getframe(1)): return self._resend_soon()
    args, self.pending = self.pending, None
    self.prev(*args)
  def _resend_soon(self):
    if self.timer is None:
      self.timer = threading.Timer(0.01, self.resend)
      self.timer.daemon = True
      self.timer.start()
  def resend(self):
    self.timer = None
    if self.pending is not None and signal.getsignal(signal.SIGINT) == self.handle:
      self.resent = True
      signal.pthread_kill(cast(int, threading.main_thread().ident), signal.SIGINT)   # a real signal: it also ends a blocking call
  def forked(self):
    """In a forked child the driver's threads did not come along: every device of the parent is lost."""
    self.pending, self.timer, self.resent = None, None, False
    for q in self.queues:
      q.lock = threading.RLock()   # the parent's may have been held by a thread that does not exist here
      if q.lost is None: q.lost = f"{q.dev.device} was opened before os.fork(): {FORKED}"

# code that only finalizers run: weakref.finalize's call, tinygrad's wrapper of a __del__ (every wrapper shares one code object)
_FINALIZERS = (weakref.finalize.__call__.__code__, suppress_finalizing(lambda: None).__code__)
interrupts = Interrupts()
os.register_at_fork(after_in_child=interrupts.forked)
