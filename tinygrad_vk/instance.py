"""The process-wide VkInstance and the physical devices: properties, features, limits and memory types, read once."""
from __future__ import annotations
import functools, os, sys
from typing import Any, cast
from dataclasses import dataclass, replace
from tinygrad_vk.vk import vk, ffi, lib, NULL, check, new, enumerate_, cstr, version_str
from tinygrad_vk.caps import Caps, disabled_flags, apply_profile, profile_vk, vk_version, vk_of, with_requirements, env_number, env_text, \
  MIN_VK, MAX_VK
from tinygrad_vk.probe import measure, ADDR_SLOW, COOP_FAST

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEVICE_TYPES = {vk.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other", vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated GPU",
                vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete GPU", vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual GPU",
                vk.VK_PHYSICAL_DEVICE_TYPE_CPU: "CPU"}
# the default order of VULKAN:0, 1, ...: discrete, integrated, virtual GPUs, then the rest
DEVICE_ORDER = [vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU,
                vk.VK_PHYSICAL_DEVICE_TYPE_OTHER, vk.VK_PHYSICAL_DEVICE_TYPE_CPU]
# llvmpipe runs workgroups on LP_NUM_THREADS threads (0: inline in the submitting thread), by default one per CPU, at most
# LP_MAX_THREADS (src/gallium/drivers/llvmpipe/lp_limits.h: 32 in the Mesa source checked, not the 22.3 tag; lp_screen.c)
def llvmpipe_threads() -> int: return max(1, min(32, env_number("LP_NUM_THREADS", os.cpu_count() or 1)))

# messages from the validation layer; the device raises on them at the next synchronisation point
validation_messages: list[str] = []

@ffi.callback("VkBool32(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT, "
              "const VkDebugUtilsMessengerCallbackDataEXT*, void*)")
def _debug_callback(severity, types, data, user):
  msg = cstr(data.pMessage) if data.pMessage != NULL else "(no message)"
  # newer layers (1.4) keep the message's id (SYNC-HAZARD-READ-AFTER-WRITE, a VUID) out of its text
  if data.pMessageIdName != NULL and (name := cstr(data.pMessageIdName)) not in msg: msg = f"[ {name} ] {msg}"
  validation_messages.append(msg)
  print(f"VULKAN validation: {msg}", file=sys.stderr)
  return 0

def loader_vk() -> int:
  v = ffi.new("uint32_t*", vk_version(10))
  try: check(lib.vkEnumerateInstanceVersion(v), "vkEnumerateInstanceVersion")
  except AttributeError: pass   # a Vulkan 1.0 loader has no vkEnumerateInstanceVersion
  if vk_of(v[0]) < MIN_VK: raise RuntimeError(f"VULKAN: the Vulkan loader is version {version_str(v[0])}; tinygrad_vk needs Vulkan 1.1")
  return vk_of(v[0])

