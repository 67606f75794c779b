"""A compiled kernel: shader module and compute pipeline built once, then bound and dispatched per call."""
from __future__ import annotations
import struct
from tinygrad.device import TinyELF
from tinygrad.helpers import ceildiv, round_up, prod
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import MAX_GROUPS_X, VEC_ALIGN
from tinygrad_vk.compiler import spirv_instructions

# SPIR-V opcodes and enums read by spirv_info
OP_EXECUTION_MODE, OP_DECORATE, OP_MEMBER_DECORATE, OP_TYPE_POINTER, OP_VARIABLE = 16, 71, 72, 32, 59
MODE_LOCAL_SIZE, DEC_BINDING, DEC_NON_WRITABLE = 17, 33, 24
PIPELINE_CREATE_DISPATCH_BASE = 0x10   # VK_PIPELINE_CREATE_DISPATCH_BASE_BIT (the package maps it to None)

def spirv_info(spv:bytes) -> tuple[tuple[int, int, int], set[int]]:
  """The baked local size and the bindings the shader never writes (they need no write hazard)."""
  local, binding, readonly_types, ptr_to, var_type = (1, 1, 1), {}, set(), {}, {}
  for _, op, w in spirv_instructions(spv)[1]:
    if op == OP_EXECUTION_MODE and w[2] == MODE_LOCAL_SIZE: local = (w[3], w[4], w[5])
    elif op == OP_DECORATE and w[2] == DEC_BINDING: binding[w[1]] = w[3]
    elif op in (OP_DECORATE, OP_MEMBER_DECORATE) and w[-1] == DEC_NON_WRITABLE and (op == OP_MEMBER_DECORATE or len(w) == 3): readonly_types.add(w[1])
    elif op == OP_TYPE_POINTER: ptr_to[w[1]] = w[3]
    elif op == OP_VARIABLE: var_type[w[2]] = w[1]
  ro = {b for v, b in binding.items() if v in readonly_types or ptr_to.get(var_type.get(v)) in readonly_types}
  return local, ro

