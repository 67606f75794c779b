"""What a Vulkan device can do, as the compact string that travels in `Target.arch`.

The device reads features and limits once and encodes them here; the renderer (which may live in a compile worker that
must not open Vulkan) decodes them. `DEV=VULKAN::<arch>` can override the string; missing keys take the Vulkan minimums.
"""
from __future__ import annotations
import os
from dataclasses import dataclass, fields, replace

# every VULKAN_* switch is read through these two, when it is used (here, since compile workers never import vk.py): tinygrad's
# getenv caches the first value it read, and raises a bare ValueError on a malformed number
def env_text(name:str, default:str="") -> str: return os.environ.get(name, default)
def env_number(name:str, default:int|float, minimum:int|float=0):
  raw = os.environ.get(name, "")
  if not raw: return default
  try: val = type(default)(raw)
  except ValueError: val = None
  if val is None or val < minimum or val != val:
    raise ValueError(f"{name}={raw!r}: expected {'an integer' if isinstance(default, int) else 'a number'} >= {minimum} (default {default})")
  return val
# feature flags: what each one means on the device
FLAGS = {
  "f16": "shaderFloat16 + shaderInt16 + storageBuffer16BitAccess", "i16": "shaderInt16 + storageBuffer16BitAccess",
  "s16": "storageBuffer16BitAccess", "i8": "shaderInt8 + storageBuffer8BitAccess", "s8": "storageBuffer8BitAccess",
  "i64": "shaderInt64", "f64": "shaderFloat64", **{f"nan{w}": f"shaderSignedZeroInfNanPreserveFloat{w}" for w in (16, 32, 64)},
  "vec": "float4 loads and stores: a vec4 declaration of the binding where the view offset is aligned, packed scalars elsewhere (every device)",
  "bda": "bufferDeviceAddress (buffers past maxStorageBufferRange are passed by address, renderer/abi.py)",
  "spread": "long reductions spread over the workgroup to fit a loop budget (a renderer path, on for every device; see renderer/passes/loops.py)",
  "hoist": "reductions that read no launch index computed once per workgroup, in few workgroups (a renderer path; renderer/passes/hoist.py)",
  "group": "a reduction that reads the workgroup index but not every local dim shared by the lanes that differ only there, as tinygrad's "
           "GROUP (a renderer path: tinygrad groups one reduction of a kernel, a second fused in ran whole on each lane; renderer/passes/hoist.py)",
  "fillx": "local dims merged into x when x is narrower than a SIMD vector: llvmpipe packs invocations along x only (renderer/passes/simd.py)",
  "wide": "neighbouring workgroups of independent invocations joined along x, up to 256 invocations: llvmpipe takes each workgroup "
          "from its thread pool as a task (renderer/passes/simd.py widen)",
  "lanex": "local x is the local dim along which the fewest memory accesses scatter (llvmpipe gathers along x; renderer/passes/simd.py)",
  "texel": "read-only 32-bit buffers read through storage texel buffers (imageLoad), not storage buffers: llvmpipe loads a storage "
           "buffer lane by lane with a branch each, a texel buffer with one gather, ~10x cheaper; also one past maxStorageBufferRange "
           "that every workgroup reads whole, instead of split windows (renderer/plan.py texel_ok)",
  "texel4": "a texel buffer read only in aligned float4s (flag vec) is an RGBA32 one, a texel a load: one gather for 4 floats "
            "instead of 4 (renderer/plan.py texel_slots)",
  "tile": "a reduction's invocations take two launch indices' work each while their loads are shared, up to 64 accumulators (8x8): "
          "tinygrad's tiles stop at 4x4 (llvmpipe, whose loads cost several FMAs; renderer/passes/tile.py)",
  "rows": "a reduction tinygrad would share among a workgroup's lanes (GROUP) runs whole on each lane, rows on the lanes and unrolled "
          "by 4, where enough workgroups stay (llvmpipe: a matrix-vector product without barriers and with float4 loads; renderer/opts.py)",
  "quads": "the first upcast tinygrad makes along a broadcast is 4, not 3, and an elementwise kernel's lanes take 16 neighbours: "
           "float4 reads, one gather each from an RGBA32 texel buffer, and each invocation's index math and broadcast loads shared "
           "by more elements (llvmpipe; renderer/opts.py)",
  "denorm": "float32 denormals kept by arithmetic (measured by probe.py: no driver here reports shaderDenormPreserveFloat32; without it "
            "they may be flushed to zero)",
  "reach": "buffers past maxStorageBufferRange reached through windows and pieces of workgroups (abi.py REACH, SPLIT), not by address: "
           "where probe.py measured a load by address over twice as slow as one through a descriptor (lavapipe before Mesa 25; "
           "VULKAN_REACH=1/0 forces it on/off, VULKAN_DISABLE=reach off)",
  "vmm": "vulkanMemoryModel (a kernel with cooperative matrices is written in the Vulkan memory model; enabled only for them)",
  "fullsg": "computeFullSubgroups (a pipeline with cooperative matrices requires full subgroups; enabled only for them)",
  "sgsize": "subgroupSizeControl for compute (a pipeline with cooperative matrices gets the subgroup size its tensor cores assume, where "
            "the device's varies: AMD's wave32/64; enabled only for them)",
  "coopmat": "tensor cores: tinygrad's WMMA as OpCooperativeMatrixMulAddKHR on the shapes VK_KHR_cooperative_matrix reports at subgroup "
             "scope, through workgroup memory (renderer/coopmat.py); on by default where probe.py measured it faster than FMAs "
             "(VULKAN_COOPMAT=1/0 forces it on/off, VULKAN_DISABLE=coopmat off)",
  "early": "a kernel's pipeline made and warmed as soon as tinygrad has compiled it, before the rest of its schedule (a runtime path: "
           "the driver's compile, at vkCreateComputePipelines or at the first dispatch, runs beside tinygrad's codegen of the other "
           "kernels; tinygrad_vk/__init__.py, device.py `compiled`)",
  "share": "a kernel with more buffers than descriptors reaches the buffers of one memory block through one descriptor (a runtime path; "
           "off: each its own, the inputs past the descriptors gathered by copies; windows.py `place`)",
}
# what a flag needs besides its own feature (half: bitcasts between a half and its 16 bits need 16-bit integers)
REQUIRES = {"texel4": ("texel", "vec"), "quads": ("texel4",), "coopmat": ("vmm", "fullsg"), "f16": ("s16", "i16"), "i16": ("s16",), "i8": ("s8",),
            "nan16": ("f16",), "nan64": ("f64",)}