class Instance:
  def __init__(self):
    self.pid = os.getpid()   # a forked child must not use it
    self.validation = bool(env_number("VULKAN_VALIDATION", 0))
    # the highest version both the loader and this code know, lowered by VULKAN_PROFILE; each device then uses the lower of
    # this and its own (the validation layer checks that version's rules)
    self.vk = min(loader_vk(), MAX_VK, profile_vk(env_text("VULKAN_PROFILE")) or MAX_VK)
    self.handle = self._create()
    if self.validation: self._listen()
    raw = enumerate_(lib.vkEnumeratePhysicalDevices, "VkPhysicalDevice", self.handle)
    if not raw: raise RuntimeError("VULKAN: the Vulkan loader found no devices; install a driver (mesa-vulkan-drivers gives lavapipe)")
    self.all = [PhysicalDevice(i, h, self.vk, self.handle) for i, h in enumerate(raw)]
    self.devices = select_devices(self.all, env_text("VULKAN_DEVICES"))
  def _create(self):
    layers, exts, flags, chain = [], [], 0, NULL
    if self.validation:
      if VALIDATION_LAYER not in {cstr(p.layerName) for p in enumerate_(lib.vkEnumerateInstanceLayerProperties, "VkLayerProperties")}:
        raise RuntimeError("VULKAN_VALIDATION=1 but the Khronos validation layer is not installed (apt install vulkan-validationlayers)")
      layers, exts = [VALIDATION_LAYER], [b"VK_EXT_debug_utils"]
      # synchronisation validation catches missing barriers, the class of bug batching can introduce. From layer 1.4 on it sees a
      # dispatch's accesses only by reading its SPIR-V when this setting is on (off by default: no hazard between dispatches is found)
      os.environ.setdefault("VK_KHRONOS_VALIDATION_SYNCVAL_SHADER_ACCESSES_HEURISTIC", "1")
      self._vfeat = ffi.new("VkValidationFeatureEnableEXT[]", [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT])
      chain = new("VkValidationFeaturesEXT", enabledValidationFeatureCount=1, pEnabledValidationFeatures=self._vfeat)
    if "VK_KHR_portability_enumeration" in {cstr(p.extensionName) for p in
                                            enumerate_(lib.vkEnumerateInstanceExtensionProperties, "VkExtensionProperties", NULL)}:
      exts.append(b"VK_KHR_portability_enumeration")   # MoltenVK only shows up with this
      flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
    self._keep = [ffi.new("char[]", e) for e in exts] + [ffi.new("char[]", l.encode()) for l in layers] + [ffi.new("char[]", b"tinygrad")]
    ext_arr = ffi.new("char*[]", self._keep[:len(exts)])
    layer_arr = ffi.new("char*[]", self._keep[len(exts):len(exts)+len(layers)])
    app = new("VkApplicationInfo", pApplicationName=self._keep[-1], pEngineName=self._keep[-1], apiVersion=vk_version(self.vk))
    info = new("VkInstanceCreateInfo", pNext=chain, flags=flags, pApplicationInfo=app, enabledLayerCount=len(layers),
               ppEnabledLayerNames=layer_arr, enabledExtensionCount=len(exts), ppEnabledExtensionNames=ext_arr)
    out = ffi.new("VkInstance*")
    res = lib.vkCreateInstance(info, NULL, out)
    if res == vk.VK_ERROR_INCOMPATIBLE_DRIVER:
      raise RuntimeError("VULKAN: no Vulkan driver found; install one (mesa-vulkan-drivers gives lavapipe on any CPU)")
    check(res, "vkCreateInstance")
    return out[0]
  def _listen(self):
    create = ffi.cast("PFN_vkCreateDebugUtilsMessengerEXT", lib.vkGetInstanceProcAddr(self.handle, b"vkCreateDebugUtilsMessengerEXT"))
    minfo = new("VkDebugUtilsMessengerCreateInfoEXT",
                messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
                messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT, pfnUserCallback=_debug_callback)
    self.messenger = ffi.new("VkDebugUtilsMessengerEXT*")
    check(create(self.handle, minfo, NULL, self.messenger), "vkCreateDebugUtilsMessengerEXT")
  def caps(self, phys:PhysicalDevice) -> Caps:
    """What tinygrad_vk renders and runs for on `phys`: its caps met with every other selected device's (Caps.meet). The same where
    the selected devices are alike; otherwise VULKAN_DEVICES keeps the richer one to itself."""
    return functools.reduce(Caps.meet, (p.caps() for p in self.devices if p is not phys), phys.caps())

