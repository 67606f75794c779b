"""What a Vulkan device can do, as the compact string that travels in `Target.arch`.

The device reads features and limits once and encodes them here; the renderer (which may live in a compile worker that
must not open Vulkan) decodes them. `DEV=VULKAN::<arch>` can override the string; missing keys take the Vulkan minimums.
"""
from __future__ import annotations
from dataclasses import dataclass, fields, replace

# feature flags: what each one means on the device
FLAGS = {
  "f16": "shaderFloat16 + shaderInt16 + storageBuffer16BitAccess",
  "i16": "shaderInt16 + storageBuffer16BitAccess",
  "s16": "storageBuffer16BitAccess",
  "i8": "shaderInt8 + storageBuffer8BitAccess",
  "s8": "storageBuffer8BitAccess",
  "i64": "shaderInt64",
  "f64": "shaderFloat64",
  "nan16": "shaderSignedZeroInfNanPreserveFloat16",
  "nan32": "shaderSignedZeroInfNanPreserveFloat32",
  "nan64": "shaderSignedZeroInfNanPreserveFloat64",
  "vec": "float4 loads and stores: a vec4 declaration of the binding where the view offset is aligned, packed scalars elsewhere (every device)",
  "bda": "bufferDeviceAddress (buffers past maxStorageBufferRange are passed by address, renderer/abi.py)",
  "spread": "long reductions spread over the workgroup to fit a loop budget (a renderer path, on for every device; see renderer/loops.py)",
  "hoist": "reductions that read no launch index computed once per workgroup, in few workgroups (a renderer path; renderer/hoist.py)",
  "fillx": "local dims merged into x when x is narrower than a SIMD vector: the driver packs invocations along x only (llvmpipe; renderer/simd.py)",
}
# what a flag needs besides its own feature (half: bitcasts between a half and its 16 bits need 16-bit integers)
REQUIRES = {"f16": ("s16", "i16"), "i16": ("s16",), "i8": ("s8",), "nan16": ("f16",), "nan64": ("f64",)}
# VULKAN_DISABLE=<name,...> turns these off; each also takes the flags that depend on it with it
DISABLE_GROUPS = {"f16": ("f16", "nan16"), "i16": ("i16", "f16", "nan16"), "s16": ("s16", "f16", "i16", "nan16"), "i8": ("i8",),
                  "s8": ("s8", "i8"), "i64": ("i64",), "f64": ("f64", "nan64"), "nan": ("nan16", "nan32", "nan64"), "bda": ("bda",),
                  "vec": ("vec",), "spread": ("spread",), "hoist": ("hoist",), "fillx": ("fillx",)}

# workgroups along x: the runtime splits a launch past maxComputeWorkGroupCount[0] with vkCmdDispatchBase, so only tinygrad's
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
  maxloop: int = 0                            # loop passes one invocation may make, 0: unbounded (llvmpipe: see renderer/loops.py)
  threads: int = 0                            # workgroups the device runs at once when known (llvmpipe: its threads), 0: a GPU

  def __contains__(self, flag:str) -> bool: return flag in self.flags

  def encode(self) -> str:
    def enc(v): return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return ",".join(sorted(self.flags) + [f"{f.name}={enc(getattr(self, f.name))}" for f in fields(self) if f.name != "flags"])

  @staticmethod
  def decode(arch:str) -> Caps:
    kw: dict = {}
    flags = set()
    for tok in filter(None, arch.split(",")):
      if "=" not in tok:
        flags.add(tok)
        continue
      k, v = tok.split("=", 1)
      if k in {"wgsize", "wgcount"}: kw[k] = tuple(int(x) for x in v.split("."))
      elif k in {f.name for f in fields(Caps)}: kw[k] = int(v)
    return Caps(frozenset(flags), **kw)

def disabled_flags(spec:str) -> set[str]:
  """The flags that VULKAN_DISABLE=<spec> removes. Unknown names are an error, so a typo never silently keeps a path on."""
  out: set[str] = set()
  for name in filter(None, (s.strip() for s in spec.split(","))):
    if name not in DISABLE_GROUPS: raise ValueError(f"VULKAN_DISABLE: unknown feature {name!r}, expected some of {', '.join(DISABLE_GROUPS)}")
    out.update(DISABLE_GROUPS[name])
  return out

