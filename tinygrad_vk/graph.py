"""TinyJit graphs: a captured batch of kernels is recorded once into a secondary command buffer and replayed with one
vkCmdExecuteCommands in the device's open command buffer. When a JIT input is another buffer, or a symbolic value or a launch size
changes, the graph waits for its previous replay (its descriptor sets may still be in use), updates the sets of the affected
kernels and records the command buffer again (Vulkan invalidates a command buffer whose bound sets are updated)."""
from __future__ import annotations
import decimal
from typing import TYPE_CHECKING, cast
from tinygrad.device import Buffer, Device, Compiled, ProfileGraphEntry, ProfileGraphEvent
from tinygrad.helpers import PROFILE, suppress_finalizing
from tinygrad.engine.jit import GraphRunner
from tinygrad.engine.realize import get_call_arg_uops, resolve_params
from tinygrad.uop.ops import UOp, Ops
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.spv import KernelMeta
from tinygrad_vk.queue import Hazards, descriptor_pool, timestamp_pool, read_timestamps, record_copy
from tinygrad_vk import windows
if TYPE_CHECKING:
  from tinygrad_vk.device import VulkanDevice
  from tinygrad_vk.memory import VulkanBuffer
  from tinygrad_vk.program import VulkanProgram

class VulkanGraph(GraphRunner):
  # every call is a kernel (GraphRunner.supports_uop takes PROGRAM calls only), where GraphRunner's list also allows None
  runtimes: list[VulkanProgram]  # type: ignore[assignment]
  @staticmethod
  def supports_uop(batch_devs, new_call:UOp) -> bool:
    # a compiled kernel (its last source the module) whose metadata allows a graph (spv.py KernelMeta.graphable)
    return GraphRunner.supports_uop(batch_devs, new_call) and (b := new_call.src[0].src[-1]).op is Ops.BINARY and KernelMeta.decode(b.arg).graphable
  def __init__(self, linear, input_uops=()):
    super().__init__(linear, input_uops)
    self.dev = cast("VulkanDevice", Device[self.calls[0][2][0].device])
    self.q = q = self.dev.queue
    q.check_usable()
    self.bufs = [[b._buf for b in bufs] for _, _, bufs, _ in self.calls]
    self.scalars = [list(ast.arg.vals({**{v: 0 for v in self.vars}, **dv})) for _, ast, _, dv in self.calls]   # per kernel
    self.dims = [tuple(ast.arg.launch_dims({**{v: 0 for v in self.vars}, **dv})[0]) for _, ast, _, dv in self.calls]
    # one descriptor set per kernel, owned by the graph
    self.pool = descriptor_pool(q.vkdev, len(self.calls), max(1, sum(len(b) for b in self.bufs)))
    layouts = ffi.new("VkDescriptorSetLayout[]", [prg.set_layout for prg in self.runtimes])
    sets = ffi.new("VkDescriptorSet[]", len(self.calls))
    check(lib.vkAllocateDescriptorSets(q.vkdev, new("VkDescriptorSetAllocateInfo", descriptorPool=self.pool, descriptorSetCount=len(self.calls),
                                                    pSetLayouts=layouts), sets), "vkAllocateDescriptorSets")
    self.sets = list(sets)
    self.cmd = q.new_command_buffer(secondary=True)
    self.cmds = ffi.new("VkCommandBuffer[1]", [self.cmd])
    # PROFILE: a timestamp before and after every kernel, read back when the replay completes
    self.query_pool = timestamp_pool(q.vkdev, 2 * len(self.calls)) if PROFILE and q.timestamp_bits else None
    self.pcs: list[tuple[bytes, object]] = [(b"", None)] * len(self.calls)
    self.wins: list = [None] * len(self.calls)   # the windows of windowed kernels (windows.py `place`), owned by the graph
    self.ras: list = [None] * len(self.calls)    # the views moved to whole words (windows.py `realign`), owned by the graph
    self.dirty, self.last_seq = set(range(len(self.calls))), 0
    self.replaced = [(j, pos, slot) for j, repl in enumerate(self.uop_replace) for pos, slot in repl]   # JIT inputs, per call
    # views of JIT inputs (a realized slice of one): tinygrad's uop_replace has only the inputs themselves
    self.input_views = [(j, call) for j, call in enumerate(self.linear.src)
                        if any(b.op is Ops.SHRINK and b.src[0].op is Ops.PARAM for b in get_call_arg_uops(call))]
    names = [prg.name for prg in self.runtimes]
    self.label = f"TinyJit graph of {len(names)} kernels ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"   # for a lost device
  def __call__(self, input_uops:tuple[UOp, ...], var_vals:dict[str, int], wait=False) -> float|None:
    # (kernel j, the list holding a value of j's, index, the value now): buffers (compared by identity), scalars, launch sizes
    now = [(j, self.bufs[j], pos, cast(Buffer, input_uops[slot].buffer)._buf) for j, pos, slot in self.replaced]
    now += [(j, self.bufs[j], pos, cast(Buffer, u.buffer).ensure_allocated()._buf) for j, call in self.input_views
            for pos, u in enumerate(resolve_params(call, input_uops)) if u.op is Ops.SHRINK]
    if self.vars: now += [(j, self.scalars[j], i, v) for j, i, v in self.updated_vars(var_vals)]
    if self.launch_dims_replace: now += [(j, self.dims, j, tuple(gl)) for j, gl, _ in self.updated_launch_dims(var_vals)]
    for j, row, i, v in now:
      if row[i] != v:
        row[i] = v
        self.dirty.add(j)
    q = self.q
    with q:   # another thread's launch of the same programs binds through the same structs
      # profiled replays reuse one set of queries: the previous replay's must be read first
      if self.dirty or (self.query_pool is not None and self.last_seq): self._record()
      with q.prepare_opaque(self.roots) as batch:
        self.last_seq = batch.seq   # before the replay is recorded: an exception right after it must not let _record reset it
        if self.query_pool is not None: lib.vkCmdResetQueryPool(batch.cmd, self.query_pool, 0, 2 * len(self.calls))
        t0 = batch.timestamp() if wait else None
        lib.vkCmdExecuteCommands(batch.cmd, 1, self.cmds)
        t1 = batch.timestamp() if t0 is not None else None
        batch.names.append(self.label)
      if self.query_pool is not None: q.defer(batch.seq, self._collect)
    return q.timed_wait(batch, t0, t1) if wait else None
  def _record(self):
    # the previous replay may still read these sets and this command buffer
    if self.last_seq: self.q.wait(self.last_seq)
    if not self.dirty: return
    for j in sorted(self.dirty):
      prg = self.runtimes[j]
      if self.ras[j] is not None: self.ras[j].free(self.dev.allocator)
      self.ras[j] = windows.realign(prg, self.bufs[j])
      if prg.abi.windowed:
        if self.wins[j] is not None: self.wins[j].free(self.dev.allocator)
        self.wins[j] = windows.place(prg, self._launched(j))
      self.pcs[j] = prg.pack(self._launched(j), self.scalars[j], self.wins[j])
      prg.update(self.sets[j])
    cmd, hazards, qp = self.cmd, Hazards(), self.query_pool
    roots: dict[int, VulkanBuffer] = {}
    # a recording that an exception cut short left the buffer begun (or ended): it cannot be begun again without a reset
    check(lib.vkResetCommandBuffer(cmd, 0), "vkResetCommandBuffer")
    inherit = new("VkCommandBufferInheritanceInfo")   # named: cffi keeps no pointee of a struct field alive
    begin = new("VkCommandBufferBeginInfo", pInheritanceInfo=inherit, flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT)
    check(lib.vkBeginCommandBuffer(cmd, begin), "vkBeginCommandBuffer")
    def copies(pairs):
      for src, dst in pairs:
        hazards.order(cmd, [src], [dst])
        record_copy(cmd, src, dst, src.size)
    for j, (prg, dset, pc, dims, win, ra) in enumerate(zip(self.runtimes, self.sets, self.pcs, self.dims, self.wins, self.ras)):
      bufs = self._launched(j)
      if ra is not None: copies(ra.before)
      if win is None: hazards.order(cmd, *prg.split(bufs))
      else:   # gathers first; a window covers other buffers too, so the kernel is ordered after and before everything
        copies(win.copies)
        hazards.order_all(cmd)
        roots.update((id(x.root), x.root) for x, _ in win.scratches)
      if qp is not None: lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 2 * j)
      prg.record(cmd, dset, *pc, prg.check_launch(dims, None))
      if qp is not None: lib.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 2 * j + 1)
      if ra is not None: copies(ra.after)
      roots.update((id(x.root), x.root) for x in bufs + self.bufs[j])
    check(lib.vkEndCommandBuffer(cmd), "vkEndCommandBuffer")
    self.roots = list(roots.values())   # what a replay touches: it must not be freed or overwritten from the host before it completes
    self.dirty.clear()                  # only once the command buffer is complete: a failed recording is redone by the next call
  def _launched(self, j:int) -> list:   # the buffers kernel j is bound to: its own, or the scratches of views moved to whole words
    return self.ras[j].bufs if self.ras[j] is not None else self.bufs[j]
  def _collect(self):
    period = decimal.Decimal(self.q.timestamp_period)
    ts = read_timestamps(self.q, self.query_pool, 0, 2 * len(self.calls))
    ents = [ProfileGraphEntry(self.dev.device, prg.name, 2 * j, 2 * j + 1, prg.profile_key) for j, prg in enumerate(self.runtimes)]
    Compiled.profile_events.append(ProfileGraphEvent(ents, [], [decimal.Decimal(t) * period / 1000 for t in ts]))
  @suppress_finalizing
  def __del__(self):
    if self.dev.closed: return
    dev, pool, cmd, q, qp = self.dev, self.pool, self.cmd, self.q, self.query_pool
    for w in self.wins + self.ras:   # queue-ordered: whoever gets a scratch next uses it after the graph's last replay
      if w is not None: w.free(dev.allocator)
    q.defer(self.last_seq, lambda: (lib.vkDestroyDescriptorPool(dev.vkdev, pool, NULL), lib.vkFreeCommandBuffers(dev.vkdev, q.pool, 1,
            ffi.new("VkCommandBuffer[1]", [cmd])), qp is not None and lib.vkDestroyQueryPool(dev.vkdev, qp, NULL)))
