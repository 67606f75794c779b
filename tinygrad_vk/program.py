"""A compiled kernel: shader module and compute pipeline built once, then bound and dispatched per call."""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING, cast
from dataclasses import dataclass
from tinygrad.device import Program, TinyELF, BufferSpec
from tinygrad.helpers import prod, round_up, suppress_finalizing
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import Caps, MAX_GROUPS_X, VEC_ALIGN
from tinygrad_vk.spv import KernelMeta, rebind
from tinygrad_vk.renderer.abi import ADDR_ALIGN, numel
from tinygrad_vk.memory import guard_len, VulkanBuffer
if TYPE_CHECKING: from tinygrad_vk.device import VulkanDevice

PIPELINE_CREATE_DISPATCH_BASE_BIT = 0x10   # core in Vulkan 1.1, missing from the `vulkan` package (its KHR alias is None)
# a window starts at a multiple of this and of minStorageBufferOffsetAlignment: a slot's element offset inside it is then as
# aligned as the view itself (the widest vector alias, dvec4, is 32 bytes)
WINDOW_ALIGN = 32
GATHER_SPEC = BufferSpec()

def descriptor_writes(n:int, texel:frozenset[int], infos, views):
  """The writes of n descriptors: storage buffers from `infos`, the `texel` bindings storage texel buffers from `views`
  (one write for all when there are none, else one per binding)."""
  if not texel: return ffi.new("VkWriteDescriptorSet[1]", [{"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "descriptorCount": n,
                                                           "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "pBufferInfo": infos}])
  return ffi.new("VkWriteDescriptorSet[]", [{"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": i, "descriptorCount": 1,
    "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER if i in texel else vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
    "pBufferInfo": infos + i, "pTexelBufferView": views + i} for i in range(n)])

@dataclass
class Windows:
  """Where the slots of a windowed kernel are for one launch (renderer/abi.py): descriptor k is `spans[k]` (VkBuffer, offset,
  range), shader binding j is window `of[j]`, slot i lies at element `offsets[i]` of its window (of a split slot: of its first),
  after the `copies` (source view, scratch view) that gather the slots left over into `scratch`, which the caller frees once the
  launch is recorded."""
  spans: list[tuple[object, int, int]]
  of: tuple[int, ...]
  offsets: dict[int, int]
  copies: list[tuple[VulkanBuffer, VulkanBuffer]]
  scratch: VulkanBuffer|None = None
  size: int = 0
  @property
  def scratches(self) -> list[VulkanBuffer]: return [] if self.scratch is None else [self.scratch]
  def free(self, allocator):
    """Give the scratch back (tinygrad's cache, or freed once the queue is done with it): a later use is queue-ordered after."""
    if self.scratch is not None:
      allocator.free(self.scratch, self.size, GATHER_SPEC)
      self.scratch = None

@dataclass
class Realigned:
  """A launch's buffers with the views of slots reached in words that start inside a word (renderer/abi.py WORD_VIEW) replaced by
  scratch buffers: `before` (view, scratch) copied in before the launch, `after` (scratch, view) copied out after it."""
  bufs: list
  before: list[tuple[VulkanBuffer, VulkanBuffer]]
  after: list[tuple[VulkanBuffer, VulkanBuffer]]
  scratches: list[tuple[VulkanBuffer, int]]
  def free(self, allocator):
    """Give the scratches back, as Windows.free does."""
    for s, n in self.scratches: allocator.free(s, n, GATHER_SPEC)
    self.scratches = []

class VulkanProgram(Program["VulkanDevice"]):
  # no VkPipelineCache: measured on lavapipe, the driver's own shader cache already makes a second run's first dispatch ~8x
  # cheaper, and a VkPipelineCache (in memory or persisted) changed nothing
  def __init__(self, dev:VulkanDevice, obj:TinyELF):
    self.dev, self.name, self.profile_key, self.pipelines, self.guard, caps = dev, obj.name, obj.profile_key, {}, dev.allocator.guard, dev.caps
    dev.queue.check_usable()
    sig = [s for s in obj.signature if s[0] is None]
    # the buffers tinygrad passes are those of these slots: a buffer whose accesses were all folded away has none (its binding
    # then points at a scratch buffer: the shader declares no variable for it)
    slot_info = {s[1]: (s[2].itemsize, numel(s[3])) for s in sig}
    self.slots = sorted(slot_info)
    abi_bufs = [slot_info.get(i, (1, 0)) for i in range(max(slot_info, default=-1) + 1)]
    self.itemsize = [isz for isz, _ in abi_bufs]
    try: self.meta = meta = KernelMeta.decode(obj.lib)
    except ValueError as e: raise RuntimeError(f"VULKAN: the SPIR-V of {self.name} is malformed: {e}") from None
    self.local_size, self.reach, self.split_slots, self.words, self.texel = meta.local, meta.reach, meta.split, meta.words, meta.texel
    # the ABI the kernel was rendered with: the Caps it was compiled for decide which buffers are passed by address
    self.abi = abi = meta.abi(Caps.decode(obj.target.arch), abi_bufs, [s[2] for s in obj.signature[len(sig):]])
    # the scalars (symbolic shape variables) after the buffer offsets and addresses: (byte offset in the push constants, struct format)
    self.scalar_fields = [(off, cast(str, dt.fmt)) for off, dt in abi.vars]   # tinygrad's variables are ints: each has a format
    self.pc_size, self.ndesc, self.nbind = abi.pc_size, abi.ndesc, abi.nbind
    self._check(caps)
    self.piece_len = self._piece_len()
    # positions (in the buffers passed) that the shader may store to
    self.written = [j for j, i in enumerate(self.slots) if abi.binding[i] not in meta.readonly and abi.address[i] not in meta.ro_addr]
    self.set_layout, self.layout = dev.pipeline_layout(self.ndesc, self.pc_size, self.texel)
    mod = ffi.new("VkShaderModule*")
    check(lib.vkCreateShaderModule(dev.vkdev, new("VkShaderModuleCreateInfo", codeSize=len(obj.lib), pCode=ffi.from_buffer("uint32_t[]", obj.lib)),
                                   NULL, mod), f"vkCreateShaderModule of {self.name}")
    self.module, self.spv = mod[0], obj.lib
    self.infos, self.views, self.desc_writes = self._scratch_descriptors()
    self.dset = ffi.new("VkDescriptorSet[1]")
    # a pipeline per alignment of the buffers' element offsets inside their bindings: specialization constant `slot` is 4, 2 or 1,
    # and float4 accesses read the binding's vec4 declaration only where it is 4 (renderer/kernel.py, KernelPlan.vector). The aligned pipeline is
    # built here, the others when a view with that alignment first shows up.
    # a windowed kernel has a pipeline per assignment of its slots to windows too (key: alignments + windows); the one built
    # here has all of them in one window, as when the buffers share a memory block
    self.aligned = (VEC_ALIGN,) * len(self.itemsize)
    first = self.aligned + ((0,) * self.nbind if abi.windowed else ())
    try: self.pipelines[first] = self._pipeline(first)
    except BaseException:   # a pipeline does not need its module once created: this one can go now
      lib.vkDestroyShaderModule(dev.vkdev, self.module, NULL)
      raise

  def _check(self, caps:Caps):
    """Refuse a kernel this device cannot run as compiled."""
    if self.pc_size > caps.pc: raise RuntimeError(f"VULKAN: {self.name} needs {self.pc_size} bytes of push constants, the device has {caps.pc}")
    if (n := sum(a is not None for a in self.abi.address)) and "bda" not in caps:
      raise RuntimeError(f"VULKAN: {self.name} passes {n} buffer(s) by address, but bufferDeviceAddress is off on {self.dev.phys.name}")
    if self.ndesc > caps.bufs: raise RuntimeError(f"VULKAN: {self.name} was compiled for {self.ndesc} descriptors, the device has {caps.bufs}")
    if not self.meta.bindings <= set(range(self.nbind)):
      raise RuntimeError(f"VULKAN: {self.name} declares bindings {sorted(self.meta.bindings)}, its ABI has {self.nbind}")
    if any(l > m for l, m in zip(self.local_size, caps.wgsize)) or prod(self.local_size) > caps.wginv:
      raise RuntimeError(f"VULKAN: local size {self.local_size} of {self.name} is over the device limits "
                         f"(maxComputeWorkGroupSize {caps.wgsize}, maxComputeWorkGroupInvocations {caps.wginv})")
    if self.texel and "texel" not in caps: raise RuntimeError(f"VULKAN: {self.name} reads storage texel buffers, this device's texel path is off")

  def _pipeline(self, key:tuple[int, ...]):
    n, entry = len(self.itemsize), ffi.new("char[]", b"main")
    align, module = key[:n], self.module
    if self.abi.windowed:   # a module whose bindings are the windows: a pipeline does not need it once created
      code = rebind(self.spv, dict(enumerate(key[n:])))
      mod = ffi.new("VkShaderModule*")
      check(lib.vkCreateShaderModule(self.dev.vkdev, new("VkShaderModuleCreateInfo", codeSize=len(code), pCode=ffi.from_buffer("uint32_t[]", code)),
                                     NULL, mod), f"vkCreateShaderModule of {self.name}")
      module = mod[0]
    try: return self._create_pipeline(align, module, entry)
    finally:
      if module != self.module: lib.vkDestroyShaderModule(self.dev.vkdev, module, NULL)

  def _create_pipeline(self, align:tuple[int, ...], module, entry):
    n = len(align)
    entries = ffi.new("VkSpecializationMapEntry[]", [{"constantID": i, "offset": 4 * i, "size": 4} for i in range(n)])
    data = ffi.new("int32_t[]", list(align) or [0])
    spec = ffi.new("VkSpecializationInfo*", {"mapEntryCount": n, "pMapEntries": entries, "dataSize": 4 * n, "pData": data})
    stage = {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": module,
             "pName": entry, "pSpecializationInfo": spec}
    pipe = ffi.new("VkPipeline*")
    check(lib.vkCreateComputePipelines(self.dev.vkdev, NULL, 1, new("VkComputePipelineCreateInfo", stage=stage, layout=self.layout,
                                       flags=PIPELINE_CREATE_DISPATCH_BASE_BIT), NULL, pipe), f"vkCreateComputePipelines of {self.name}")
    try: self._warm(pipe[0])
    except BaseException:   # the warm-up may be recorded already: the pipeline goes once the queue is done with it
      dev, p = self.dev, pipe[0]
      dev.queue.defer(dev.queue.next_seq - 1, lambda: lib.vkDestroyPipeline(dev.vkdev, p, NULL))
      raise
    return pipe[0]

  def _warm(self, pipeline):
    """Record an empty dispatch of a new pipeline: drivers that compile at the first dispatch (lavapipe) then do it before the
    first real launch, which BEAM and DEBUG=2 time. Its bindings point at a scratch buffer no workgroup touches. It may run
    while a launch is packed (pack() builds a pipeline variant): it leaves that launch's descriptor structs alone."""
    q, scratch = self.dev.queue, self.dev.scratch
    # synchronisation validation counts the bindings of an empty dispatch as accessed: order it like a write of the scratch
    with q.prepare([], [scratch]) as b:
      b.names.append(f"{self.name} (pipeline warm-up)")
      dset = b.alloc_set(self.set_layout) if self.ndesc else None
      if dset is not None:
        infos, views, writes = self._scratch_descriptors()   # the writes point into infos and views: they stay alive until the update
        for w in writes: w.dstSet = dset
        lib.vkUpdateDescriptorSets(self.dev.vkdev, len(writes), writes, 0, NULL)
      self.record(b.cmd, dset, bytes(self.pc_size), pipeline, (0, 0, 0))

  def _scratch_descriptors(self) -> tuple:
    """Descriptor structs (buffer infos, texel views, the writes of both) with every binding at the scratch buffer."""
    scratch, n = self.dev.scratch, max(self.ndesc, 1)
    infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": scratch.handle, "offset": scratch.offset, "range": scratch.size}] * n)
    views = ffi.new("VkBufferView[]", [self.dev.allocator.texel_view(scratch, scratch.offset, scratch.size) if self.texel else NULL] * n)
    return infos, views, descriptor_writes(self.ndesc, self.texel, infos, views)

  def check_launch(self, global_size, local_size) -> tuple[int, int, int]:
    caps = self.dev.caps
    gx, gy, gz = (int(g) for g in global_size)
    if gx > (MAX_GROUPS_X if self.abi.xbase is not None else caps.wgcount[0]) or gy > caps.wgcount[1] or gz > caps.wgcount[2]:
      raise RuntimeError(f"VULKAN: {self.name} dispatches {tuple(global_size)} workgroups, over the limit "
                         f"({MAX_GROUPS_X if self.abi.xbase is not None else caps.wgcount[0]}, {caps.wgcount[1]}, {caps.wgcount[2]}) "
                         f"(maxComputeWorkGroupCount {caps.wgcount}; tinygrad's kernels split x past it, renderer/abi.py XBASE)")
    if local_size is not None and tuple(local_size) != self.local_size:
      raise RuntimeError(f"VULKAN: {self.name} was compiled for local size {self.local_size}, launched with {tuple(local_size)}")
    return gx, gy, gz

  def _end(self, i:int, b, start:int) -> int:
    """The end of buffer i's binding from byte `start` of its VkBuffer: whole words (8/16-bit data may be accessed through 32-bit
    words, renderer/packing.py; buffers are allocated in words), past maxStorageBufferRange refused."""
    caps = self.dev.caps
    if (end := start + round_up(b.offset - start + b.size, 4)) - start > caps.range:
      raise RuntimeError(f"VULKAN: buffer {i} of {self.name} is {end - start} bytes, over maxStorageBufferRange ({caps.range})")
    # VULKAN_GUARD: the guard after the buffer in range too, or a driver that bounds-checks would drop a store past the end unseen.
    # Only for a view that ends where its buffer does: another one's range would cover the views after it, which the hazard
    # tracking (and synchronisation validation) would then see it access.
    if self.guard and end >= (r := b.root).offset + r.size: end = max(end, min(start + caps.range, r.offset + r.size + guard_len(r.size)))
    return end

  def _piece_len(self) -> int|None:
    """Workgroups along x per piece, where slots are launched in pieces (abi.py REACH): as many as keep each piece's reach of
    them within maxStorageBufferRange (0: any number); None when no slot is."""
    if not self.reach: return None
    rs, caps = [r for rs in self.reach.values() for r in rs], self.dev.caps
    room = caps.range - max(caps.align, WINDOW_ALIGN) - 4 - (max(hi for _, _, hi in rs) - min(lo for _, lo, _ in rs))
    if room < 0: raise RuntimeError(f"VULKAN: one workgroup of {self.name} reaches past maxStorageBufferRange ({caps.range})")
    return room // a + 1 if (a := max(abs(a) for a, _, _ in rs)) else 0

  def pieces(self, gx:int) -> list[tuple[int, int]]:
    """The ranges of workgroups along x a launch goes in."""
    if not (n := self.piece_len): return [(0, gx)]
    return [(g, min(g + n, gx)) for g in range(0, gx, n)] or [(0, 0)]

  def place(self, bufs, piece:tuple[int, int]|None=None) -> Windows:
    """The windows of a windowed kernel's launch (renderer/abi.py). The slots of one memory block share a window while its range
    stays within maxStorageBufferRange (with `share`); past the descriptors, the read-only windows with the fewest bytes are
    gathered into a scratch buffer (the written ones always keep theirs). A slot launched in pieces has a window of its own
    over what workgroups piece[0]..piece[1]-1 reach of it."""
    caps, abi, D = self.dev.caps, self.abi, self.ndesc
    step = max(caps.align, WINDOW_ALIGN)
    blocks: dict = {}
    wins: list[list] = []   # [VkBuffer, start, end, [(slot, buffer)], [shader binding], kept (not gathered)]
    offsets: dict[int, int] = {}
    for i, b in zip(self.slots, bufs):
      if (rs := self.reach.get(i)) is not None:
        g0, g1 = piece if piece is not None else (0, 1)
        lo = b.offset + min(min(a * g0, a * max(g1 - 1, g0)) + lo for a, lo, _ in rs)
        hi = b.offset + max(max(a * g0, a * max(g1 - 1, g0)) + hi for a, _, hi in rs)
        start = max(lo, 0)
        start -= start % step
        wins.append([b.handle, start, min(round_up(hi, 4), b.root.block.size), [(i, b)], [], True])
      elif (sp := self.split_slots.get(i)) is not None:   # k windows of `size` bytes from the view's start aligned down
        k, size, first = sp
        start, end = b.offset - b.offset % step, b.root.block.size
        wins += [[b.handle, start + w * size, min(start + (w + 1) * size, end), [], [first + w], True] if start + w * size < end else
                 [self.dev.scratch.handle, self.dev.scratch.offset, self.dev.scratch.offset + 256, [], [first + w], True] for w in range(k)]
        offsets[i] = (b.offset - start) // self.itemsize[i]
      elif abi.binding[i] is not None: blocks.setdefault(b.handle, []).append((b.offset, i, b))
    for h, members in blocks.items():
      cur = None
      for off, i, b in sorted(members, key=lambda m: m[0]):
        end = self._end(i, b, start := off - off % step)
        if cur is not None and "share" in caps and max(cur[2], end) - cur[1] <= caps.range:
          cur[2] = max(cur[2], end)
          cur[3].append((i, b))
        else: wins.append(cur := [h, start, end, [(i, b)], [], False])
    copies, scratch, size = [], None, 0
    if len(wins) > D:
      written = {self.slots[j] for j in self.written}
      keep = [w for w in wins if w[5] or any(i in written for i, _ in w[3])]
      if len(keep) >= D:
        raise RuntimeError(f"VULKAN: {self.name} needs {len(keep)} windows that cannot be gathered (outputs, buffers past "
                           f"maxStorageBufferRange) and more: over its {D} descriptors (maxPerStageDescriptorStorageBuffers)")
      rest = sorted((w for w in wins if not any(w is k for k in keep)), key=lambda w: w[2] - w[1], reverse=True)
      room = D - 1 - len(keep)   # one descriptor is the scratch's
      keep += rest[:room]
      gather = [(i, b) for w in rest[room:] for i, b in w[3]]
      placed = []
      for i, b in gather:   # at the same offset modulo `step`, so each keeps its alignment; from the word its first element is in
        dst = round_up(size, step) + b.offset % step
        lead, size = b.offset % 4, round_up(dst + b.size, 4)
        placed.append((i, b, dst, lead))
      if size > caps.range:
        raise RuntimeError(f"VULKAN: the {len(gather)} inputs of {self.name} gathered into one window take {size} bytes, over "
                           f"maxStorageBufferRange ({caps.range})")
      scratch = self.dev.allocator.alloc(size, GATHER_SPEC)
      copies = [(b.view(round_up(b.size + lead, 4), -lead), scratch.view(round_up(b.size + lead, 4), dst - lead)) for i, b, dst, lead in placed]
      self.dev.gathered += len(copies)
      wins = keep + [[scratch.handle, scratch.offset, scratch.offset + size, [(i, scratch.view(b.size, dst)) for i, b, dst, _ in placed], [], False]]
    of = [0] * self.nbind   # the window of each shader binding
    for k, (_, start, _, members, binds, _) in enumerate(wins):
      for i, b in members:
        if (b.offset - start) % self.itemsize[i]:
          raise RuntimeError(f"VULKAN: buffer {i} of {self.name} is a view at byte offset {b.offset}, not a multiple of its "
                             f"{self.itemsize[i]}-byte element: Vulkan cannot bind it")
        binds.append(abi.binding[i])
        offsets[i] = (b.offset - start) // self.itemsize[i]
      for bnd in binds: of[bnd] = k
    return Windows([(h, start, end - start) for h, start, end, *_ in wins], tuple(of), offsets, copies, scratch, size)

  def bind(self, dset, bufs, vals:tuple[int, ...]|list[int], win:Windows|None=None) -> tuple[bytes, object]:
    pc, pipe = self.pack(bufs, vals, win)
    self.update(dset)
    return pc, pipe

  def update(self, dset):
    if self.ndesc:
      for w in self.desc_writes: w.dstSet = dset
      lib.vkUpdateDescriptorSets(self.dev.vkdev, len(self.desc_writes), self.desc_writes, 0, NULL)

  def pack(self, bufs, vals:tuple[int, ...]|list[int], win:Windows|None=None) -> tuple[bytes, object]:
    """Point the descriptor structs at the buffers (or, windowed, at the windows `place` chose) and put the addresses in the push
    constants (views bound at the aligned-down offset, see renderer/abi.py), pack the scalars, and pick the pipeline specialized
    for how aligned the views' element offsets are (and, windowed, for which window each slot is in). A new pipeline records
    its warm-up dispatch: never inside another command's `prepare`, whose hazards its barrier would forget."""
    caps, infos, pc, align, abi = self.dev.caps, self.infos, bytearray(self.pc_size), self.aligned, self.abi
    if win is not None:
      scratch = self.dev.scratch
      for k in range(self.ndesc):
        h, start, rng = win.spans[k] if k < len(win.spans) else (scratch.handle, scratch.offset, scratch.size)
        infos[k].buffer, infos[k].offset, infos[k].range = h, start, rng
    for i, b in zip(self.slots, bufs):
      isz, aoff = self.itemsize[i], abi.address[i]
      if aoff is not None:
        rem = (addr := b.gpu + b.offset) % ADDR_ALIGN
        struct.pack_into("<Q", pc, aoff, addr - rem)
      elif win is not None: rem = win.offsets[i] * isz
      else:
        rem = b.offset % caps.align
        info = infos[bnd := abi.binding[i]]
        info.buffer, info.offset, info.range = b.handle, b.offset - rem, self._end(i, b, b.offset - rem) - (b.offset - rem)
        if bnd in self.texel: self.views[bnd] = self.dev.allocator.texel_view(b.root, info.offset, min(info.range, 4 * caps.texels))
      if rem % isz: raise RuntimeError(f"VULKAN: buffer {i} of {self.name} is a view at byte offset {b.offset}, not a multiple of its "
                                       f"{isz}-byte element: Vulkan cannot bind it")
      if (o := rem // isz) % VEC_ALIGN: align = align[:i] + (4 if o % 4 == 0 else 2 if o % 2 == 0 else 1,) + align[i+1:]
      if abi.windowed: struct.pack_into("<i", pc, 4 * i, o)   # negative for a slot in pieces whose window starts past its view
      else: pc[i] = o
    for (off, fmt), v in zip(self.scalar_fields, vals): struct.pack_into(fmt, pc, off, v)
    key = align + win.of if win is not None else align
    if (pipe := self.pipelines.get(key)) is None: pipe = self.pipelines[key] = self._pipeline(key)
    return bytes(pc), pipe

  def record(self, cmd, dset, pc:bytes, pipeline, groups:tuple[int, int, int], x0:int=0):
    """Dispatch `groups` workgroups, the first along x numbered x0."""
    lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    if self.ndesc:
      self.dset[0] = dset
      lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.layout, 0, 1, self.dset, 0, NULL)
    (gx, gy, gz), mx = groups, self.dev.caps.wgcount[0]
    if self.abi.xbase is not None:   # at most mx workgroups a dispatch, each told where it starts (vkCmdDispatchBase's base is < mx)
      for base in range(0, max(gx, 1), mx):   # a warm-up dispatch (0 workgroups) is recorded too
        lib.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, self.pc_size, pc[:-4] + struct.pack("<i", x0 + base))
        lib.vkCmdDispatch(cmd, min(mx, gx - base), gy, gz)
      return
    if self.pc_size: lib.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, self.pc_size, pc)
    if x0: lib.vkCmdDispatchBase(cmd, x0, 0, 0, gx, gy, gz)   # a piece: gl_WorkGroupID.x stays global
    else: lib.vkCmdDispatch(cmd, gx, gy, gz)

  def realign(self, bufs) -> Realigned|None:
    """The launch's buffers with each view of a slot reached in words that starts inside a word moved to a scratch buffer of its
    own (one per view, whichever slots pass it); None when there is none. Rare: tinygrad folds slices into the index, only a
    Buffer.view (a JIT input, a realized slice) is bound at another byte."""
    if not self.words: return None
    views: dict[tuple[int, int, int], list[int]] = {}
    for j, (i, b) in enumerate(zip(self.slots, bufs)):
      if i in self.words and b.offset % 4: views.setdefault((id(b.root), b.offset, b.size), []).append(j)
    if not views: return None
    ra = Realigned(list(bufs), [], [], [])
    try:
      for js in views.values():
        b = bufs[js[0]]
        ra.scratches.append((s := self.dev.allocator.alloc(n := round_up(b.size, 4), GATHER_SPEC), n))
        v = s.view(b.size, 0)
        ra.before.append((b, v))
        if any(j in self.written for j in js): ra.after.append((v, b))
        for j in js: ra.bufs[j] = v
    except BaseException:
      ra.free(self.dev.allocator)
      raise
    return ra

  def split(self, bufs) -> tuple[list, list]:
    """(read-only buffers, written buffers) of a call."""
    return [b for i, b in enumerate(bufs) if i not in self.written], [bufs[i] for i in self.written]

  def __call__(self, *bufs, global_size:tuple[int, ...]=(1, 1, 1), local_size=None, vals:tuple[int, ...]=(), wait=False, **kw) -> float|None:
    groups, q = self.check_launch(global_size, local_size), self.dev.queue
    with q:   # the descriptor structs are shared by every launch of this program
      ra = self.realign(bufs)
      try:
        if ra is not None:
          for src, dst in ra.before: q.copy(src, dst, src.size)
          bufs = tuple(ra.bufs)
        if self.abi.windowed: batch, t0, t1 = self._windowed(bufs, groups, vals, wait)
        else:
          pc, pipeline = self.pack(bufs, vals)   # a new pipeline is built here, before the launch is ordered
          with q.prepare(*self.split(bufs)) as batch:
            dset = batch.alloc_set(self.set_layout) if self.ndesc else None
            self.update(dset)
            t0 = batch.timestamp() if wait or q.profiling() else None
            self.record(batch.cmd, dset, pc, pipeline, groups)
            t1 = self._recorded(batch, t0)
        if ra is not None:
          for src, dst in ra.after: q.copy(src, dst, src.size)
      finally:
        if ra is not None: ra.free(self.dev.allocator)
    return q.timed_wait(batch, t0, t1) if wait else None

  def _recorded(self, batch, t0:int|None) -> int|None:
    t1 = batch.timestamp() if t0 is not None else None
    if t1 is not None and self.dev.queue.profiling(): batch.profile.append((t0, self.name, self.profile_key))
    batch.names.append(self.name)
    return t1

  def _windowed(self, bufs, groups:tuple[int, int, int], vals, wait:bool):
    """A windowed launch, in pieces where a slot has a reach: its gathers, then its dispatches, ordered after and before
    everything like a graph replay (a window's range covers the other buffers of its block too)."""
    q, pieces, wins = self.dev.queue, self.pieces(groups[0]), []
    try:
      for p in pieces: wins.append(self.place(bufs, p))
      for w in wins:
        for src, dst in w.copies: q.copy(src, dst, src.size)
      packed = [self.pack(bufs, vals, w) for w in wins]   # any new pipeline is built here, before the launch is ordered
      with q.prepare_opaque([*bufs, *(s for w in wins for s in w.scratches)]) as batch:
        t0 = batch.timestamp() if wait or q.profiling() else None
        for (g0, g1), w, (pc, pipeline) in zip(pieces, wins, packed):
          if len(pieces) > 1: self.pack(bufs, vals, w)   # the descriptor structs hold this piece's windows again
          dset = batch.alloc_set(self.set_layout) if self.ndesc else None
          self.update(dset)
          self.record(batch.cmd, dset, pc, pipeline, (g1 - g0, *groups[1:]), g0)
        return batch, t0, self._recorded(batch, t0)
    finally:
      for w in wins: w.free(self.dev.allocator)

  @suppress_finalizing
  def __del__(self):
    if not getattr(self, "pipelines", None) or self.dev.closed: return
    # a queued dispatch may still use the pipelines: destroy them after everything recorded so far
    dev, pipes, module = self.dev, list(self.pipelines.values()), self.module
    dev.queue.defer(dev.queue.next_seq - 1, lambda: ([lib.vkDestroyPipeline(dev.vkdev, p, NULL) for p in pipes],
                                                      lib.vkDestroyShaderModule(dev.vkdev, module, NULL)))