# VULKAN_PROFILE=<name>[,<name>...] makes a device behave like a poorer one: a profile grants feature flags and caps limits, and
# only ever lowers what the device has. With several profiles a flag is on if any grants it and each limit is the tightest; a
# flag name is a profile granting just that flag (VULKAN_PROFILE=min,bda). Renderer paths are not device features: every profile keeps them.
RENDERER_PATHS = frozenset({"vec", "spread", "hoist", "fillx"})
PROFILES: dict[str, tuple[frozenset[str], dict]] = {
  # the Vulkan 1.2 required minimums: no optional feature at all
  "min": (frozenset(), dict(align=256, wgsize=(128, 128, 64), wginv=128, smem=16384, pc=128, bufs=4, range=1 << 27, allocs=4096)),
  # a typical Mali/Adreno phone (sources in docs/capabilities.md): Android's 2022 baseline limits, 4 storage buffers per stage
  # (older Mali drivers), no 8-bit storage (Adreno), no 16-bit storage, int64, float64 or float controls (not in that baseline),
  # buffer device address
  "mobile": (frozenset({"bda"}), dict(align=256, wgsize=(128, 128, 128), wginv=128, smem=32768, pc=128, bufs=4, range=1 << 28)),
}
LOWER_BOUND = {"align"}   # limits where a poorer device has a larger value
LIMIT_NAMES = {"align": "minStorageBufferOffsetAlignment", "wgsize": "maxComputeWorkGroupSize", "wginv": "maxComputeWorkGroupInvocations",
               "smem": "maxComputeSharedMemorySize", "pc": "maxPushConstantsSize", "bufs": "maxPerStageDescriptorStorageBuffers",
               "range": "maxStorageBufferRange", "allocs": "maxMemoryAllocationCount"}

def with_requirements(flags:set[str]) -> set[str]:
  out = set(flags)
  while (more := {r for f in out for r in REQUIRES.get(f, ())} - out): out |= more
  return out

def apply_profile(caps:Caps, spec:str) -> Caps:
  """caps as the profiles in VULKAN_PROFILE=<spec> allow them (never more than the device has)."""
  names = [n for n in (s.strip() for s in spec.split(",")) if n]
  if not names: return caps
  granted, limits = set(RENDERER_PATHS), {}
  for name in names:
    if name in FLAGS: granted.add(name)
    elif name in PROFILES:
      granted |= PROFILES[name][0]
      for k, v in PROFILES[name][1].items(): limits[k] = _tighter(k, limits[k], v) if k in limits else v
    else: raise ValueError(f"VULKAN_PROFILE: unknown profile {name!r}, expected {', '.join(PROFILES)} or feature names ({', '.join(FLAGS)})")
  return replace(caps, flags=caps.flags & frozenset(with_requirements(granted)),
                 **{k: _tighter(k, getattr(caps, k), v) for k, v in limits.items()})

def _tighter(k:str, a, b):
  if isinstance(a, tuple): return tuple(min(x, y) for x, y in zip(a, b))
  return max(a, b) if k in LOWER_BOUND else min(a, b)

# tinygrad dtype short name (dtypes.<name>) -> (flag that makes it native, else "packed" / "emulated" / "refused", why).
# packed: stored 4 (8-bit) or 2 (16-bit) to a 32-bit word, computed in 32 bits (renderer/packing.py); emulated: tinygrad rewrites it
# into other types (half and fp8 into 16/8-bit words, then packed where needed; long into int pairs)
NEVER = "never"   # no flag makes the fp8 types native
DTYPE_RULES: dict[str, tuple[str|None, str, str]] = {
  "bool": ("s8", "packed", "without storageBuffer8BitAccess"),
  "char": ("i8", "packed", "without shaderInt8 + storageBuffer8BitAccess"),
  "uchar": ("i8", "packed", "without shaderInt8 + storageBuffer8BitAccess"),
  "short": ("i16", "packed", "without shaderInt16 + storageBuffer16BitAccess"),
  "ushort": ("i16", "packed", "without shaderInt16 + storageBuffer16BitAccess"),
  "int": (None, "", ""), "uint": (None, "", ""), "float": (None, "", ""),
  "long": ("i64", "emulated", "int pairs without shaderInt64"),
  "ulong": ("i64", "emulated", "int pairs without shaderInt64"),
  "double": ("f64", "refused", "needs shaderFloat64"),
  "half": ("f16", "emulated", "16-bit words computed in float without shaderFloat16 + shaderInt16 + storageBuffer16BitAccess"),
  "bfloat16": ("i16", "emulated", "16-bit words computed in float, flushing denormals, without shaderInt16 + storageBuffer16BitAccess"),
  "fp8e4m3": (NEVER, "emulated", "bytes computed in float"), "fp8e5m2": (NEVER, "emulated", "bytes computed in float"),
  "fp8e4m3fnuz": (NEVER, "emulated", "bytes computed in float"), "fp8e5m2fnuz": (NEVER, "emulated", "bytes computed in float"),
}

def dtype_support(name:str, caps:Caps) -> str:
  """'native', 'packed' (in 32-bit words, renderer/packing.py), 'emulated' (tinygrad rewrites it into other types) or 'refused'."""
  native, other, _ = DTYPE_RULES[name]
  return "native" if native is None or native in caps else other
