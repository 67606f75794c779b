"""A compiled kernel: shader module and compute pipeline built once, then bound and dispatched per call."""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING, cast
from tinygrad.device import Program, TinyELF
from tinygrad.helpers import prod, round_up, suppress_finalizing
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import Caps, MAX_GROUPS_X, VEC_ALIGN
from tinygrad_vk.spv import KernelMeta, rebind
# whole subgroups: what a cooperative matrix kernel's tiles assume, and what Vulkan requires of one before SPIR-V 1.6
REQUIRE_FULL_SUBGROUPS = 0x2   # VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT (None in the `vulkan` package)
from tinygrad_vk.renderer.abi import ADDR_ALIGN, kernel_abi, numel
from tinygrad_vk import windows
from tinygrad_vk.queue import record_barrier
if TYPE_CHECKING: from tinygrad_vk.device import VulkanDevice

PIPELINE_CREATE_DISPATCH_BASE_BIT = 0x10   # core in Vulkan 1.1, missing from the `vulkan` package (its KHR alias is None)

def descriptor_writes(n:int, texel:frozenset[int], infos, views):
  """The writes of n descriptors: storage buffers from `infos`, the `texel` bindings storage texel buffers from `views`
  (one write for all when there are none, else one per binding)."""
  if not texel: return ffi.new("VkWriteDescriptorSet[1]", [{"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "descriptorCount": n,
                                                           "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "pBufferInfo": infos}])
  return ffi.new("VkWriteDescriptorSet[]", [{"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": i, "descriptorCount": 1,
    "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER if i in texel else vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
    "pBufferInfo": infos + i, "pTexelBufferView": views + i} for i in range(n)])

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
    bufs = [slot_info.get(i, (1, 0)) for i in range(max(slot_info, default=-1) + 1)]
    self.itemsize = [isz for isz, _ in bufs]
    try: self.meta = meta = KernelMeta.decode(obj.lib)
    except ValueError as e: raise RuntimeError(f"VULKAN: the SPIR-V of {self.name} is malformed: {e}") from None
    self.local_size, self.reach, self.split_slots, self.words, self.texel = meta.local, meta.reach, meta.split, meta.words, meta.texel
    self.texel_words: dict[int|None, int] = {k: 4 if k in meta.texel4 else 1 for k in meta.texel}   # 32-bit words a texel, by binding
    # the ABI the renderer decided; a module from elsewhere (hand-written) gets the one its signature implies on the target's caps
    self.abi = abi = meta.abi or kernel_abi(Caps.decode(obj.target.arch), bufs, [s[2] for s in obj.signature[len(sig):]])
    # the scalars (symbolic shape variables) after the buffer offsets and addresses: (byte offset in the push constants, struct format)
    self.scalar_fields = [(off, cast(str, dt.fmt)) for off, dt in abi.vars]   # tinygrad's variables are ints: each has a format
    self.pc_size, self.ndesc, self.nbind = abi.pc_size, abi.ndesc, abi.nbind
    self._check(caps)
    self.piece_len = windows.piece_len(caps, self.reach, self.name)
    # positions (in the buffers passed) that the shader may store to
    self.written = [j for j, i in enumerate(self.slots) if abi.binding[i] not in meta.readonly and abi.address[i] not in meta.ro_addr]
    self.set_layout, self.layout = dev.pipeline_layout(self.ndesc, self.pc_size, self.texel)
    self.module, self.spv = self._module(obj.lib), obj.lib
    self.infos, self.views, self.desc_writes = self._scratch_descriptors()
    self.dset = ffi.new("VkDescriptorSet[1]")
    # a pipeline per alignment of the buffers' element offsets inside their bindings: specialization constant `slot` is 4, 2 or 1,
    # and float4 accesses read the binding's vec4 declaration only where it is 4 (renderer/plan.py, KernelPlan.vector). The aligned pipeline is
    # built here, the others when a view with that alignment first shows up.
    # a windowed kernel has a pipeline per assignment of its slots to windows too (key: alignments + windows); the one built
    # here has all of them in one window, as when the buffers share a memory block (a texel buffer at its own descriptor)
    self.aligned = (VEC_ALIGN,) * len(self.itemsize)
    one = next((k for k in range(self.ndesc) if k not in self.texel), 0)
    first = self.aligned + (tuple(j if j in self.texel else one for j in range(self.nbind)) if abi.windowed else ())
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
  def _module(self, code:bytes):
    mod = ffi.new("VkShaderModule*")
    check(lib.vkCreateShaderModule(self.dev.vkdev, new("VkShaderModuleCreateInfo", codeSize=len(code), pCode=ffi.from_buffer("uint32_t[]", code)),
                                   NULL, mod), f"vkCreateShaderModule of {self.name}")
    return mod[0]
  def _pipeline(self, key:tuple[int, ...]):
    n, entry = len(self.itemsize), ffi.new("char[]", b"main")
    align, module = key[:n], self.module
    if self.abi.windowed:   # a module whose bindings are the windows: a pipeline does not need it once created
      module = self._module(rebind(self.spv, dict(enumerate(key[n:]))))
    try: return self._create_pipeline(align, module, entry)
    finally:
      if module != self.module: lib.vkDestroyShaderModule(self.dev.vkdev, module, NULL)
  def _create_pipeline(self, align:tuple[int, ...], module, entry):
    n = len(align)
    entries = ffi.new("VkSpecializationMapEntry[]", [{"constantID": i, "offset": 4 * i, "size": 4} for i in range(n)])
    data = ffi.new("int32_t[]", list(align) or [0])
    spec = ffi.new("VkSpecializationInfo*", {"mapEntryCount": n, "pMapEntries": entries, "dataSize": 4 * n, "pData": data})
    # a cooperative matrix kernel's subgroups are whole and of the size its tensor cores assume (renderer/coopmat.py)
    size = new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo", requiredSubgroupSize=self.dev.caps.sg) \
      if self.meta.coop and "sgsize" in self.dev.caps else NULL
    stage = {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": module,
             "pName": entry, "pSpecializationInfo": spec, "flags": REQUIRE_FULL_SUBGROUPS if self.meta.coop else 0, "pNext": size}
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
    views = ffi.new("VkBufferView[]", [self.dev.allocator.texel_view(scratch, scratch.offset, scratch.size, self.texel_words[k])
                                       if k in self.texel else NULL for k in range(n)])
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
  def pieces(self, gx:int) -> list[tuple[int, int]]:
    """The ranges of workgroups along x a launch goes in."""
    if not (n := self.piece_len): return [(0, gx)]
    return [(g, min(g + n, gx)) for g in range(0, gx, n)] or [(0, 0)]
  def update(self, dset):
    if self.ndesc:
      for w in self.desc_writes: w.dstSet = dset
      lib.vkUpdateDescriptorSets(self.dev.vkdev, len(self.desc_writes), self.desc_writes, 0, NULL)
  def pack(self, bufs, vals:tuple[int, ...]|list[int], win:windows.Windows|None=None) -> tuple[bytes, object]:
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
      elif win is not None:
        rem = win.offsets[i] * isz
        if (bnd := abi.binding[i]) in self.texel:   # its window is descriptor bnd's (windows.py `place`)
          _, start, rng = win.spans[bnd]
          self.views[bnd] = self.dev.allocator.texel_view(b.root, start, min(rng, 4 * caps.texels))
      else:
        rem, info = b.offset % caps.align, infos[bnd := abi.binding[i]]
        info.buffer, info.offset = b.handle, b.offset - rem
        info.range = windows.binding_end(caps, self.guard, i, b, info.offset, self.name) - info.offset
        if (w := self.texel_words.get(bnd)) is not None:   # whole texels: a buffer's memory is whole 256-byte units (memory.SUB_ALIGN)
          self.views[bnd] = self.dev.allocator.texel_view(b.root, info.offset, min(round_up(info.range, 4 * w), 4 * w * caps.texels), w)
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
        if base: record_barrier(cmd)   # one launch's parts: see queue.record_barrier
        lib.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, self.pc_size, pc[:-4] + struct.pack("<i", x0 + base))
        lib.vkCmdDispatch(cmd, min(mx, gx - base), gy, gz)
      return
    if self.pc_size: lib.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, self.pc_size, pc)
    if x0: lib.vkCmdDispatchBase(cmd, x0, 0, 0, gx, gy, gz)   # a piece: gl_WorkGroupID.x stays global
    else: lib.vkCmdDispatch(cmd, gx, gy, gz)
  def split(self, bufs) -> tuple[list, list]:
    """(read-only buffers, written buffers) of a call."""
    return [b for i, b in enumerate(bufs) if i not in self.written], [bufs[i] for i in self.written]
  def __call__(self, *bufs, global_size:tuple[int, ...]=(1, 1, 1), local_size=None, vals:tuple[int, ...]=(), wait=False, **kw) -> float|None:
    groups, q = self.check_launch(global_size, local_size), self.dev.queue
    with q:   # the descriptor structs are shared by every launch of this program
      # rare (windows.py): a view inside a word of a slot reached in words, more buffers than descriptors or past their range
      if (ra := windows.realign(self, bufs)) is not None or self.abi.windowed: batch, t0, t1 = windows.launch(self, bufs, ra, groups, vals, wait)
      else: batch, t0, t1 = self.launch(bufs, groups, vals, wait)
    return q.timed_wait(batch, t0, t1) if wait else None
  def launch(self, bufs, groups:tuple[int, int, int], vals, wait:bool) -> tuple:
    """Bind the buffers, push the constants and dispatch, ordered after the buffers' earlier uses: (batch, its timestamps)."""
    q = self.dev.queue
    pc, pipeline = self.pack(bufs, vals)   # a new pipeline is built here, before the launch is ordered
    with q.prepare(*self.split(bufs)) as batch:
      dset = batch.alloc_set(self.set_layout) if self.ndesc else None
      self.update(dset)
      t0 = batch.timestamp() if wait or q.profiling() else None
      self.record(batch.cmd, dset, pc, pipeline, groups)
      return batch, t0, self.recorded(batch, t0)
  def recorded(self, batch, t0:int|None) -> int|None:
    t1 = batch.timestamp() if t0 is not None else None
    if t1 is not None and self.dev.queue.profiling(): batch.profile.append((t0, self.name, self.profile_key))
    batch.names.append(self.name)
    return t1
  @suppress_finalizing
  def __del__(self):
    if not getattr(self, "pipelines", None) or self.dev.closed: return
    # a queued dispatch may still use the pipelines: destroy them after everything recorded so far
    dev, pipes, module = self.dev, list(self.pipelines.values()), self.module
    dev.queue.defer(dev.queue.next_seq - 1, lambda: ([lib.vkDestroyPipeline(dev.vkdev, p, NULL) for p in pipes],
                                                      lib.vkDestroyShaderModule(dev.vkdev, module, NULL)))
