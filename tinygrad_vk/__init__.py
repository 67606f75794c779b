"""tinygrad_vk: a Vulkan compute device for stock tinygrad, selected with DEV=VULKAN.

tinygrad finds DEV=FOO by importing `tinygrad.runtime.ops_foo`. The `tinygrad_vk.pth` start-up file calls `install()`, which puts
a meta-path finder in front of the normal ones: it answers that module name with a shim re-exporting `VulkanDevice`, makes
tinygrad's scheduler read VULKAN's per-kernel buffer limit from the device, and makes tinygrad's optimizer heuristic ask the
kernel's renderer first (one with `hand_coded_optimizations(k, heuristic)`: VULKAN's, renderer/opts.py), and hands each kernel
to its device as soon as it is compiled (one with `compiled(program)`: VULKAN's makes its pipeline then), and counts the TinyJit
calls running (VULKAN's renderer tiles less outside them). This module must stay
import-light: it runs in every interpreter of the environment, so nothing here imports tinygrad or vulkan when it loads.
"""
import sys, importlib.abc, importlib.machinery

# kernels may bind at most this many buffers, fewer where the device allows fewer
DEFAULT_MAX_BUFS = 31

class _DeviceMaxBufs(dict):
  """tinygrad's DEVICE_MAX_BUFS (the buffers one kernel may bind, output included), whose VULKAN entries come from the device: one
  under what a kernel can take (renderer/abi.py `max_kernel_bufs`: the view offsets the push constants hold; never the descriptor
  count, which windows get past, so every device schedules the same kernels). One is kept in reserve because tinygrad's split
  (schedule/rangeify.py `_limit_bufs`) is best effort: it looks at one op's inputs and cannot split everywhere. The scheduler reads
  it before anything else opens the device, so the first look-up of a VULKAN device string ("VULKAN:1" for single-device kernels,
  "VULKAN" for multi-device ones) opens it."""
  def get(self, key, default=None):
    if isinstance(key, str) and key.split(":")[0] == "VULKAN" and key not in self:
      from typing import cast
      from tinygrad.device import Device
      from tinygrad_vk.device import VulkanDevice
      from tinygrad_vk.renderer.abi import max_kernel_bufs
      self[key] = max_kernel_bufs(cast(VulkanDevice, Device[key]).caps, DEFAULT_MAX_BUFS + 1) - 1
    return super().get(key, default)

def _device_limits(rangeify_module) -> None:
  if not isinstance(rangeify_module.DEVICE_MAX_BUFS, _DeviceMaxBufs):
    rangeify_module.DEVICE_MAX_BUFS = _DeviceMaxBufs(rangeify_module.DEVICE_MAX_BUFS)

def _renderer_heuristic(heuristic_module) -> None:
  """tinygrad's hand_coded_optimizations (looked up when a kernel is optimized, codegen/opt/postrange.py apply_opts) through the
  renderer's own where it has one: tinygrad has no hook for a backend's choices."""
  if hasattr(tinygrads := heuristic_module.hand_coded_optimizations, "tinygrads"): return
  def hand_coded_optimizations(k):
    own = getattr(k.ren, "hand_coded_optimizations", None)
    return tinygrads(k) if own is None else own(k, tinygrads)
  hand_coded_optimizations.tinygrads = tinygrads   # type: ignore[attr-defined]
  heuristic_module.hand_coded_optimizations = hand_coded_optimizations

class _ProgramsAsCompiled(dict):
  """tinygrad's cache of compiled kernels (codegen's to_program_cache), which engine/realize.py's lower_and_compile fills as each
  kernel of a schedule comes out of its compile workers, before it launches any: there, a kernel whose device has
  `compiled(program)` (VULKAN's: its pipeline made and warmed) is handed over as it comes, so the driver's compile runs beside
  tinygrad's codegen of the others, not after all of it. A kernel compiled elsewhere (to_program called to look at one) is not."""
  scheduled = 0   # lower_and_compile calls running
  def __setitem__(self, key, prg):
    super().__setitem__(key, prg)
    from tinygrad.device import Device
    from tinygrad.helpers import ALLOW_DEVICE_USAGE, BEAM, to_tuple
    if not self.scheduled or not ALLOW_DEVICE_USAGE or BEAM: return   # BEAM times each candidate in its own runtime
    for d in to_tuple(prg.device):
      if (own := getattr(Device[d], "compiled", None)) is not None: own(prg)

def _programs_as_compiled(realize_module) -> None:
  codegen = sys.modules["tinygrad.codegen"]
  if isinstance(cache := realize_module.to_program_cache, _ProgramsAsCompiled) or cache is not codegen.to_program_cache: return
  codegen.to_program_cache = realize_module.to_program_cache = mine = _ProgramsAsCompiled(cache)   # type: ignore[attr-defined]
  lower = realize_module.lower_and_compile
  def lower_and_compile(linear):
    mine.scheduled += 1
    try: return lower(linear)
    finally: mine.scheduled -= 1
  realize_module.lower_and_compile = lower_and_compile

jit_calls = 0   # TinyJit calls running now

def _count_jit_calls(jit_module) -> None:
  """tinygrad's TinyJit calls counted while they run (jit_calls): a kernel compiled inside one is replayed by the JIT's graph, one
  compiled outside is launched eagerly, and tinygrad has no flag that says which (device.py `arch` passes it to the renderer)."""
  if hasattr(call := jit_module._TinyJit.__call__, "counted"): return
  def __call__(self, *args, **kwargs):
    global jit_calls
    jit_calls += 1
    try: return call(self, *args, **kwargs)
    finally: jit_calls -= 1
  __call__.counted = True   # type: ignore[attr-defined]
  jit_module._TinyJit.__call__ = __call__

# what to change in a tinygrad module once it is loaded
_AFTER_LOAD = {"tinygrad.schedule.rangeify": _device_limits, "tinygrad.codegen.opt.heuristic": _renderer_heuristic,
               "tinygrad.engine.realize": _programs_as_compiled, "tinygrad.engine.jit": _count_jit_calls}

class _OpsVulkanLoader(importlib.abc.Loader):
  def create_module(self, spec): return None
  def exec_module(self, module):
    from tinygrad_vk.device import VulkanDevice
    module.VulkanDevice = VulkanDevice   # its __module__ stays tinygrad_vk.device, so pickling and workers find it

class _AfterLoad(importlib.abc.Loader):
  def __init__(self, real): self.real = real
  def __getattr__(self, k): return getattr(self.real, k)
  def create_module(self, spec): return self.real.create_module(spec)
  def exec_module(self, module):
    self.real.exec_module(module)
    _AFTER_LOAD[module.__name__](module)

class _Finder(importlib.abc.MetaPathFinder):
  def find_spec(self, fullname, path=None, target=None):
    if fullname == "tinygrad.runtime.ops_vulkan": return importlib.machinery.ModuleSpec(fullname, _OpsVulkanLoader())
    if fullname in _AFTER_LOAD:
      spec = importlib.machinery.PathFinder.find_spec(fullname, path)
      if spec is not None and spec.loader is not None: spec.loader = _AfterLoad(spec.loader)
      return spec
    return None

def install() -> None:
  if not any(type(f).__name__ == "_Finder" and type(f).__module__ == __name__ for f in sys.meta_path): sys.meta_path.insert(0, _Finder())
  for name, change in _AFTER_LOAD.items():
    if (module := sys.modules.get(name)) is not None: change(module)

install()