def with_requirements(flags:set[str]) -> set[str]:
  out = set(flags)
  while (more := {r for f in out for r in REQUIRES.get(f, ())} - out): out |= more
  return out
# VULKAN_DISABLE=<name,...> turns these off; each also takes the flags that require it
DISABLE_GROUPS = {n: {"nan16", "nan32", "nan64"} if n == "nan" else {f for f in FLAGS if n in with_requirements({f})}
                  for n in ("f16 i16 s16 i8 s8 i64 f64 nan bda vec spread hoist group fillx wide lanex texel texel4 tile rows quads share early "
                            "reach vmm fullsg sgsize coopmat").split()}

# workgroups along x: the runtime splits a launch past maxComputeWorkGroupCount[0] into dispatches (abi.py XBASE), so only tinygrad's
# int32 indexing bounds it
MAX_GROUPS_X = 2**31 - 1
# a view's element offset inside its binding is a multiple of this for the aligned pipeline: float4 accesses read vec4 directly
VEC_ALIGN = 4

@dataclass(frozen=True)
class Caps:
  flags: frozenset[str] = frozenset()
  align: int = 256                            # minStorageBufferOffsetAlignment
  wgsize: tuple[int, int, int] = (128, 128, 64)  # maxComputeWorkGroupSize
  wginv: int = 128                            # maxComputeWorkGroupInvocations
  wgcount: tuple[int, int, int] = (65535, 65535, 65535)  # maxComputeWorkGroupCount
  smem: int = 16384                           # maxComputeSharedMemorySize
  pc: int = 128                               # maxPushConstantsSize
  bufs: int = 4                               # maxPerStageDescriptorStorageBuffers
  range: int = 1 << 27                        # maxStorageBufferRange
  allocs: int = 4096                          # maxMemoryAllocationCount
  maxloop: int = 0                            # loop passes one invocation may make, 0: unbounded (llvmpipe: see renderer/passes/loops.py)
  vk: int = 11                                # the Vulkan version in use, 10*major+minor: min(instance, device, VULKAN_PROFILE)
  threads: int = 0                            # workgroups the device runs at once when known (llvmpipe: its threads), 0: a GPU
  texels: int = 0                             # maxTexelBufferElements (the "texel" path's bound on a texel buffer)
  sg: int = 0                                 # subgroupSize: the threads of a tensor core (flag coopmat)
  coop: tuple[int, ...] = ()                  # cooperative matrix shapes, M,N,K,A/B type,C type each (VkComponentTypeKHR; flag coopmat)
  # not the device's: 1 where tinygrad compiles inside a TinyJit call, whose graph replays what it compiles (device.py `arch`;
  # renderer/passes/tile.py TILE_MIN_WORK)
  jit: int = 0
  def __contains__(self, flag:str) -> bool: return flag in self.flags
  def meet(self, other:Caps) -> Caps:
    """What both devices can do. tinygrad compiles a kernel that spans devices (a sharded tensor's) once, for the first of them, and
    runs it on every one: devices used together must render alike."""
    loops = min((n for n in (self.maxloop, other.maxloop) if n), default=0)   # 0 is unbounded
    coop = self.coop if (self.coop, self.sg) == (other.coop, other.sg) else ()   # tensor cores only where both have the same ones
    return replace(self, flags=self.flags & other.flags, maxloop=loops, coop=coop, **{f.name: _tighter(f.name, getattr(self, f.name),
                   getattr(other, f.name)) for f in fields(Caps) if f.name not in ("flags", "maxloop", "coop")})
  def encode(self) -> str:
    def enc(v): return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return ",".join(sorted(self.flags) + [f"{f.name}={enc(getattr(self, f.name))}" for f in fields(self) if f.name != "flags" and
                                          (f.name not in ("coop", "jit") or getattr(self, f.name))])
  @staticmethod
  def decode(arch:str) -> Caps:   # unknown keys are ignored, missing ones take the defaults
    toks, names = [t.split("=", 1) for t in arch.split(",") if t], {f.name for f in fields(Caps)}
    kw: dict = {k: tuple(int(x) for x in v.split(".")) if k in ("wgsize", "wgcount", "coop") else int(v) for k, v in (t for t in toks if len(t) == 2)
                if k in names}
    return Caps(frozenset(t[0] for t in toks if len(t) == 1), **kw)

