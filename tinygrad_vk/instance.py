"""The process-wide VkInstance, the physical devices and what each can do.

Everything here is read once: `PhysicalDevice` holds the properties, features, limits and memory types that the device, the
allocator and (through `Caps`) the renderer need.
"""
from __future__ import annotations
import functools, os, sys
from dataclasses import dataclass, replace
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new, enumerate_, cstr, version_str, env_number
from tinygrad_vk.caps import Caps, disabled_flags, apply_profile

API_VERSION = (1 << 22) | (2 << 12)   # Vulkan 1.2: 8/16-bit storage, float16/int8 arithmetic and float controls are core
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEVICE_TYPES = {vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other", vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated GPU",
                vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete GPU", vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual GPU",
                vk.VK_PHYSICAL_DEVICE_TYPE_CPU: "CPU"}
# the default order of VULKAN:0, 1, ...: discrete, integrated, virtual GPUs, then the rest
DEVICE_ORDER = [vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU,
                vk.VK_PHYSICAL_DEVICE_TYPE_OTHER, vk.VK_PHYSICAL_DEVICE_TYPE_CPU]
# llvmpipe exits every loop of a shader invocation after 65535 back-edges in total (gallivm LP_MAX_TGSI_LOOP_ITERATIONS)
LLVMPIPE_LOOP_LIMIT = 65535
# llvmpipe runs workgroups on LP_NUM_THREADS threads (0: inline in the submitting thread), by default one per CPU, at most
# LP_MAX_THREADS (src/gallium/drivers/llvmpipe/lp_limits.h: 32 in the Mesa source checked, not the 22.3 tag; lp_screen.c)
def llvmpipe_threads() -> int: return max(1, min(32, env_number("LP_NUM_THREADS", os.cpu_count() or 1)))

# messages from the validation layer; VULKAN_VALIDATION=1 makes the device raise on them at the next synchronisation point
validation_messages: list[str] = []

@ffi.callback("VkBool32(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT, "
              "const VkDebugUtilsMessengerCallbackDataEXT*, void*)")
def _debug_callback(severity, types, data, user):
  msg = cstr(data.pMessage) if data.pMessage != NULL else "(no message)"
  validation_messages.append(msg)
  print(f"VULKAN validation: {msg}", file=sys.stderr)
  return 0

