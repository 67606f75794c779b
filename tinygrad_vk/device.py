"""VulkanDevice: one logical device and its compute queue, behind tinygrad's `Compiled`."""
from __future__ import annotations
import decimal, functools, os, re, time
import tinygrad_vk
from tinygrad.device import Compiled, ProfileDeviceEvent
from tinygrad.helpers import PROFILE
from tinygrad.renderer import Renderer
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new
from tinygrad_vk.caps import env_number
from tinygrad_vk.instance import instance, validation_messages
from tinygrad_vk.queue import CommandQueue, read_timestamps, FORKED
from tinygrad_vk.memory import VulkanAllocator, BUDGET_EXT
from tinygrad_vk.program import VulkanProgram
from tinygrad_vk.graph import VulkanGraph
from tinygrad_vk.renderer.glsl import GLSLRenderer
from tinygrad_vk.renderer.spirv import SPIRVRenderer

# tinygrad instantiates the first renderer DEV does not rule out: DEV=VULKAN:SPIRV / DEV=VULKAN:GLSL pick one by name
RENDERERS: list[type[Renderer]] = [SPIRVRenderer, GLSLRenderer]
CALIBRATED_EXT = "VK_EXT_calibrated_timestamps"
# the `vulkan` package maps the EXT names to None and computes VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_KHR wrongly (1000543000)
STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT = 1000184000
TIME_DOMAIN_DEVICE, TIME_DOMAIN_CLOCK_MONOTONIC = vk.VK_TIME_DOMAIN_DEVICE_KHR, vk.VK_TIME_DOMAIN_CLOCK_MONOTONIC_KHR