class VulkanProgram:
  # no VkPipelineCache: measured on lavapipe, the driver's own shader cache already makes a second run's first dispatch ~8x
  # cheaper, and a VkPipelineCache (in memory or persisted) changed nothing
  def __init__(self, dev, obj:TinyELF):
    self.dev, self.name, self.profile_key = dev, obj.name, obj.profile_key
    sig = [s for s in obj.signature if s[0] is None]
    # the buffers tinygrad passes are those of these slots: a buffer whose accesses were all folded away has none (its binding
    # then points at a scratch buffer: the shader declares no variable for it)
    isz = {s[1]: s[2].itemsize for s in sig}
    self.slots, self.itemsize = sorted(isz), [isz.get(i, 1) for i in range(max(isz, default=-1) + 1)]
    bufs, nwords = self.itemsize, ceildiv(len(self.itemsize), 4)
    self.vals = [(off, dt.fmt) for off, dt in TinyELF.iter_sig(obj.signature[len(sig):], 4 * nwords)]
    self.pc_size = round_up(max([off + struct.calcsize(f) for off, f in self.vals] + [4 * nwords]), 4)
    caps = dev.caps
    if self.pc_size > caps.pc: raise RuntimeError(f"VULKAN: {self.name} needs {self.pc_size} bytes of push constants, the device has {caps.pc}")
    if len(bufs) > caps.bufs: raise RuntimeError(f"VULKAN: {self.name} binds {len(bufs)} buffers, the device allows {caps.bufs}")
    self.local_size, readonly = spirv_info(obj.lib)
    if any(l > m for l, m in zip(self.local_size, caps.wgsize)) or prod(self.local_size) > caps.wginv:
      raise RuntimeError(f"VULKAN: local size {self.local_size} of {self.name} is over the device limits "
                         f"(maxComputeWorkGroupSize {caps.wgsize}, maxComputeWorkGroupInvocations {caps.wginv})")
    self.writes = [j for j, slot in enumerate(self.slots) if slot not in readonly]   # positions in the buffers passed
    self.set_layout, self.layout = dev.pipeline_layout(len(bufs), self.pc_size)
    mod = ffi.new("VkShaderModule*")
    code = ffi.from_buffer("uint32_t[]", obj.lib)
    check(lib.vkCreateShaderModule(dev.vkdev, new("VkShaderModuleCreateInfo", codeSize=len(obj.lib), pCode=code), NULL, mod), "vkCreateShaderModule")
    self.module = mod[0]
    unused = {"buffer": dev.scratch.handle, "offset": 0, "range": dev.scratch.size}
    self.infos = ffi.new("VkDescriptorBufferInfo[]", [unused] * max(len(bufs), 1))
    self.write = new("VkWriteDescriptorSet", descriptorCount=len(bufs), descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=self.infos)
    self.dset = ffi.new("VkDescriptorSet[1]")
    # a pipeline per alignment of the buffers' view offsets (specialization constant id = slot, see renderer/glsl.py); the aligned
    # one is built here, the others when a misaligned view first shows up
    self.aligned = (VEC_ALIGN,) * len(bufs)
    self.pipelines = {self.aligned: self._pipeline(self.aligned)}

  def _pipeline(self, align:tuple[int, ...]):
    n, entry = len(align), ffi.new("char[]", b"main")
    entries = ffi.new("VkSpecializationMapEntry[]", [{"constantID": i, "offset": 4 * i, "size": 4} for i in range(n)])
    data = ffi.new("int32_t[]", list(align) or [0])
    spec = ffi.new("VkSpecializationInfo*", {"mapEntryCount": n, "pMapEntries": entries, "dataSize": 4 * n, "pData": data})
    stage = {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, "stage": vk.VK_SHADER_STAGE_COMPUTE_BIT, "module": self.module,
             "pName": entry, "pSpecializationInfo": spec}
    pipe = ffi.new("VkPipeline*")
    check(lib.vkCreateComputePipelines(self.dev.vkdev, NULL, 1, new("VkComputePipelineCreateInfo", stage=stage, layout=self.layout,
                                       flags=PIPELINE_CREATE_DISPATCH_BASE), NULL, pipe), f"vkCreateComputePipelines ({self.name})")
    self._warm(pipe[0])
    return pipe[0]

  def _warm(self, pipeline):
    """Record an empty dispatch of a new pipeline: drivers that compile at the first dispatch (lavapipe) then do it before the
    first real launch, which BEAM and DEBUG=2 time. Its bindings point at a scratch buffer no workgroup touches. It may run
    inside a launch (bind() builds a pipeline variant): it shares that launch's batch and leaves its descriptor structs alone."""
    q, scratch = self.dev.queue, self.dev.scratch
    # synchronisation validation counts the bindings of an empty dispatch as accessed: order it like a write of the scratch
    with q.prepare([], [scratch]) as b:
      dset = b.alloc_set(self.set_layout) if self.itemsize else None
      if dset is not None:
        n = len(self.itemsize)
        infos = ffi.new("VkDescriptorBufferInfo[]", [{"buffer": scratch.handle, "offset": 0, "range": scratch.size}] * n)
        lib.vkUpdateDescriptorSets(self.dev.vkdev, 1, new("VkWriteDescriptorSet", dstSet=dset, descriptorCount=n,
                                   descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=infos), 0, NULL)
      self.record(b.cmd, dset, bytes(self.pc_size), pipeline, (0, 0, 0))

  def check_launch(self, global_size, local_size) -> tuple[int, int, int]:
    caps = self.dev.caps
    gx, gy, gz = (int(g) for g in global_size)
    if gx > MAX_GROUPS_X or gy > caps.wgcount[1] or gz > caps.wgcount[2]:
      raise RuntimeError(f"VULKAN: {self.name} dispatches {tuple(global_size)} workgroups, over the limit "
                         f"({MAX_GROUPS_X}, {caps.wgcount[1]}, {caps.wgcount[2]}) (maxComputeWorkGroupCount {caps.wgcount})")
    if local_size is not None and tuple(local_size) != self.local_size:
      raise RuntimeError(f"VULKAN: {self.name} was compiled for local size {self.local_size}, launched with {tuple(local_size)}")
    return gx, gy, gz

  def bind(self, dset, bufs, vals) -> tuple[bytes, object]:
    """Point the descriptor set at the buffers (views bound at the aligned-down offset), pack the push constants, and pick the
    pipeline specialized for how aligned the views' element offsets are."""
    caps, infos, pc, align = self.dev.caps, self.infos, bytearray(self.pc_size), self.aligned
    for i, b in zip(self.slots, bufs):
      isz, rem = self.itemsize[i], b.offset % caps.align
      if rem % isz: raise RuntimeError(f"VULKAN: buffer {i} of {self.name} is a view at byte offset {b.offset}, not a multiple of its "
                                       f"{isz}-byte element: Vulkan cannot bind it")
      # whole words: 8/16-bit data may be accessed through 32-bit words (renderer/packing.py); buffers are allocated in words
      if (rng := round_up(rem + b.size, 4)) > caps.range:
        raise RuntimeError(f"VULKAN: buffer {i} of {self.name} is {rng} bytes, over maxStorageBufferRange ({caps.range})")
      infos[i].buffer, infos[i].offset, infos[i].range = b.handle, b.offset - rem, rng
      if (o := rem // isz) % VEC_ALIGN: align = align[:i] + (4 if o % 4 == 0 else 2 if o % 2 == 0 else 1,) + align[i+1:]
      pc[i] = o
    for (off, fmt), v in zip(self.vals, vals): struct.pack_into(fmt, pc, off, v)
    if bufs:
      self.write.dstSet = dset
      lib.vkUpdateDescriptorSets(self.dev.vkdev, 1, self.write, 0, NULL)
    if (pipe := self.pipelines.get(align)) is None: pipe = self.pipelines[align] = self._pipeline(align)
    return bytes(pc), pipe

  def record(self, cmd, dset, pc:bytes, pipeline, groups:tuple[int, int, int]):
    lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    if self.itemsize:
      self.dset[0] = dset
      lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, self.layout, 0, 1, self.dset, 0, NULL)
    gx, gy, gz = groups
    if self.pc_size: lib.vkCmdPushConstants(cmd, self.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, self.pc_size, pc)
    if gx <= (mx := self.dev.caps.wgcount[0]): lib.vkCmdDispatch(cmd, gx, gy, gz)
    else:  # more workgroups than one dispatch allows along x: split it, the base offset keeps gl_WorkGroupID.x global
      for base in range(0, gx, mx): lib.vkCmdDispatchBase(cmd, base, 0, 0, min(mx, gx - base), gy, gz)

  def split(self, bufs) -> tuple[list, list]:
    """(read-only buffers, written buffers) of a call."""
    return [b for i, b in enumerate(bufs) if i not in self.writes], [bufs[i] for i in self.writes]

  def __call__(self, *bufs, global_size:tuple[int, ...]=(1, 1, 1), local_size=None, vals:tuple[int, ...]=(), wait=False, **kw) -> float|None:
    groups, q = self.check_launch(global_size, local_size), self.dev.queue
    with q.prepare(*self.split(bufs)) as batch:
      dset = batch.alloc_set(self.set_layout) if bufs else None
      pc, pipeline = self.bind(dset, bufs, vals)
      t0 = batch.timestamp() if wait or q.profiling() else None
      self.record(batch.cmd, dset, pc, pipeline, groups)
      t1 = batch.timestamp() if t0 is not None else None
      if t1 is not None and q.profiling(): batch.profile.append((t0, self.name, self.profile_key))
    return q.timed_wait(batch, t0, t1) if wait else None

  def __del__(self):
    if not getattr(self, "pipelines", None) or self.dev.closed: return
    # a queued dispatch may still use the pipelines: destroy them after everything recorded so far
    dev, pipes, module = self.dev, list(self.pipelines.values()), self.module
    dev.queue.defer(dev.queue.next_seq - 1, lambda: ([lib.vkDestroyPipeline(dev.vkdev, p, NULL) for p in pipes],
                                                      lib.vkDestroyShaderModule(dev.vkdev, module, NULL)))