class Instance:
  def __init__(self):
    self.pid = os.getpid()   # a forked child must not use it
    self.validation = bool(env_number("VULKAN_VALIDATION", 0))
    layers = [VALIDATION_LAYER] if self.validation else []
    if layers and VALIDATION_LAYER not in {cstr(p.layerName) for p in enumerate_(lib.vkEnumerateInstanceLayerProperties, "VkLayerProperties")}:
      raise RuntimeError("VULKAN_VALIDATION=1 but the Khronos validation layer is not installed (apt install vulkan-validationlayers)")
    exts = [b"VK_EXT_debug_utils"] if self.validation else []
    avail = {cstr(p.extensionName) for p in enumerate_(lib.vkEnumerateInstanceExtensionProperties, "VkExtensionProperties", NULL)}
    flags = 0
    if "VK_KHR_portability_enumeration" in avail:   # MoltenVK only shows up with this
      exts.append(b"VK_KHR_portability_enumeration")
      flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
    self._keep = [ffi.new("char[]", e) for e in exts] + [ffi.new("char[]", l.encode()) for l in layers] + [ffi.new("char[]", b"tinygrad")]
    ext_arr = ffi.new("char*[]", self._keep[:len(exts)])
    layer_arr = ffi.new("char*[]", self._keep[len(exts):len(exts)+len(layers)])
    app = new("VkApplicationInfo", pApplicationName=self._keep[-1], pEngineName=self._keep[-1], apiVersion=API_VERSION)
    chain = NULL
    if self.validation:   # synchronisation validation catches missing barriers, the class of bug batching can introduce
      self._vfeat = ffi.new("VkValidationFeatureEnableEXT[]", [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
      chain = new("VkValidationFeaturesEXT", enabledValidationFeatureCount=1, pEnabledValidationFeatures=self._vfeat)
    info = new("VkInstanceCreateInfo", pNext=chain, flags=flags, pApplicationInfo=app, enabledLayerCount=len(layers),
               ppEnabledLayerNames=layer_arr, enabledExtensionCount=len(exts), ppEnabledExtensionNames=ext_arr)
    out = ffi.new("VkInstance*")
    res = lib.vkCreateInstance(info, NULL, out)
    if res == vk.VK_ERROR_INCOMPATIBLE_DRIVER:
      raise RuntimeError("VULKAN: no Vulkan driver found; install one (mesa-vulkan-drivers gives lavapipe on any CPU)")
    check(res, "vkCreateInstance")
    self.handle = out[0]
    if self.validation:
      create = ffi.cast("PFN_vkCreateDebugUtilsMessengerEXT", lib.vkGetInstanceProcAddr(self.handle, b"vkCreateDebugUtilsMessengerEXT"))
      minfo = new("VkDebugUtilsMessengerCreateInfoEXT",
                  messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
                  messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                              vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT, pfnUserCallback=_debug_callback)
      self.messenger = ffi.new("VkDebugUtilsMessengerEXT*")
      check(create(self.handle, minfo, NULL, self.messenger), "vkCreateDebugUtilsMessengerEXT")
    raw = enumerate_(lib.vkEnumeratePhysicalDevices, "VkPhysicalDevice", self.handle)
    if not raw: raise RuntimeError("VULKAN: the Vulkan loader found no devices; install a driver (mesa-vulkan-drivers gives lavapipe)")
    self.all = [PhysicalDevice(i, h) for i, h in enumerate(raw)]
    self.devices = select_devices(self.all, os.environ.get("VULKAN_DEVICES", ""))

def select_devices(phys:list[PhysicalDevice], spec:str) -> list[PhysicalDevice]:
  """VULKAN_DEVICES=2,0 picks by enumeration index. Otherwise GPUs first (discrete, integrated, virtual); CPU drivers such as
  lavapipe only when there is no GPU, so a machine with a GPU never silently runs on a CPU driver."""
  if spec:
    idx = [int(i) if i.strip().isdigit() else -1 for i in spec.split(",")]
    if any(not 0 <= i < len(phys) for i in idx):
      raise RuntimeError(f"VULKAN_DEVICES={spec!r}: expected comma-separated enumeration indices 0..{len(phys)-1} (see python -m tinygrad_vk info)")
    return [phys[i] for i in idx]
  usable = [p for p in phys if p.api_version >= API_VERSION]
  if not usable: raise RuntimeError(f"VULKAN: no device supports Vulkan 1.2 ({', '.join(f'{p.name}: {version_str(p.api_version)}' for p in phys)})")
  gpus = [p for p in usable if p.type != vk.VK_PHYSICAL_DEVICE_TYPE_CPU]
  return sorted(gpus or usable, key=lambda p: (DEVICE_ORDER.index(p.type) if p.type in DEVICE_ORDER else len(DEVICE_ORDER), p.index))

@dataclass
class MemoryType:
  index: int
  flags: int
  heap: int
  heap_size: int
  def has(self, *bits) -> bool: return all(self.flags & b for b in bits)

class PhysicalDevice:
  def __init__(self, index:int, handle):
    self.index, self.handle = index, handle
    p12 = new("VkPhysicalDeviceVulkan12Properties")
    p11 = new("VkPhysicalDeviceVulkan11Properties", pNext=p12)
    props = new("VkPhysicalDeviceProperties2", pNext=p11)
    lib.vkGetPhysicalDeviceProperties2(handle, props)
    pr, lim = props.properties, props.properties.limits
    self.name, self.type, self.api_version = cstr(pr.deviceName), pr.deviceType, pr.apiVersion
    self.driver, self.driver_id = f"{cstr(p12.driverName)} {cstr(p12.driverInfo)}".strip(), p12.driverID
    self.subgroup_size, self.max_alloc = p11.subgroupSize, p11.maxMemoryAllocationSize
    self.limits = {k: getattr(lim, k) for k in ("maxStorageBufferRange", "maxPushConstantsSize", "maxComputeSharedMemorySize",
                   "maxComputeWorkGroupInvocations", "maxPerStageDescriptorStorageBuffers", "minStorageBufferOffsetAlignment",
                   "timestampPeriod", "maxMemoryAllocationCount")}
    self.limits["maxComputeWorkGroupSize"] = tuple(lim.maxComputeWorkGroupSize)
    self.limits["maxComputeWorkGroupCount"] = tuple(lim.maxComputeWorkGroupCount)
    self.nan_preserve = {16: p12.shaderSignedZeroInfNanPreserveFloat16, 32: p12.shaderSignedZeroInfNanPreserveFloat32,
                         64: p12.shaderSignedZeroInfNanPreserveFloat64}
    self.extensions = {cstr(e.extensionName) for e in enumerate_(lib.vkEnumerateDeviceExtensionProperties, "VkExtensionProperties", handle, NULL)}
    self.max_buffer = self.max_alloc
    if self.api_version >= (1 << 22) | (3 << 12):   # maintenance4: the real buffer size limit, above the soft allocation limit
      m4 = new("VkPhysicalDeviceMaintenance4Properties")
      lib.vkGetPhysicalDeviceProperties2(handle, new("VkPhysicalDeviceProperties2", pNext=m4))
      self.max_buffer = m4.maxBufferSize
    # features
    f12 = new("VkPhysicalDeviceVulkan12Features")
    f11 = new("VkPhysicalDeviceVulkan11Features", pNext=f12)
    feats = new("VkPhysicalDeviceFeatures2", pNext=f11)
    lib.vkGetPhysicalDeviceFeatures2(handle, feats)
    f = feats.features
    self.features = {"shaderFloat64": f.shaderFloat64, "shaderInt64": f.shaderInt64, "shaderInt16": f.shaderInt16,
                     "storageBuffer16BitAccess": f11.storageBuffer16BitAccess, "storageBuffer8BitAccess": f12.storageBuffer8BitAccess,
                     "shaderFloat16": f12.shaderFloat16, "shaderInt8": f12.shaderInt8, "bufferDeviceAddress": f12.bufferDeviceAddress}
    mp = ffi.new("VkPhysicalDeviceMemoryProperties*")
    lib.vkGetPhysicalDeviceMemoryProperties(handle, mp)
    self.memory_types = [MemoryType(i, mp.memoryTypes[i].propertyFlags, mp.memoryTypes[i].heapIndex,
                                    mp.memoryHeaps[mp.memoryTypes[i].heapIndex].size) for i in range(mp.memoryTypeCount)]
    self.heaps = [(mp.memoryHeaps[i].size, mp.memoryHeaps[i].flags) for i in range(mp.memoryHeapCount)]
    qfs = enumerate_(lib.vkGetPhysicalDeviceQueueFamilyProperties, "VkQueueFamilyProperties", handle)
    self.queue_family = next((i for i, q in enumerate(qfs) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
    self.timestamp_bits = qfs[self.queue_family].timestampValidBits if self.queue_family is not None else 0

  def time_domains(self, inst) -> list[int]:
    fn = lib.vkGetInstanceProcAddr(inst.handle, b"vkGetPhysicalDeviceCalibrateableTimeDomainsEXT")
    if fn == NULL: return []
    return enumerate_(ffi.cast("PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT", fn), "VkTimeDomainEXT", self.handle)

  def flags(self) -> set[str]:
    """The feature flags this device has (caps.FLAGS), before VULKAN_DISABLE."""
    f, out = self.features, set()
    if f["storageBuffer16BitAccess"]:
      out.add("s16")
      if f["shaderInt16"]:
        out.add("i16")
        if f["shaderFloat16"]: out.add("f16")
    if f["storageBuffer8BitAccess"]:
      out.add("s8")
      if f["shaderInt8"]: out.add("i8")
    if f["shaderInt64"]: out.add("i64")
    if f["shaderFloat64"]: out.add("f64")
    if f["bufferDeviceAddress"]: out.add("bda")
    out |= {f"nan{w}" for w, ok in self.nan_preserve.items() if ok and (w == 32 or f"f{w}" in out)}
    if self.driver_id == vk.VK_DRIVER_ID_MESA_LLVMPIPE: out.add("fillx")   # its SIMD vectors run along local x only
    return out | {"vec", "spread", "hoist"}

  def real_caps(self) -> Caps:
    """What the device can do, before VULKAN_PROFILE and VULKAN_DISABLE."""
    lim = self.limits
    return Caps(frozenset(self.flags()), align=lim["minStorageBufferOffsetAlignment"], wgsize=lim["maxComputeWorkGroupSize"],
                wginv=lim["maxComputeWorkGroupInvocations"], wgcount=lim["maxComputeWorkGroupCount"], smem=lim["maxComputeSharedMemorySize"],
                pc=lim["maxPushConstantsSize"], bufs=lim["maxPerStageDescriptorStorageBuffers"],
                # VULKAN_MAX_STORAGE_RANGE lowers maxStorageBufferRange: small buffers then take the buffer-device-address path
                range=min(lim["maxStorageBufferRange"], env_number("VULKAN_MAX_STORAGE_RANGE", lim["maxStorageBufferRange"])),
                allocs=lim["maxMemoryAllocationCount"],
                threads=llvmpipe_threads() if self.driver_id == vk.VK_DRIVER_ID_MESA_LLVMPIPE else 0,
                maxloop=env_number("VULKAN_MAX_LOOP_ITERATIONS", LLVMPIPE_LOOP_LIMIT if self.driver_id == vk.VK_DRIVER_ID_MESA_LLVMPIPE else 0))

  def caps(self) -> Caps:
    """What tinygrad_vk uses: the device's capabilities as VULKAN_PROFILE allows them, less VULKAN_DISABLE."""
    caps = apply_profile(self.real_caps(), os.environ.get("VULKAN_PROFILE", ""))
    return replace(caps, flags=caps.flags - disabled_flags(os.environ.get("VULKAN_DISABLE", "")))

@functools.cache
def instance() -> Instance: return Instance()