def select_devices(phys:list[PhysicalDevice], spec:str) -> list[PhysicalDevice]:
  """VULKAN_DEVICES=2,0 picks by enumeration index. Otherwise GPUs first (discrete, integrated, virtual); CPU drivers such as
  lavapipe only when there is no GPU, so a machine with a GPU never silently runs on a CPU driver."""
  if spec:
    idx = [int(i) if i.strip().isdigit() else -1 for i in spec.split(",")]
    if any(not 0 <= i < len(phys) for i in idx):
      raise RuntimeError(f"VULKAN_DEVICES={spec!r}: expected comma-separated enumeration indices 0..{len(phys)-1} (see python -m tinygrad_vk info)")
    if (old := [phys[i] for i in idx if phys[i].vk < MIN_VK]):
      raise RuntimeError(f"VULKAN: {old[0].name} supports Vulkan {version_str(old[0].api_version)}; tinygrad_vk needs Vulkan 1.1")
    return [phys[i] for i in idx]
  usable = [p for p in phys if p.vk >= MIN_VK]
  if not usable: raise RuntimeError(f"VULKAN: no device supports Vulkan 1.1 ({', '.join(f'{p.name}: {version_str(p.api_version)}' for p in phys)})")
  gpus = [p for p in usable if p.type != vk.VK_PHYSICAL_DEVICE_TYPE_CPU]
  return sorted(gpus or usable, key=lambda p: (DEVICE_ORDER.index(p.type) if p.type in DEVICE_ORDER else len(DEVICE_ORDER), p.index))

@dataclass
class MemoryType:
  index: int
  flags: int
  heap: int
  heap_size: int

COOPMAT = "VK_KHR_cooperative_matrix"
# the pNext structs read (and enabled): name -> (sType, the Vulkan version it is core in, the device extension that has it before).
# One used only where the device's version or extensions have it: on Vulkan 1.1 that is the extension's.
STRUCTS = {
  "VkPhysicalDeviceSubgroupProperties": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, 11, None),
  "VkPhysicalDeviceMaintenance3Properties": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, 11, None),
  "VkPhysicalDeviceDriverProperties": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, 12, "VK_KHR_driver_properties"),
  "VkPhysicalDeviceFloatControlsProperties": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES, 12, "VK_KHR_shader_float_controls"),
  "VkPhysicalDeviceMaintenance4Properties": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES, 13, "VK_KHR_maintenance4"),
  "VkPhysicalDeviceSubgroupSizeControlProperties": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES, 13,
                                                    "VK_EXT_subgroup_size_control"),
  "VkPhysicalDevice16BitStorageFeatures": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, 11, None),
  "VkPhysicalDevice8BitStorageFeatures": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, 12, "VK_KHR_8bit_storage"),
  "VkPhysicalDeviceShaderFloat16Int8Features": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, 12, "VK_KHR_shader_float16_int8"),
  "VkPhysicalDeviceBufferDeviceAddressFeatures": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES, 12,
                                                  "VK_KHR_buffer_device_address"),
  "VkPhysicalDeviceVulkanMemoryModelFeatures": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES, 12,
                                                "VK_KHR_vulkan_memory_model"),
  "VkPhysicalDeviceSubgroupSizeControlFeatures": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, 13,
                                                  "VK_EXT_subgroup_size_control"),
  "VkPhysicalDeviceCooperativeMatrixFeaturesKHR": (vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, 99, COOPMAT),
}
# each feature tinygrad_vk enables: the flag that uses it (caps.FLAGS) and its struct (None: VkPhysicalDeviceFeatures)
FEATURES = {"shaderFloat64": ("f64", None), "shaderInt64": ("i64", None), "shaderInt16": ("i16", None),
            "storageBuffer16BitAccess": ("s16", "VkPhysicalDevice16BitStorageFeatures"),
            "storageBuffer8BitAccess": ("s8", "VkPhysicalDevice8BitStorageFeatures"),
            "shaderFloat16": ("f16", "VkPhysicalDeviceShaderFloat16Int8Features"), "shaderInt8": ("i8", "VkPhysicalDeviceShaderFloat16Int8Features"),
            "bufferDeviceAddress": ("bda", "VkPhysicalDeviceBufferDeviceAddressFeatures"),
            "vulkanMemoryModel": ("vmm", "VkPhysicalDeviceVulkanMemoryModelFeatures"),
            "computeFullSubgroups": ("fullsg", "VkPhysicalDeviceSubgroupSizeControlFeatures"),
            "subgroupSizeControl": ("sgsize", "VkPhysicalDeviceSubgroupSizeControlFeatures"),
            "cooperativeMatrix": ("coopmat", "VkPhysicalDeviceCooperativeMatrixFeaturesKHR")}