# the SPIR-V a kernel is emitted in and spirv-val/glslang's target environment, by the Vulkan version in use. Vulkan 1.1 takes
# SPIR-V up to 1.3, where 8-bit storage, float controls and physical storage buffers are SPV_KHR_* extensions the kernel declares;
# from Vulkan 1.2 on kernels are SPIR-V 1.5, where they are core (SPIR-V 1.6 would buy a compute kernel nothing).
@dataclass(frozen=True)
class SpirvTarget:
  env: str                   # glslang --target-env / spirv-val --target-env
  version: tuple[int, int]   # SPIR-V version
  @property
  def word(self) -> int: return self.version[0] << 16 | self.version[1] << 8   # the module header's version word
  @property
  def name(self) -> str: return f"SPIR-V {self.version[0]}.{self.version[1]} (target environment {self.env})"
  def core(self, ext:str) -> bool:   # SPIR-V extension `ext` is core in this version: nothing to declare
    return self.version >= {"SPV_KHR_16bit_storage": (1, 3), "SPV_KHR_storage_buffer_storage_class": (1, 3), "SPV_KHR_float_controls": (1, 4),
                            "SPV_KHR_8bit_storage": (1, 5), "SPV_KHR_physical_storage_buffer": (1, 5),
                            "SPV_KHR_vulkan_memory_model": (1, 5), "SPV_KHR_cooperative_matrix": (9, 9)}[ext]   # (9, 9): not core yet

