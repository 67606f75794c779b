"""Buffers, views and copies.

A buffer lives in host-visible device memory when the device has such a type (lavapipe, integrated GPUs, resizable BAR) and is
copied with memcpy; otherwise in device-local memory, reached through host-visible staging buffers and queue-ordered copies.
`VULKAN_FORCE_STAGING=1` takes the second path on any driver. A host memcpy into a buffer that queued work still uses would
race with it, so such a copy goes through staging too, in queue order.
"""
from __future__ import annotations
import bisect
from tinygrad.device import LRUAllocator, BufferSpec
from tinygrad.helpers import getenv, round_up, size_to_str, suppress_finalizing
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new

USAGE = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
LOCAL, VISIBLE = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
COHERENT, CACHED = vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
CHUNK = 8 << 20   # staged copies above this are split and pipelined

class VulkanBuffer:
  """A VkBuffer with its memory, or a view (offset, size) into one. `root` holds the Vulkan objects and the last batch using it."""
  __slots__ = ("root", "offset", "size", "handle", "memory", "ptr", "cached", "last_use")
  def __init__(self, handle, memory, size:int, ptr:int|None, cached:bool):
    self.root, self.offset, self.size, self.handle, self.memory, self.ptr, self.cached, self.last_use = self, 0, size, handle, memory, ptr, cached, 0
  def view(self, size:int, offset:int) -> VulkanBuffer:
    v = VulkanBuffer.__new__(VulkanBuffer)
    v.root, v.offset, v.size, v.handle, v.memory, v.ptr, v.cached, v.last_use = self.root, self.offset + offset, size, self.handle, None, \
      self.ptr, self.cached, 0
    return v
  def addr(self) -> int: return self.ptr + self.offset

class MemoryPicker:
  """Memory type choices for each kind of buffer, best first."""
  def __init__(self, phys, force_staging:bool):
    types = phys.memory_types
    def rank(want, prefer=0, avoid=0): return [t.index for t in sorted((t for t in types if t.flags & want == want),
                                                key=lambda t: (-bin(t.flags & prefer).count("1"), bin(t.flags & avoid).count("1"), t.index))]
    self.mapped = [] if force_staging else rank(LOCAL | VISIBLE | COHERENT, prefer=CACHED)
    self.local = [t for t in rank(LOCAL, avoid=VISIBLE) if t not in self.mapped]
    self.host = rank(VISIBLE | COHERENT, prefer=CACHED, avoid=LOCAL)
    self.flags = {t.index: t.flags for t in types}

class VulkanAllocator(LRUAllocator):
  def __init__(self, dev):
    self.picker = MemoryPicker(dev.phys, bool(getenv("VULKAN_FORCE_STAGING", 0)))
    self.staging: list[tuple[int, int, VulkanBuffer]] = []   # free staging buffers, sorted by size
    self.staging_bytes, self.staging_cap = 0, getenv("VULKAN_STAGING_CACHE_MB", 256) << 20
    super().__init__(dev)

  # ---- Vulkan objects

  def create(self, size:int, candidates:list[int], mapped:bool) -> VulkanBuffer:
    """A buffer in the first memory type of `candidates` that has room; `mapped` buffers get a persistent host pointer."""
    d = self.dev
    if size > d.phys.max_buffer:
      raise MemoryError(f"VULKAN: a buffer of {size_to_str(size)} is over {d.phys.name}'s limit of {size_to_str(d.phys.max_buffer)}")
    buf = ffi.new("VkBuffer*")
    check(lib.vkCreateBuffer(d.vkdev, new("VkBufferCreateInfo", size=size, usage=USAGE, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), NULL, buf),
          "vkCreateBuffer")
    req = ffi.new("VkMemoryRequirements*")
    lib.vkGetBufferMemoryRequirements(d.vkdev, buf[0], req)
    mem, err = ffi.new("VkDeviceMemory*"), "no memory type fits"
    for ti in (t for t in candidates if req.memoryTypeBits & (1 << t)):
      res = lib.vkAllocateMemory(d.vkdev, new("VkMemoryAllocateInfo", allocationSize=req.size, memoryTypeIndex=ti), NULL, mem)
      if res == 0: break
      err = f"vkAllocateMemory: {res}"
    else:
      lib.vkDestroyBuffer(d.vkdev, buf[0], NULL)
      raise MemoryError(f"VULKAN: out of memory allocating {size_to_str(size)} on {d.phys.name} ({err})")
    check(lib.vkBindBufferMemory(d.vkdev, buf[0], mem[0], 0), "vkBindBufferMemory")
    ptr = None
    if mapped or ti in self.picker.mapped:
      p = ffi.new("void**")
      check(lib.vkMapMemory(d.vkdev, mem[0], 0, WHOLE_SIZE, 0, p), "vkMapMemory")
      ptr = int(ffi.cast("uintptr_t", p[0]))
    return VulkanBuffer(buf[0], mem[0], size, ptr, bool(self.picker.flags[ti] & CACHED))

  def destroy(self, b:VulkanBuffer):
    if self.dev.closed: return
    lib.vkDestroyBuffer(self.dev.vkdev, b.handle, NULL)
    lib.vkFreeMemory(self.dev.vkdev, b.memory, NULL)

  # ---- tinygrad Allocator hooks

  def _alloc(self, size:int, options:BufferSpec) -> VulkanBuffer:
    if options.external_ptr is not None: raise RuntimeError("VULKAN: wrapping external host memory (Tensor.from_blob) is not supported")
    size = round_up(size, 4)   # whole 32-bit words: kernels may access 8/16-bit data through words (renderer/packing.py)
    if options.host: return self.create(size, self.picker.host, mapped=True)
    return self.create(size, self.picker.mapped + self.picker.local, mapped=False)

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

  # ---- staging buffers, reused across copies

  def get_staging(self, size:int) -> VulkanBuffer:
    i = bisect.bisect_left(self.staging, (size, -1))
    if i < len(self.staging) and self.staging[i][0] <= 4 * size:
      sz, _, st = self.staging.pop(i)
      self.staging_bytes -= sz
      return st
    return self.create(round_up(size, 1 << 16), self.picker.host, mapped=True)

  def put_staging(self, st:VulkanBuffer):
    if self.staging_bytes + st.size > self.staging_cap: return self.destroy(st)
    bisect.insort(self.staging, (st.size, id(st), st))
    self.staging_bytes += st.size

  def free_cache(self):
    super().free_cache()
    for _, _, st in self.staging: self.destroy(st)
    self.staging.clear()
    self.staging_bytes = 0
