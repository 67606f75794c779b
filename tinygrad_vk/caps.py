"""What a Vulkan device can do, as the compact string that travels in `Target.arch`.

The device reads features and limits once and encodes them here; the renderer (which may live in a compile worker that
must not open Vulkan) decodes them. `DEV=VULKAN::<arch>` can override the string; missing keys take the Vulkan minimums.
"""
from __future__ import annotations
from dataclasses import dataclass, fields

# feature flags: what each one means on the device
FLAGS = {
  "f16": "shaderFloat16 + storageBuffer16BitAccess",
  "i16": "shaderInt16 + storageBuffer16BitAccess",
  "s16": "storageBuffer16BitAccess",
  "i8": "shaderInt8 + storageBuffer8BitAccess",
  "s8": "storageBuffer8BitAccess",
  "i64": "shaderInt64",
  "f64": "shaderFloat64",
  "nan16": "shaderSignedZeroInfNanPreserveFloat16",
  "nan32": "shaderSignedZeroInfNanPreserveFloat32",
  "nan64": "shaderSignedZeroInfNanPreserveFloat64",
  "vec": "vector (float4) loads and stores, packed from scalar accesses (a renderer path, on for every device)",
  "spread": "long reductions spread over the workgroup to fit a loop budget (a renderer path, on for every device; see renderer/loops.py)",
}
# VULKAN_DISABLE=<name,...> turns these off; each also takes the flags that depend on it with it
DISABLE_GROUPS = {"f16": ("f16", "nan16"), "i16": ("i16",), "s16": ("s16", "f16", "i16", "nan16"), "i8": ("i8",), "s8": ("s8", "i8"),
                  "i64": ("i64",), "f64": ("f64", "nan64"), "nan": ("nan16", "nan32", "nan64"), "vec": ("vec",),
                  "spread": ("spread",)}

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
  maxloop: int = 0                            # loop passes one invocation may make, 0: unbounded (llvmpipe: see renderer/loops.py)

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

# tinygrad dtype short name (dtypes.<name>) -> (flag that makes it native, flag that lets tinygrad emulate it or None, why it is refused)
DTYPE_RULES: dict[str, tuple[str|None, str|None, str]] = {
  "bool": ("s8", None, "bool buffers are bytes: needs storageBuffer8BitAccess"),
  "char": ("i8", None, "needs shaderInt8 + storageBuffer8BitAccess"),
  "uchar": ("i8", None, "needs shaderInt8 + storageBuffer8BitAccess"),
  "short": ("i16", None, "needs shaderInt16 + storageBuffer16BitAccess"),
  "ushort": ("i16", None, "needs shaderInt16 + storageBuffer16BitAccess"),
  "int": (None, None, ""), "uint": (None, None, ""), "float": (None, None, ""),
  "long": ("i64", None, ""), "ulong": ("i64", None, ""),    # without shaderInt64 tinygrad splits them into int pairs
  "double": ("f64", None, "needs shaderFloat64"),
  "half": ("f16", "i16", "emulation stores it as ushort: needs shaderInt16 + storageBuffer16BitAccess"),
  "bfloat16": ("i16", None, "stored as 16-bit words and computed in float: needs shaderInt16 + storageBuffer16BitAccess"),
  "fp8e4m3": (None, "i8", "emulation stores it as uchar: needs shaderInt8 + storageBuffer8BitAccess"),
  "fp8e5m2": (None, "i8", "emulation stores it as uchar: needs shaderInt8 + storageBuffer8BitAccess"),
  "fp8e4m3fnuz": (None, "i8", "emulation stores it as uchar: needs shaderInt8 + storageBuffer8BitAccess"),
  "fp8e5m2fnuz": (None, "i8", "emulation stores it as uchar: needs shaderInt8 + storageBuffer8BitAccess"),
}

def dtype_support(name:str, caps:Caps) -> str:
  """'native', 'emulated' (tinygrad rewrites it into supported types) or 'refused'."""
  native, emul, _ = DTYPE_RULES[name]
  if name in ("long", "ulong"): return "native" if "i64" in caps else "emulated"
  if name.startswith("fp8"): return "emulated" if emul in caps else "refused"
  if native is None or native in caps: return "native"
  return "emulated" if emul is not None and emul in caps else "refused"
