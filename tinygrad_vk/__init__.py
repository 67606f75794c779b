"""tinygrad_vk: a Vulkan compute device for stock tinygrad, selected with DEV=VULKAN.

tinygrad finds DEV=FOO by importing `tinygrad.runtime.ops_foo`. The `tinygrad_vk.pth` start-up file calls `install()`, which puts
a meta-path finder in front of the normal ones: it answers that module name with a shim re-exporting `VulkanDevice`, and
registers VULKAN's per-kernel buffer limit when tinygrad's scheduler module loads. This module must stay import-light: it runs
in every interpreter of the environment, so nothing here imports tinygrad or vulkan.
"""
import sys, importlib, importlib.abc, importlib.machinery

# kernels may bind this many buffers; the device lowers it on open if its limits are tighter (see device.py)
DEFAULT_MAX_BUFS = 31

def register_max_bufs(rangeify_module, n:int) -> None:
  # tinygrad looks the limit up by the raw device string for single-device kernels, so "VULKAN:1" needs its own entry
  for i in range(16): rangeify_module.DEVICE_MAX_BUFS[f"VULKAN:{i}" if i else "VULKAN"] = n

class _DeviceMaxBufs(dict):
  """tinygrad's per-device kernel buffer limits. VULKAN's comes from the device (maxPerStageDescriptorStorageBuffers), which
  registers it when it opens (device.py); tinygrad schedules a tensor's kernels before it opens the device they run on, so
  asking for a VULKAN limit opens the device first."""
  def get(self, device, default=None):
    if isinstance(device, str) and device.split(":")[0] == "VULKAN":
      from tinygrad import Device
      Device[device]
    return super().get(device, default)

class _OpsVulkanLoader(importlib.abc.Loader):
  def create_module(self, spec): return None
  def exec_module(self, module):
    from tinygrad_vk.device import VulkanDevice
    module.VulkanDevice = VulkanDevice   # its __module__ stays tinygrad_vk.device, so pickling and workers find it

class _RegisterLimits(importlib.abc.Loader):
  def __init__(self, real): self.real = real
  def __getattr__(self, k): return getattr(self.real, k)
  def create_module(self, spec): return self.real.create_module(spec)
  def exec_module(self, module):
    self.real.exec_module(module)
    module.DEVICE_MAX_BUFS = _DeviceMaxBufs(module.DEVICE_MAX_BUFS)
    register_max_bufs(module, DEFAULT_MAX_BUFS)

class _Finder(importlib.abc.MetaPathFinder):
  def find_spec(self, fullname, path=None, target=None):
    if fullname == "tinygrad.runtime.ops_vulkan": return importlib.machinery.ModuleSpec(fullname, _OpsVulkanLoader())
    if fullname == "tinygrad.schedule.rangeify":
      spec = importlib.machinery.PathFinder.find_spec(fullname, path)
      if spec is not None and spec.loader is not None: spec.loader = _RegisterLimits(spec.loader)
      return spec
    return None

def install() -> None:
  if not any(type(f).__name__ == "_Finder" and type(f).__module__ == __name__ for f in sys.meta_path): sys.meta_path.insert(0, _Finder())
  if (rng := sys.modules.get("tinygrad.schedule.rangeify")) is not None and not isinstance(rng.DEVICE_MAX_BUFS, _DeviceMaxBufs):
    rng.DEVICE_MAX_BUFS = _DeviceMaxBufs(rng.DEVICE_MAX_BUFS)
    register_max_bufs(rng, DEFAULT_MAX_BUFS)

install()