FLOAT_CONTROLS = "VkPhysicalDeviceFloatControlsProperties"   # the nan flags' SPIR-V needs its extension enabled on Vulkan 1.1
# MoltenVK: a device that advertises it must have it enabled. Its features (events, image views, samplers, tessellation, vertex
# input, triangle fans) are all graphics or objects tinygrad_vk never creates, so there is nothing else to respect.
PORTABILITY_SUBSET = "VK_KHR_portability_subset"

def chain(structs:dict[str, Any]) -> Any:
  """Link the structs (pointers from `new`) into one pNext chain; the first one's pointer, or NULL."""
  ptrs = list(structs.values())
  for a, b in zip(ptrs, ptrs[1:]): a.pNext = b
  return ptrs[0] if ptrs else NULL

class PhysicalDevice:
  def __init__(self, index:int, handle, instance_vk:int=MAX_VK, inst=NULL):
    self.index, self.handle, self.inst = index, handle, inst
    base = ffi.new("VkPhysicalDeviceProperties*")
    lib.vkGetPhysicalDeviceProperties(handle, base)
    self.name, self.type, self.api_version, self.driver_version = cstr(base.deviceName), base.deviceType, base.apiVersion, base.driverVersion
    self.vk = min(vk_of(self.api_version), instance_vk)   # the version in use: the instance's apiVersion caps the device's
    self.extensions = {cstr(e.extensionName) for e in enumerate_(lib.vkEnumerateDeviceExtensionProperties, "VkExtensionProperties", handle, NULL)}
    if self.vk < MIN_VK: return   # refused by select_devices; nothing past Vulkan 1.0 may be called on it
    ps = {n: new(n, sType=STRUCTS[n][0]) for n in STRUCTS if "Properties" in n and self.has(n)}
    props = new("VkPhysicalDeviceProperties2", pNext=chain(ps))
    lib.vkGetPhysicalDeviceProperties2(handle, props)
    pr, lim = props.properties, props.properties.limits
    drv = ps.get("VkPhysicalDeviceDriverProperties")
    self.driver_id: int
    self.driver, self.driver_id = ((f"{cstr(drv.driverName)} {cstr(drv.driverInfo)}".strip(), drv.driverID) if drv else
                                   (f"driver {pr.driverVersion:#x}", 0))
    self.subgroup_size = ps["VkPhysicalDeviceSubgroupProperties"].subgroupSize
    sc = ps.get("VkPhysicalDeviceSubgroupSizeControlProperties")
    # the subgroup sizes a pipeline may get (one, or a range), and whether a compute pipeline may require one
    self.min_subgroup, self.max_subgroup = (sc.minSubgroupSize, sc.maxSubgroupSize) if sc else (self.subgroup_size, self.subgroup_size)
    self.size_control = bool(sc and sc.requiredSubgroupSizeStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
    self.max_alloc = ps["VkPhysicalDeviceMaintenance3Properties"].maxMemoryAllocationSize
    # maintenance4: the real buffer size limit, above the soft allocation limit
    self.max_buffer = m4.maxBufferSize if (m4 := ps.get("VkPhysicalDeviceMaintenance4Properties")) else self.max_alloc
    self.limits = {k: getattr(lim, k) for k in ("maxStorageBufferRange", "maxPushConstantsSize", "maxComputeSharedMemorySize",
                   "maxComputeWorkGroupInvocations", "maxPerStageDescriptorStorageBuffers", "minStorageBufferOffsetAlignment",
                   "timestampPeriod", "maxMemoryAllocationCount", "maxTexelBufferElements", "minTexelBufferOffsetAlignment")}
    self.limits["maxComputeWorkGroupSize"] = tuple(lim.maxComputeWorkGroupSize)
    self.limits["maxComputeWorkGroupCount"] = tuple(lim.maxComputeWorkGroupCount)
    fc = ps.get(FLOAT_CONTROLS)
    self.nan_preserve = {w: bool(fc and getattr(fc, f"shaderSignedZeroInfNanPreserveFloat{w}")) for w in (16, 32, 64)}
    self._read_features()
    self._read_memory()
    self.coop_shapes = self._read_coop_shapes() if self.features["cooperativeMatrix"] and self.inst != NULL else ()
    qfs = enumerate_(lib.vkGetPhysicalDeviceQueueFamilyProperties, "VkQueueFamilyProperties", handle)
    self.queue_family = next((i for i, q in enumerate(qfs) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
    self.timestamp_bits = qfs[self.queue_family].timestampValidBits if self.queue_family is not None else 0
  def _read_features(self):
    fs = {n: new(n, sType=STRUCTS[n][0]) for n in STRUCTS if "Features" in n and self.has(n)}
    feats = new("VkPhysicalDeviceFeatures2", pNext=chain(fs))
    lib.vkGetPhysicalDeviceFeatures2(self.handle, feats)
    self.features = {f: bool((src := feats.features if st is None else fs.get(st)) is not None and getattr(src, f))
                     for f, (_, st) in FEATURES.items()}
  def _read_coop_shapes(self) -> tuple[int, ...]:
    """The cooperative matrix shapes a tensor core can use: subgroup scope, A and B of one type, C and the result of one, no
    saturation; M,N,K,A type,C type each (caps.Caps.coop)."""
    fn = lib.vkGetInstanceProcAddr(self.inst, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if fn == NULL: return ()
    props = enumerate_(ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", fn), "VkCooperativeMatrixPropertiesKHR", self.handle,
                       sType=vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR)
    return tuple(v for p in props if p.scope == vk.VK_SCOPE_SUBGROUP_KHR and p.AType == p.BType and p.CType == p.ResultType and
                 not p.saturatingAccumulation for v in (p.MSize, p.NSize, p.KSize, p.AType, p.CType))
  def _read_memory(self):
    mp = ffi.new("VkPhysicalDeviceMemoryProperties*")
    lib.vkGetPhysicalDeviceMemoryProperties(self.handle, mp)
    self.memory_types = [MemoryType(i, mp.memoryTypes[i].propertyFlags, mp.memoryTypes[i].heapIndex,
                                    mp.memoryHeaps[mp.memoryTypes[i].heapIndex].size) for i in range(mp.memoryTypeCount)]
    self.heaps = [(mp.memoryHeaps[i].size, mp.memoryHeaps[i].flags) for i in range(mp.memoryHeapCount)]
  def has(self, struct:str) -> bool:   # core in the version in use, or its extension is offered
    _, core, ext = STRUCTS[struct]
    return self.vk >= core or ext in self.extensions
  def device_features(self, caps:Caps) -> tuple[Any, list[str], list]:
    """For vkCreateDevice: the VkPhysicalDeviceFeatures2 chain enabling exactly the features `caps` uses (a turned-off one then
    really is unavailable), the device extensions they need on this version, and the structs to keep alive until the call."""
    structs: dict[str, Any] = {}
    exts = [cast(str, STRUCTS[FLOAT_CONTROLS][2])] if self.vk < STRUCTS[FLOAT_CONTROLS][1] and any(f.startswith("nan") for f in caps.flags) else []
    feats = new("VkPhysicalDeviceFeatures2")
    for feat, (flag, st) in FEATURES.items():
      if flag not in caps: continue
      if st is not None and st not in structs:
        structs[st] = new(st, sType=STRUCTS[st][0])
        if self.vk < STRUCTS[st][1]: exts.append(cast(str, STRUCTS[st][2]))   # a struct core after Vulkan 1.1 has its extension
      setattr(structs[st] if st else feats.features, feat, 1)
    feats.pNext = chain(structs)
    if PORTABILITY_SUBSET in self.extensions: exts.append(PORTABILITY_SUBSET)
    return feats, exts, list(structs.values())
  def create_device(self, caps:Caps, exts:list[str], what:str):
    """A VkDevice with one queue of the compute family, the features `caps` uses and the extensions `exts` and they need."""
    feats, feat_exts, keep = self.device_features(caps)
    # cffi does not keep what a struct field points to alive: every pointee needs a name until the call returns
    names, prio, out = [ffi.new("char[]", e.encode()) for e in exts + feat_exts], ffi.new("float[1]", [1.0]), ffi.new("VkDevice*")
    name_arr = ffi.new("char*[]", names)
    qinfo = new("VkDeviceQueueCreateInfo", queueFamilyIndex=self.queue_family, queueCount=1, pQueuePriorities=prio)
    info = new("VkDeviceCreateInfo", pNext=feats, queueCreateInfoCount=1, pQueueCreateInfos=qinfo, enabledExtensionCount=len(names),
               ppEnabledExtensionNames=name_arr)
    check(lib.vkCreateDevice(self.handle, info, NULL, out), f"vkCreateDevice ({what})")
    del keep
    return out[0]
  def time_domains(self, inst) -> list[int]:
    fn = lib.vkGetInstanceProcAddr(inst.handle, b"vkGetPhysicalDeviceCalibrateableTimeDomainsEXT")
    if fn == NULL: return []
    return enumerate_(ffi.cast("PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT", fn), "VkTimeDomainEXT", self.handle)
  def feature_flags(self) -> set[str]: return {flag for feat, (flag, _) in FEATURES.items() if self.features[feat]}
  def flags(self) -> set[str]:
    """The feature flags this device has (caps.FLAGS), before VULKAN_DISABLE: each with what it requires (caps.REQUIRES)."""
    have = self.feature_flags() | {f"nan{w}" for w, ok in self.nan_preserve.items() if ok}
    # renderer paths any device has
    out = {flag for flag in have if with_requirements({flag}) <= have} | {"vec", "spread", "hoist", "group", "share", "early"}
    if measure(self).denorm32: out.add("denorm")
    # tensor cores where the device has shapes for them, where measured faster than FMAs (probe.py COOP_KERNEL); VULKAN_COOPMAT=1/0
    # forces them on/off. Their pipelines get subgroupSize (program.py); where it varies (AMD's wave32/64) that needs size control
    if not (self.size_control and "sgsize" in out): out.discard("sgsize")
    faster = int(bool(self.coop_shapes) and measure(self).coop_speedup > COOP_FAST)
    if not (self.coop_shapes and (self.min_subgroup == self.max_subgroup or "sgsize" in out) and env_number("VULKAN_COOPMAT", faster)):
      out.discard("coopmat")
    # what only cooperative matrices use stays off without them: with vulkanMemoryModel enabled, Device-scope atomics (packing.py's)
    # would need vulkanMemoryModelDeviceScope too
    if "coopmat" not in out: out -= {"vmm", "fullsg", "sgsize"}
    # by address where measured much slower than by descriptor (probe.py ADDR_KERNEL): buffers past the range in windows and pieces;
    # VULKAN_REACH=1 takes that path whatever was measured (tests on drivers where it was not), 0 never
    if "bda" in out and env_number("VULKAN_REACH", int(measure(self).address_cost > ADDR_SLOW)): out.add("reach")
    if self.driver_id == vk.VK_DRIVER_ID_MESA_LLVMPIPE:
      # SIMD vectors along local x only, a task per workgroup, a load costs several FMAs, a barrier ends a coroutine
      out |= {"fillx", "wide", "lanex", "tile", "rows"}
      # gallivm loads a storage buffer lane by lane, a branch and a bounds check each (lp_bld_nir_soa.c emit_load_mem), a texel
      # buffer with one gather (scripts/load_cost.py). The "texel" path reads every 32-bit type as R32_UINT texels, "texel4" aligned
      # float4s as R32G32B32A32_UINT ones: a gather of 4 floats costs about what one of a float does (scripts/vkfloor.py)
      for fmt, flag in ((vk.VK_FORMAT_R32_UINT, "texel"), (vk.VK_FORMAT_R32G32B32A32_UINT, "texel4")):
        lib.vkGetPhysicalDeviceFormatProperties(self.handle, fmt, fp := ffi.new("VkFormatProperties*"))
        if fp.bufferFeatures & vk.VK_FORMAT_FEATURE_STORAGE_TEXEL_BUFFER_BIT and with_requirements({flag}) - {flag} <= out: out.add(flag)
      # a float4 from an RGBA32 texel buffer costs a gather, as one float does: lanes read in float4s (renderer/opts.py quads)
      if "texel4" in out: out.add("quads")
    return out
  def real_caps(self) -> Caps:
    """What the device can do, before VULKAN_PROFILE and VULKAN_DISABLE."""
    lim, flags = self.limits, self.flags()
    # a texel buffer's view starts where the storage buffer's binding would: aligned for both
    align = max(lim["minStorageBufferOffsetAlignment"], lim["minTexelBufferOffsetAlignment"] if "texel" in flags else 1)
    return Caps(frozenset(flags), align=align, wgsize=lim["maxComputeWorkGroupSize"],
                wginv=lim["maxComputeWorkGroupInvocations"], wgcount=lim["maxComputeWorkGroupCount"], smem=lim["maxComputeSharedMemorySize"],
                pc=lim["maxPushConstantsSize"], bufs=lim["maxPerStageDescriptorStorageBuffers"],
                # VULKAN_MAX_STORAGE_RANGE lowers maxStorageBufferRange: small buffers then take the buffer-device-address path
                range=min(lim["maxStorageBufferRange"], env_number("VULKAN_MAX_STORAGE_RANGE", lim["maxStorageBufferRange"])),
                allocs=lim["maxMemoryAllocationCount"], vk=self.vk, texels=lim["maxTexelBufferElements"],
                threads=llvmpipe_threads() if self.driver_id == vk.VK_DRIVER_ID_MESA_LLVMPIPE else 0,
                sg=self.subgroup_size, coop=self.coop_shapes if "coopmat" in flags else (),
                maxloop=self.loop_budget())
  def loop_budget(self) -> int:
    """Loop passes one invocation may make (0: unbounded), as measured (probe.py). VULKAN_MAX_LOOP_ITERATIONS may lower a driver's
    real limit, never raise it: llvmpipe before Mesa 25.0 silently ends a loop past its limit, so a higher budget would return wrong
    results."""
    limit = measure(self).loop_limit
    n = env_number("VULKAN_MAX_LOOP_ITERATIONS", limit)
    if limit and not 0 < n <= limit:
      raise RuntimeError(f"VULKAN_MAX_LOOP_ITERATIONS={n}: {self.name} ends every loop after {limit} passes without a word, so the "
                         f"loop budget may only be lowered (1..{limit})")
    return n
  def caps(self) -> Caps:
    """What tinygrad_vk uses: the device's capabilities as VULKAN_PROFILE allows them, less VULKAN_DISABLE."""
    caps = apply_profile(self.real_caps(), env_text("VULKAN_PROFILE"))
    return replace(caps, flags=caps.flags - disabled_flags(env_text("VULKAN_DISABLE")))

@functools.cache
def instance() -> Instance: return Instance()
