"""Buffers, views and copies.

Memory comes in large VkDeviceMemory blocks, each with one VkBuffer over all of it (mapped once when host-visible), carved up by
tinygrad's TLSF allocator, so maxMemoryAllocationCount never binds; a buffer over half the largest block gets memory of its own.
A tinygrad buffer is (block's VkBuffer, byte offset, size): hazards and `last_use` are tracked per buffer (`root`), never per block.
New memory stays within maxMemoryAllocationSize, maxMemoryAllocationCount and the heap budget (VK_EXT_memory_budget, else 80% of
the heap as VMA assumes): past them allocation raises MemoryError, on which tinygrad's LRU cache frees what it holds and retries.

A buffer lives in host-visible device memory where the device has such a type (lavapipe, integrated GPUs, resizable BAR) and is
copied with memcpy; otherwise (or with VULKAN_FORCE_STAGING=1) in device-local memory, reached through host-visible staging buffers
and queue-ordered copies. A memcpy into a buffer that queued work still uses would race with it: such a copy is staged too.

VULKAN_GUARD=1 (debugging): every buffer is followed by at least GUARD bytes of poison up to the next suballocation, and every block
starts with GUARD such bytes. Kernels bind buffers with the guard in range (drivers that bounds-check descriptors, like lavapipe,
would drop a store past the end unseen), so a read past the end gets NaN, INT_MAX or an invalid bool and a store past it changes
the guard. A changed guard raises, naming the buffer and the kernels run since the last check. A synchronisation checks the blocks'
guards and those of the buffers used since the last one (checking all would be quadratic); a free checks its buffer's. The host
reads guards through a mapping, so device buffers then live only in host-visible memory.
"""
from __future__ import annotations
import bisect
from tinygrad.device import Allocator, LRUAllocator, BufferSpec
from typing import Callable, cast
from tinygrad.helpers import round_up, size_to_str, suppress_finalizing
from tinygrad.runtime.support.memory import TLSFAllocator
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import env_number
from tinygrad_vk.queue import last