class VulkanDevice(Compiled):
  allocator: VulkanAllocator
  def __init__(self, device:str):
    inst = instance()
    if (m := re.fullmatch(r"VULKAN(?::(\d+))?", device)) is None:
      raise RuntimeError(f"VULKAN: no device {device!r}: expected VULKAN or VULKAN:<n> with n = 0, 1, ... (python -m tinygrad_vk info lists them)")
    self.closed, idx = False, int(m.group(1) or 0)
    if inst.pid != os.getpid(): raise RuntimeError(f"VULKAN: Vulkan was initialised before os.fork(): {FORKED}")
    max_cmds, timeout_s = env_number("VULKAN_BATCH", 64, 1), env_number("VULKAN_TIMEOUT_S", 300.0, 0.001)
    graph = VulkanGraph if env_number("VULKAN_GRAPH", 1) else None
    # VULKAN:n past the last physical device opens another logical device on one of them (multi-device tests on one GPU)
    self.phys = phys = inst.devices[idx % len(inst.devices)]
    if phys.queue_family is None: raise RuntimeError(f"VULKAN: {phys.name} has no compute queue")
    self.caps = caps = inst.caps(phys)
    # calibrated timestamps line GPU ranges up with tinygrad's CPU clock (time.perf_counter_ns is CLOCK_MONOTONIC)
    self.calibrated = CALIBRATED_EXT in phys.extensions and TIME_DOMAIN_CLOCK_MONOTONIC in phys.time_domains(inst)
    self.extensions = ([CALIBRATED_EXT] if self.calibrated else []) + [e for e in (BUDGET_EXT,) if e in phys.extensions]
    self.vkdev = phys.create_device(caps, self.extensions, phys.name)
    q = ffi.new("VkQueue*")
    lib.vkGetDeviceQueue(self.vkdev, phys.queue_family, 0, q)
    self.queue = CommandQueue(self, self.vkdev, q[0], phys.queue_family, phys.timestamp_bits, phys.limits["timestampPeriod"], max_cmds, timeout_s)
    self._layouts: dict[tuple[int, int, frozenset[int]], tuple] = {}
    self.gathered = 0   # inputs a windowed kernel copied into a scratch window (windows.py `place`)
    if PROFILE: Compiled.profile_events.append(ProfileDeviceEvent(device, self.clock_offset(), {"name": phys.name, "driver": phys.driver}))
    super().__init__(device, VulkanAllocator(self), RENDERERS, VulkanProgram, graph, arch=caps.encode())
  @property
  def arch(self) -> str:
    """The renderer's Target.arch: the device's caps, with `jit=1` while a TinyJit call runs (tinygrad_vk/__init__.py counts them)
    where the tile pass is on: the JIT's graph replays what is compiled there without tinygrad's eager launch, whose host time grows
    with a kernel's UOps, so bigger code pays back (renderer/passes/tile.py TILE_MIN_WORK). A distinct Target, so a renderer and
    compiled-kernel cache of its own: a kernel launched both eagerly and in a JIT compiles twice, hence only where it can differ."""
    return self._arch + (",jit=1" if tinygrad_vk.jit_calls and "tile" in self.caps else "")
  @arch.setter
  def arch(self, arch:str): self._arch = arch
  def compiled(self, prg):
    """A kernel tinygrad has just compiled, before the rest of its schedule (tinygrad_vk/__init__.py): with flag `early` its
    pipeline is made and its warm-up submitted now, so a driver that compiles at the first dispatch (lavapipe, on its queue's
    thread) does it beside tinygrad's codegen of the others. tinygrad's launch finds it in its runtime cache. Only where tinygrad's
    compile workers leave a core free (PARALLEL under the cores; 0 compiles in this process): where they fill every core the driver
    takes its CPU from them (measured on 2 cores, BERT's first training step: 10% faster with PARALLEL=0, 4% slower with 2 workers)."""
    from tinygrad.helpers import PARALLEL, NUM_CPU_THREADS
    if "early" not in self.caps or PARALLEL.value >= NUM_CPU_THREADS.value: return
    from tinygrad.engine.realize import get_runtime
    get_runtime(self.device, prg)   # an error is raised here, by the same realize() that would have raised it at the launch
    self.queue.flush()
  def proc(self, core:str, promoted:int, ext_name:str):
    """A device function that became core in Vulkan `promoted` (10*major+minor): the loader's core entry point where the version
    in use has it, else the extension's (vkGetBufferDeviceAddressKHR on Vulkan 1.1)."""
    if self.caps.vk >= promoted: return getattr(lib, core)
    if (fn := lib.vkGetDeviceProcAddr(self.vkdev, ext_name.encode())) == NULL: raise RuntimeError(f"VULKAN: {self.phys.name} has no {ext_name}")
    return ffi.cast(f"PFN_{ext_name}", fn)
  def pipeline_layout(self, nbufs:int, pc_size:int, texel:frozenset[int]=frozenset()) -> tuple:
    """A descriptor set layout and pipeline layout per (buffer count, push constant size, storage texel buffer bindings), shared by
    kernels."""
    if (key := (nbufs, pc_size, texel)) not in self._layouts:
      binds = ffi.new("VkDescriptorSetLayoutBinding[]", [{"binding": i, "descriptorType": vk.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER if i in texel
                                                          else vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                          "descriptorCount": 1, "stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT} for i in range(nbufs)])
      sl = ffi.new("VkDescriptorSetLayout*")
      check(lib.vkCreateDescriptorSetLayout(self.vkdev, new("VkDescriptorSetLayoutCreateInfo", bindingCount=nbufs, pBindings=binds), NULL, sl),
            "vkCreateDescriptorSetLayout")
      rng = ffi.new("VkPushConstantRange*", {"stageFlags": vk.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0, "size": pc_size})
      pl = ffi.new("VkPipelineLayout*")
      check(lib.vkCreatePipelineLayout(self.vkdev, new("VkPipelineLayoutCreateInfo", setLayoutCount=1, pSetLayouts=sl,
                                       pushConstantRangeCount=1 if pc_size else 0, pPushConstantRanges=rng), NULL, pl), "vkCreatePipelineLayout")
      self._layouts[key] = (sl[0], pl[0])
    return self._layouts[key]
  def synchronize(self): self.queue.synchronize()
  @functools.cached_property
  def scratch(self):
    """A small buffer that descriptors can point at when nothing reads them (see VulkanProgram._warm)."""
    return self.allocator.create(256, self.allocator.picker.mapped + self.allocator.picker.local, mapped=False)
  def clock_offset(self) -> decimal.Decimal:
    """CPU microseconds minus device microseconds at one instant."""
    period = decimal.Decimal(self.phys.limits["timestampPeriod"])
    if self.calibrated:
      fn = ffi.cast("PFN_vkGetCalibratedTimestampsEXT", lib.vkGetDeviceProcAddr(self.vkdev, b"vkGetCalibratedTimestampsEXT"))
      infos = ffi.new("VkCalibratedTimestampInfoEXT[2]", [{"sType": STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, "timeDomain": d}
                                                           for d in (TIME_DOMAIN_DEVICE, TIME_DOMAIN_CLOCK_MONOTONIC)])
      ts, dev = ffi.new("uint64_t[2]"), ffi.new("uint64_t*")
      check(fn(self.vkdev, 2, infos, ts, dev), "vkGetCalibratedTimestampsEXT")
      return decimal.Decimal(ts[1]) / 1000 - decimal.Decimal(ts[0] & self.queue.timestamp_mask) * period / 1000
    # no calibration: a timestamp executed between two CPU clock reads; take the middle
    with self.queue:
      b = self.queue.batch()
      if (q := b.timestamp()) is None: return decimal.Decimal(0)
    cpu0 = time.perf_counter_ns()
    self.queue.wait(b.seq)
    cpu1 = time.perf_counter_ns()
    return decimal.Decimal(cpu0 + cpu1) / 2000 - decimal.Decimal(read_timestamps(self.queue, b.query_pool, q, 1)[0]) * period / 1000
  def check_validation(self):
    if instance().validation and validation_messages:
      msgs = validation_messages[:]
      validation_messages.clear()
      raise RuntimeError(f"VULKAN validation layer reported {len(msgs)} message(s):\n" + "\n".join(msgs[:5]))
  def finalize(self):
    # the VkDevice is left to process exit: Buffer.__del__ may still run after this
    if not self.closed and self.queue.lost is None: self.queue.synchronize()
    self.closed = True
  def count(self) -> int: return len(instance().devices)