SPIRV_1_3, SPIRV_1_5 = SpirvTarget("vulkan1.1", (1, 3)), SpirvTarget("vulkan1.2", (1, 5))
def spirv_target(caps:Caps) -> SpirvTarget: return SPIRV_1_3 if caps.vk < 12 else SPIRV_1_5
# Vulkan 1.0 devices (Android's 2021 baseline) are refused: 1.1 made core what every kernel needs (vkGetPhysicalDeviceProperties2,
# 16-bit storage's extension, VkMemoryAllocateFlagsInfo, vkCmdDispatchBase) and Android 10+ requires 1.1 on 64-bit devices
MIN_VK, MAX_VK = 11, 13   # MAX_VK: the newest version this code uses (maintenance4's maxBufferSize)
def vk_version(vk:int) -> int: return (vk // 10) << 22 | (vk % 10) << 12   # VK_MAKE_API_VERSION(0, major, minor, 0)
def vk_of(api_version:int) -> int: return 10 * (api_version >> 22) + ((api_version >> 12) & 0x3ff)

def disabled_flags(spec:str) -> set[str]:
  """The flags that VULKAN_DISABLE=<spec> removes. Unknown names are an error, so a typo never silently keeps a path on."""
  out: set[str] = set()
  for name in filter(None, (s.strip() for s in spec.split(","))):
    if name not in DISABLE_GROUPS: raise ValueError(f"VULKAN_DISABLE: unknown feature {name!r}, expected some of {', '.join(DISABLE_GROUPS)}")
    out.update(DISABLE_GROUPS[name])
  return out

# VULKAN_PROFILE=<name>[,<name>...] makes a device behave like a poorer one: a profile grants feature flags and caps limits, never
# raising what the device has. With several profiles a flag is on if any grants it and each limit is the tightest; a flag name is a
# profile granting just that flag (VULKAN_PROFILE=min,bda). Every profile keeps the renderer and runtime paths and what probe.py
# measured (what the driver really does). A profile's `vk` also lowers the API version the instance and device are created with, so
# the validation layer checks that version's rules. Every value is the device class's own, from the public source named in
# docs/capabilities.md ("Profiles"); a limit the source does not give is left at the device's. Flags follow REQUIRES.
RENDERER_PATHS = frozenset({"vec", "spread", "hoist", "group", "fillx", "wide", "lanex", "texel", "texel4", "tile", "rows", "quads", "share",
                            "early", "denorm", "reach"})
_VK11_MIN = dict(vk=11, align=256, wgsize=(128, 128, 64), wginv=128, smem=16384, pc=128, bufs=4, range=1 << 27, allocs=4096)
PROFILES: dict[str, tuple[frozenset[str], dict]] = {
  # the poorest conformant Vulkan 1.1 compute device: no optional feature, the required limits of the Vulkan 1.1 specification
  "min": (frozenset(), _VK11_MIN),
  # Khronos VP_ANDROID_baseline_2022 (revision 2): Vulkan 1.1.106, the Vulkan minimum limits, shaderInt16 but no 16-bit storage
  "android2022": (frozenset(), _VK11_MIN),
  # Raspberry Pi 4/5, Mesa v3dv (v3dv_device.c, v3dv_limits.h, broadcom/common/v3d_limits.h)
  "pi5": (frozenset({"s8", "s16", "bda", "nan32"}), dict(vk=13, align=32, wgsize=(256, 256, 256), wginv=256, smem=16384, pc=128, bufs=8,
                                                          range=1 << 30)),
  # Imagination PowerVR, Mesa pvr (pvr_physical_device.c)
  "powervr": (frozenset({"bda", "nan32"}), dict(vk=12, wgsize=(128, 128, 64), wginv=128, smem=16384, pc=128, bufs=4, range=1 << 27,
                                                 allocs=4096)),
  # Qualcomm Adreno 5xx-7xx, Qualcomm's driver: what Adreno 505/610/612/660/730 all report (as-en min_mobile_adreno.as)
  "adreno6": (frozenset(), dict(vk=11, wgsize=(512, 512, 64), wginv=512, smem=16384, pc=128, bufs=24, range=1 << 27)),
  # Apple M1-M3 through MoltenVK 1.2 (gpuinfo export in Vulkan-Profiles): no shaderFloat64
  "moltenvk": (frozenset({"s8", "i8", "s16", "i16", "f16", "i64", "bda", "nan16", "nan32"}),
               dict(vk=12, align=16, wgsize=(1024, 1024, 1024), wginv=1024, smem=32768, pc=4096, bufs=31, range=(1 << 32) - 1, allocs=1 << 30)),
  # Google SwiftShader (VkPhysicalDevice.cpp, VkConfig.hpp); every value as the real one reports it (Debian's chromium-common 156)
  "swiftshader": (frozenset({"bda", "nan32"}), dict(vk=13, align=256, wgsize=(256, 256, 64), wginv=256, smem=32768, pc=128, bufs=30,
                                                     range=1 << 30, allocs=4096, texels=65536)),
  # Intel Arc A380, Windows driver 0.405.161 (gpuinfo export in Vulkan-Profiles): no shaderFloat64, no shaderInt64
  "intel-arc": (frozenset({"s8", "i8", "s16", "i16", "f16", "bda", "nan16", "nan32"}),
                dict(vk=13, align=64, wgsize=(1024, 1024, 64), wginv=1024, smem=32768, pc=256, bufs=67107840, range=1073741820, allocs=8467072)),
}
# `mobile` (4 storage buffers per stage with bufferDeviceAddress) is the PowerVR class
ALIASES = {"mobile": "powervr"}
LOWER_BOUND = {"align", "threads"}   # limits where a poorer device has a larger value
LIMIT_NAMES = {"vk": "Vulkan API version", "align": "minStorageBufferOffsetAlignment", "wgsize": "maxComputeWorkGroupSize",
               "wginv": "maxComputeWorkGroupInvocations", "smem": "maxComputeSharedMemorySize", "pc": "maxPushConstantsSize",
               "bufs": "maxPerStageDescriptorStorageBuffers", "range": "maxStorageBufferRange", "allocs": "maxMemoryAllocationCount"}

def profile_names(spec:str) -> list[str]:
  names = [ALIASES.get(n, n) for n in (s.strip() for s in spec.split(",")) if n]
  for n in names:
    if n not in PROFILES and n not in FLAGS:
      raise ValueError(f"VULKAN_PROFILE: unknown profile {n!r}, expected {', '.join([*PROFILES, *ALIASES])} or feature names ({', '.join(FLAGS)})")
  return names

def profile_vk(spec:str) -> int|None:
  """The Vulkan version VULKAN_PROFILE=<spec> creates the instance with (the lowest of its profiles'), None when it sets none."""
  return min((PROFILES[n][1]["vk"] for n in profile_names(spec) if n in PROFILES), default=None)

def apply_profile(caps:Caps, spec:str) -> Caps:
  """caps as the profiles in VULKAN_PROFILE=<spec> allow them (never more than the device has)."""
  if not (names := profile_names(spec)): return caps
  granted = set(RENDERER_PATHS)
  limits: dict[str, object] = {}
  for name in names:
    if name in FLAGS: granted.add(name)
    else:
      granted |= PROFILES[name][0]
      for k, v in PROFILES[name][1].items(): limits[k] = _tighter(k, limits[k], v) if k in limits else v
  return replace(caps, flags=caps.flags & frozenset(with_requirements(granted)),
                 **{k: _tighter(k, getattr(caps, k), v) for k, v in limits.items()})

def _tighter(k:str, a, b):
  if isinstance(a, tuple): return tuple(min(x, y) for x, y in zip(a, b))
  return max(a, b) if k in LOWER_BOUND else min(a, b)

# tinygrad dtype short name (dtypes.<name>) -> (flag that makes it native, else "packed" / "pairs" / "emulated" / "refused", why).
# packed: stored 4 (8-bit) or 2 (16-bit) to a 32-bit word, computed in 32 bits; pairs: int64 as 32-bit pairs (both renderer/passes/packing.py);
# emulated: tinygrad rewrites it into other types (fp8 into bytes computed in float).
NEVER = "never"   # no flag makes the fp8 types native
DTYPE_RULES: dict[str, tuple[str|None, str, str]] = {
  "bool": ("s8", "packed", "without storageBuffer8BitAccess"),
  **dict.fromkeys(("char", "uchar"), ("i8", "packed", "without shaderInt8 + storageBuffer8BitAccess")),
  **dict.fromkeys(("short", "ushort"), ("i16", "packed", "without shaderInt16 + storageBuffer16BitAccess")),
  "int": (None, "", ""), "uint": (None, "", ""), "float": (None, "", ""),
  **dict.fromkeys(("long", "ulong"), ("i64", "pairs", "int pairs without shaderInt64")),
  "double": ("f64", "refused", "needs shaderFloat64"),
  "half": ("f16", "packed", "16-bit words computed in float without shaderFloat16 + shaderInt16 + storageBuffer16BitAccess "
                                  "(renderer/passes/half.py)"),
  "bfloat16": ("i16", "packed", "16-bit words computed in float without shaderInt16 + storageBuffer16BitAccess (renderer/passes/half.py)"),
  "fp8e4m3": (NEVER, "emulated", "bytes computed in float"), "fp8e5m2": (NEVER, "emulated", "bytes computed in float"),
  "fp8e4m3fnuz": (NEVER, "emulated", "bytes computed in float"), "fp8e5m2fnuz": (NEVER, "emulated", "bytes computed in float"),
}

SUPPORTED = ("native", "packed", "pairs")   # what the renderers declare in supported_dtypes()

def dtype_support(name:str, caps:Caps) -> str:
  """'native', 'packed' (in 32-bit words), 'pairs' (int64 in 32-bit pairs), 'emulated' (tinygrad rewrites it) or 'refused'."""
  native, other, _ = DTYPE_RULES[name]
  return "native" if native is None or native in caps else other