USAGE = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
USAGE_ADDRESS, ALLOCATE_ADDRESS = 0x20000, 0x2   # VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT etc.: the package maps them to None
LOCAL, VISIBLE = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
COHERENT, CACHED = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
BUDGET_EXT = "VK_EXT_memory_budget"
CHUNK = 8 << 20   # staged copies above this are split and pipelined
STAGING_STEP = 64 << 10   # staging buffers are made in multiples of this
# suballocations start at multiples of this, the largest minStorageBufferOffsetAlignment Vulkan allows: any buffer binds at its start
SUB_ALIGN = 256
# blocks of a memory type grow from the first size, doubling, up to the last (at most 1/8 of the heap, as VMA does)
BLOCK_FIRST, BLOCK_LAST = 16 << 20, 256 << 20
HEAP_SHARE = 0.8  # of a heap this process may use when the driver reports no budget
GUARD = 256       # VULKAN_GUARD: the least guard after a buffer, and the guard at the start of a block
# NaN as every float type (float16/bfloat16/float32/float64/fp8 read any aligned part of it), INT_MAX or -1 as integers, no bool
POISON = b"\xff\xff\xff\x7f" * (2 * GUARD // 4)

def guard_len(size:int) -> int: return round_up(size + GUARD, SUB_ALIGN) - size   # the bytes after a buffer up to the next suballocation

class Block:
  """One VkDeviceMemory of `nbytes` and a VkBuffer of `size` over it; `tlsf` hands out its ranges (None: one buffer's own allocation)."""
  __slots__ = ("memory", "nbytes", "handle", "size", "ptr", "host", "gpu", "heap", "pool", "tlsf", "used")
  def __init__(self, memory, nbytes:int, handle, size:int, ptr:int|None, host:int|None, gpu:int, heap:int, pool:tuple[int, bool], sub:bool):
    self.memory, self.nbytes, self.handle, self.size, self.ptr, self.gpu, self.heap, self.pool = memory, nbytes, handle, size, ptr, gpu, heap, pool
    self.host = host   # the host address of the memory: `ptr`, or a mapping only VULKAN_GUARD uses
    self.tlsf: TLSFAllocator|None = TLSFAllocator(size, block_size=SUB_ALIGN) if sub else None
    self.used = 0

class VulkanBuffer:
  """`size` bytes at byte `offset` of the VkBuffer `handle`: a buffer, or a view of one. `root` is the buffer (it holds the last
  batch using it); `ptr` and `gpu` are the host and device addresses of the VkBuffer's start (None / 0 when there are none)."""
  __slots__ = ("root", "offset", "size", "handle", "block", "ptr", "gpu", "cached", "last_use", "views")
  block: Block|None   # None for a view, and for a root once destroyed
  def __init__(self, block:Block, offset:int, size:int, cached:bool):
    self.root, self.offset, self.size, self.handle, self.block, self.ptr, self.gpu, self.cached, self.last_use = \
      self, offset, size, block.handle, block, block.ptr, block.gpu, cached, 0
    self.views: dict[tuple[int, int, int], object]|None = None   # a root's storage texel views: (start, size, words a texel) -> VkBufferView
  def view(self, size:int, offset:int) -> VulkanBuffer:
    v = VulkanBuffer.__new__(VulkanBuffer)
    v.root, v.offset, v.size, v.handle, v.block, v.ptr, v.gpu, v.cached, v.last_use = self.root, self.offset + offset, size, self.handle, \
      None, self.ptr, self.gpu, self.cached, 0
    v.views = None   # views live on the root
    return v
  def addr(self) -> int: return cast(int, self.ptr) + self.offset   # of mapped buffers only

class MemoryPicker:
  """Memory type choices for each kind of buffer, best first."""
  def __init__(self, phys, force_staging:bool, guard:bool):
    types = phys.memory_types
    def rank(want, prefer=0, avoid=0): return [t.index for t in sorted((t for t in types if t.flags & want == want),
                                                key=lambda t: (-bin(t.flags & prefer).count("1"), bin(t.flags & avoid).count("1"), t.index))]
    self.mapped = [] if force_staging else rank(LOCAL | VISIBLE | COHERENT, prefer=CACHED)
    self.local = [t for t in rank(LOCAL, avoid=VISIBLE) if t not in self.mapped]
    self.host = rank(VISIBLE | COHERENT, prefer=CACHED, avoid=LOCAL)
    # VULKAN_GUARD checks guards from the host: only memory it can map (device-local if the device has such: BAR, UMA, lavapipe)
    if guard: self.local = [t for t in self.local if t in rank(VISIBLE | COHERENT)]
    self.flags = {t.index: t.flags for t in types}

class VulkanAllocator(LRUAllocator):
  def __init__(self, dev):
    phys = dev.phys
    self.guard = bool(env_number("VULKAN_GUARD", 0))
    self.picker = MemoryPicker(phys, bool(env_number("VULKAN_FORCE_STAGING", 0)), self.guard)
    if self.guard and not self.picker.mapped + self.picker.local:
      raise RuntimeError(f"VULKAN_GUARD=1: {phys.name} has no host-visible device memory to check guards in")
    # VULKAN_GUARD: id of a buffer or block -> (the buffer, its block, guard range)
    self.guards: dict[int, tuple[VulkanBuffer, Block, int, int]] = {}
    self.block_guards: dict[int, tuple[None, Block, int, int]] = {}
    self.violations: list[str] = []   # guards found changed when their buffer was freed, raised at the next check
    if self.guard: dev.queue.ran, dev.queue.touched = [], set()
    self.staging: list[tuple[int, int, VulkanBuffer]] = []   # free staging buffers, sorted by size
    self.staging_bytes, self.staging_cap = 0, env_number("VULKAN_STAGING_CACHE_MB", 256) << 20
    self.address = "bda" in dev.caps
    self.buffer_address: Callable|None = dev.proc("vkGetBufferDeviceAddress", 12, "vkGetBufferDeviceAddressKHR") if self.address else None
    self.usage = USAGE | (USAGE_ADDRESS if self.address else 0) | (vk.VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT if "texel" in dev.caps else 0)
    self.pools: dict[tuple[int, bool], list[Block]] = {}   # (memory type, mapped) -> its blocks
    self.count, self.heap_used = 0, [0] * len(phys.heaps)  # live VkDeviceMemory objects, bytes of each heap they hold
    self.budget_ext = BUDGET_EXT in dev.extensions
    # tinygrad's LRU cache keeps freed buffers for reuse by exact size until an allocation fails: with sizes that do not recur it
    # would hold the whole heap budget (on UMA and lavapipe: host RAM) for nothing. Past this many bytes it is emptied.
    heap = phys.memory_types[(self.picker.mapped + self.picker.local)[0]].heap_size
    self.lru_bytes, self.lru_cap = 0, env_number("VULKAN_LRU_CACHE_MB", (heap // 4) >> 20) << 20
    super().__init__(dev)
  def heap_budget(self, heap:int) -> int:
    if self.budget_ext:
      b = new("VkPhysicalDeviceMemoryBudgetPropertiesEXT")
      lib.vkGetPhysicalDeviceMemoryProperties2(self.dev.phys.handle, new("VkPhysicalDeviceMemoryProperties2", pNext=b))
      return b.heapBudget[heap] - b.heapUsage[heap]
    return int(self.dev.phys.heaps[heap][0] * HEAP_SHARE) - self.heap_used[heap]
  def new_block(self, size:int, ti:int, mapped:bool, sub:bool) -> Block:
    """A VkDeviceMemory of `size` bytes in memory type ti with a VkBuffer over it; nothing is left behind when a step fails."""
    d, phys, heap = self.dev.vkdev, self.dev.phys, self.dev.phys.memory_types[ti].heap
    if size > phys.max_alloc:
      raise MemoryError(f"{size_to_str(size)} is over maxMemoryAllocationSize ({size_to_str(phys.max_alloc)})")
    if self.count >= (n := self.dev.caps.allocs): raise MemoryError(f"maxMemoryAllocationCount ({n}) reached")
    if size > (left := self.heap_budget(heap)): raise MemoryError(f"{size_to_str(size)} is over the budget left in heap {heap} ({size_to_str(left)})")
    buf, mem = ffi.new("VkBuffer*"), ffi.new("VkDeviceMemory*")
    check(lib.vkCreateBuffer(d, new("VkBufferCreateInfo", size=size, usage=self.usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), NULL, buf),
          "vkCreateBuffer")
    try:
      req = ffi.new("VkMemoryRequirements*")
      lib.vkGetBufferMemoryRequirements(d, buf[0], req)
      if not req.memoryTypeBits & (1 << ti): raise MemoryError(f"memory type {ti} cannot hold storage buffers")
      flags = new("VkMemoryAllocateFlagsInfo", flags=ALLOCATE_ADDRESS) if self.address else NULL
      check(lib.vkAllocateMemory(d, new("VkMemoryAllocateInfo", pNext=flags, allocationSize=req.size, memoryTypeIndex=ti), NULL, mem),
            "vkAllocateMemory")
      try:
        check(lib.vkBindBufferMemory(d, buf[0], mem[0], 0), "vkBindBufferMemory")
        ptr = host = None
        if mapped or self.guard:
          p = ffi.new("void**")
          check(lib.vkMapMemory(d, mem[0], 0, WHOLE_SIZE, 0, p), "vkMapMemory")
          host = int(ffi.cast("uintptr_t", p[0]))
          ptr = host if mapped else None
        gpu = self.buffer_address(d, new("VkBufferDeviceAddressInfo", buffer=buf[0])) if self.buffer_address is not None else 0
      except BaseException:
        lib.vkFreeMemory(d, mem[0], NULL)
        raise
    except BaseException:
      lib.vkDestroyBuffer(d, buf[0], NULL)
      raise
    self.count, self.heap_used[heap] = self.count + 1, self.heap_used[heap] + req.size
    blk = Block(mem[0], req.size, buf[0], size, ptr, host, gpu, heap, (ti, mapped), sub)
    if self.guard:
      if sub: assert cast(TLSFAllocator, blk.tlsf).alloc(GUARD) == 0   # the block's first bytes are its guard
      self.block_guards[id(blk)] = self.poison(None, blk, 0, GUARD)
    return blk
  def free_block(self, blk:Block):
    # the books first: an exception between the two calls leaks the memory, never frees it twice
    if blk.tlsf is not None: self.pools[blk.pool].remove(blk)
    self.count, self.heap_used[blk.heap] = self.count - 1, self.heap_used[blk.heap] - blk.nbytes
    self.block_guards.pop(id(blk), None)
    lib.vkDestroyBuffer(self.dev.vkdev, blk.handle, NULL)
    lib.vkFreeMemory(self.dev.vkdev, blk.memory, NULL)   # unmaps it too
  def block_limit(self, ti:int) -> int:
    return max(BLOCK_FIRST, min(BLOCK_LAST, self.dev.phys.memory_types[ti].heap_size // 8, self.dev.phys.max_alloc))
  def suballocate(self, size:int, ti:int, mapped:bool) -> tuple[Block, int]:
    pool, size = self.pools.setdefault((ti, mapped), []), round_up(size, SUB_ALIGN)
    for blk in pool:
      try: return blk, cast(TLSFAllocator, blk.tlsf).alloc(size)   # the blocks of a pool are suballocated
      except MemoryError: pass   # this block has no room
    # a new block: the next size up (at least the buffer's, rounded up to a power of two), smaller ones when memory is short
    bs = min(self.block_limit(ti), max(BLOCK_FIRST << len(pool), 1 << (size - 1).bit_length()))
    while True:
      try: blk = self.new_block(bs, ti, mapped, sub=True)
      except MemoryError:
        if bs // 2 < size: raise
        bs //= 2
        continue
      pool.append(blk)
      return blk, cast(TLSFAllocator, blk.tlsf).alloc(size)
  def create(self, size:int, candidates:list[int], mapped:bool) -> VulkanBuffer:
    """A buffer in the first memory type of `candidates` that has room; `mapped` buffers get a persistent host pointer."""
    phys = self.dev.phys
    if size > phys.max_buffer:
      raise MemoryError(f"VULKAN: a buffer of {size_to_str(size)} is over {phys.name}'s limit of {size_to_str(phys.max_buffer)}")
    errs = []
    for ti in candidates:
      # VULKAN_GUARD: the buffer's guard after it; a buffer of its own starts after the block's guard
      m, need, lead = mapped or ti in self.picker.mapped, size + (guard_len(size) if self.guard else 0), GUARD if self.guard else 0
      try:
        if need > self.block_limit(ti) // 2: blk, off = self.new_block(lead + need, ti, m, sub=False), lead
        else: blk, off = self.suballocate(need, ti, m)
      except MemoryError as e:
        errs.append(f"memory type {ti}: {e}")
        continue
      blk.used += 1
      b = VulkanBuffer(blk, off, size, bool(self.picker.flags[ti] & CACHED))
      if self.guard: self.guards[id(b)] = self.poison(b, blk, off + size, off + need)
      return b
    raise MemoryError(f"VULKAN: out of memory allocating {size_to_str(size)} on {phys.name} ({'; '.join(errs) or 'no memory type fits'})")
  def texel_view(self, b:VulkanBuffer, start:int, size:int, words:int=1):
    """A storage texel view of bytes [start, start + size) of root buffer b's VkBuffer, of `words` 32-bit words a texel (R32_UINT or
    R32G32B32A32_UINT, renderer/plan.py texel_slots), made once and destroyed with b: a TinyJit graph's descriptor sets keep using
    it while b lives. The plan keeps a texel slot within maxTexelBufferElements and program.pack clamps the guard's extra bytes to it."""
    if b.views is not None and (v := b.views.get((start, size, words))) is not None: return v
    out, fmt = ffi.new("VkBufferView*"), vk.VK_FORMAT_R32_UINT if words == 1 else vk.VK_FORMAT_R32G32B32A32_UINT
    check(lib.vkCreateBufferView(self.dev.vkdev, new("VkBufferViewCreateInfo", buffer=b.handle, format=fmt, offset=start, range=size), NULL, out),
          "vkCreateBufferView")
    if b.views is None: b.views = {}
    b.views[(start, size, words)] = out[0]
    return out[0]
  def destroy(self, b:VulkanBuffer):
    if self.dev.closed or (blk := b.block) is None: return
    b.block = None   # the books first: freed once, even if it is passed here again after an exception
    for v in (b.views or {}).values(): lib.vkDestroyBufferView(self.dev.vkdev, v, NULL)
    b.views = None
    if self.guard and (g := self.guards.pop(id(b), None)) is not None and (msg := self.guard_changed(*g)):
      self.violations.append(msg + " (found when it was freed)")
    blk.used -= 1
    if blk.tlsf is None: return self.free_block(blk)
    blk.tlsf.free(b.offset)
    # an empty block is kept while it is the only empty one of its pool, so a buffer freed and allocated again reuses it
    if blk.used == 0 and any(o is not blk and o.used == 0 for o in self.pools[blk.pool]): self.free_block(blk)
  def release_empty(self):
    for blk in [b for pool in self.pools.values() for b in pool if b.used == 0]: self.free_block(blk)

  @staticmethod
  def poison(b:VulkanBuffer|None, blk:Block, start:int, end:int) -> tuple:
    ffi.memmove(ffi.cast("void*", cast(int, blk.host) + start), POISON, end - start)   # VULKAN_GUARD maps every block
    return (b, blk, start, end)
  def guard_changed(self, b:VulkanBuffer|None, blk:Block, start:int, end:int) -> str|None:
    """What changed in a guard, described; None if nothing did. The pattern is restored: each change is reported once."""
    host = cast(int, blk.host)   # VULKAN_GUARD maps every block
    got = ffi.buffer(ffi.cast("char*", host + start), end - start)[:]
    if got == POISON[:end - start]: return None
    bad = [i for i in range(end - start) if got[i] != POISON[i]]
    ffi.memmove(ffi.cast("void*", host + start), POISON, end - start)
    where = (f"the guard after the buffer of {b.size} bytes at byte {b.offset} of a memory block changed {bad[0]}..{bad[-1]} bytes past its end"
             if b is not None else f"the guard at the start of a memory block changed at bytes {bad[0]}..{bad[-1]}")
    return f"{where} ({len(bad)} bytes changed, now {got[bad[0]:bad[-1]+1][:16].hex()})"
  def check_guards(self, kernels:list[str], touched:set, done_seq:int):
    """Raise if the guard of a block or of a buffer in `touched` changed. `kernels` are those that ran since the last check, and
    are then forgotten, as are the buffers no queued work uses any more."""
    gs = [*self.block_guards.values(), *(g for r in touched if (g := self.guards.get(id(r))) is not None and g[0] is r)]
    touched.difference_update([r for r in touched if r.last_use <= done_seq])
    bad, self.violations = self.violations + [m for g in gs if (m := self.guard_changed(*g))], []
    if not bad: return
    names = last(kernels, 16)
    kernels.clear()
    raise RuntimeError(f"VULKAN_GUARD: memory outside a buffer was written on {self.dev.device}: " + "; ".join(bad[:8]) +
                       (f" (and {len(bad) - 8} more)" if len(bad) > 8 else "") + f". Kernels run since the last check: {names}")

  def alloc(self, size:int, options:BufferSpec|None=None):
    self.dev.queue.check_usable()   # a lost device raises its own error, not tinygrad's "Allocation failed"
    if self.cache.get((size, options)): self.lru_bytes -= size   # taken from the cache
    return super().alloc(size, options)
  def free(self, opaque, size:int, options:BufferSpec|None=None):
    n = len(self.cache.get((size, options), ()))
    super().free(opaque, size, options)
    if len(self.cache.get((size, options), ())) == n: return   # not cached (nolru, LRU=0): freed already
    self.lru_bytes += size
    if self.lru_bytes > self.lru_cap: self.free_lru()
  def _alloc(self, size:int, options:BufferSpec) -> VulkanBuffer:
    if options.external_ptr is not None: raise RuntimeError("VULKAN: wrapping external host memory (Tensor.from_blob) is not supported")
    size = round_up(size, 4)   # whole 32-bit words: kernels may access 8/16-bit data through words (renderer/passes/packing.py)
    types, mapped = (self.picker.host, True) if options.host else (self.picker.mapped + self.picker.local, False)
    try: return self.create(size, types, mapped)
    except MemoryError:
      # frees wait for the queued work that may still use the buffers: let them happen, then try once more
      self.dev.queue.synchronize()
      self.release_empty()
      return self.create(size, types, mapped)
  @suppress_finalizing
  def _free(self, b:VulkanBuffer, options:BufferSpec):
    if not self.dev.closed: self.dev.queue.defer(b.last_use, lambda: self.destroy(b))
  def _offset(self, b:VulkanBuffer, size:int, offset:int) -> VulkanBuffer: return b.view(size, offset)
  def _copyin(self, dest:VulkanBuffer, src:memoryview):
    src = src.cast("B") if src.format != "B" or src.ndim != 1 else src
    q = self.dev.queue
    if dest.ptr is not None and q.idle(dest.root.last_use):
      ffi.memmove(ffi.cast("void*", dest.addr()), src, len(src))
      return
    # staged: the source may be freed as soon as we return, so it is copied into staging buffers now. Big copies go in chunks,
    # each submitted at once, so the device copies one chunk while the host fills the next.
    for off in range(0, len(src), CHUNK):
      n = min(CHUNK, len(src) - off)
      st = self.get_staging(n)
      ffi.memmove(ffi.cast("void*", st.addr()), src[off:off+n], n)
      b = q.copy(st.view(n, 0), dest.view(n, off), n)
      q.defer(b.seq, lambda st=st: self.put_staging(st))
      if len(src) > CHUNK: q.flush()
  def _copyout(self, dest:memoryview, src:VulkanBuffer):
    dest = dest.cast("B") if dest.format != "B" or dest.ndim != 1 else dest
    q = self.dev.queue
    if src.ptr is not None and src.cached:
      q.wait(src.root.last_use)
      ffi.memmove(dest, ffi.cast("void*", src.addr()), len(dest))
      return
    # the device copies chunk k+1 into staging while the host copies chunk k out
    chunks = []
    for off in range(0, len(dest), CHUNK):
      n = min(CHUNK, len(dest) - off)
      st = self.get_staging(n)
      chunks.append((off, n, st, q.copy(src.view(n, off), st.view(n, 0), n).seq))
      if len(dest) > CHUNK: q.flush()
    for off, n, st, seq in chunks:
      q.wait(seq)
      ffi.memmove(dest[off:off+n], ffi.cast("void*", st.addr()), n)
      self.put_staging(st)
  def _transfer(self, dest:VulkanBuffer, src:VulkanBuffer, sz:int, src_dev, dest_dev):
    if src_dev is dest_dev:
      src_dev.queue.copy(src.view(sz, 0), dest.view(sz, 0), sz)
      return
    # two VkDevices share no memory: through the host
    if src.ptr is not None and src.cached:
      src_dev.queue.wait(src.root.last_use)
      self._copyin(dest, memoryview(ffi.buffer(ffi.cast("char*", src.addr()), sz)))
    else:
      tmp = memoryview(bytearray(sz))
      src_dev.allocator._copyout(tmp, src)
      self._copyin(dest, tmp)
  def get_staging(self, size:int) -> VulkanBuffer:
    """A free staging buffer up to 4x the size a copy needs, or a new one."""
    self.dev.queue.check_usable()   # the first thing a staged copy does: a lost device raises before any Vulkan call
    i, size = bisect.bisect_left(self.staging, (size, -1)), round_up(size, STAGING_STEP)
    if i < len(self.staging) and self.staging[i][0] <= 4 * size:
      sz, _, st = self.staging.pop(i)
      self.staging_bytes -= sz
      return st
    return self.create(size, self.picker.host, mapped=True)
  def put_staging(self, st:VulkanBuffer):
    if self.staging_bytes + st.size > self.staging_cap: return self.destroy(st)
    bisect.insort(self.staging, (st.size, id(st), st))
    self.staging_bytes += st.size
  def free_lru(self):
    # each buffer leaves tinygrad's cache before it is freed (LRUAllocator.free_cache empties the lists after): an exception in
    # between must not leave a freed buffer there to be handed out again
    for (sz, options), opaques in self.cache.items():
      while opaques: Allocator.free(self, opaques.pop(), sz, options)
    self.lru_bytes = 0
  def free_cache(self):
    self.free_lru()
    while self.staging:   # popped before destroyed, as above
      sz, _, st = self.staging.pop()
      self.staging_bytes -= sz
      self.destroy(st)
    self.release_empty()
