"""SPIR-V binaries: the opcodes and enumerants the assembler (compiler.py) writes and the runtime reads, the patches made to a
compiled module (NaN-preserving modes, the renderer's notes, window bindings), and what the runtime reads back (KernelMeta)."""
from __future__ import annotations
import functools, struct
from dataclasses import dataclass, field
from tinygrad_vk.renderer.abi import KernelABI, ABI, REACH, SPLIT, WORD_VIEW

OPCODES = {
  "OpSourceExtension": 4, "OpExtension": 10, "OpExtInstImport": 11, "OpExtInst": 12, "OpMemoryModel": 14, "OpEntryPoint": 15, "OpExecutionMode": 16,
  "OpCapability": 17, "OpTypeVoid": 19, "OpTypeBool": 20, "OpTypeInt": 21, "OpTypeFloat": 22, "OpTypeVector": 23, "OpTypeImage": 25,
  "OpTypeArray": 28, "OpTypeRuntimeArray": 29, "OpTypeStruct": 30, "OpTypePointer": 32, "OpTypeFunction": 33,
  "OpConstantTrue": 41, "OpConstantFalse": 42, "OpConstant": 43, "OpSpecConstant": 50, "OpSpecConstantOp": 52, "OpFunction": 54, "OpFunctionEnd": 56,
  "OpVariable": 59, "OpLoad": 61, "OpStore": 62, "OpAccessChain": 65, "OpArrayLength": 68, "OpDecorate": 71, "OpMemberDecorate": 72,
  "OpVectorExtractDynamic": 77, "OpCompositeConstruct": 80, "OpCompositeExtract": 81, "OpImageRead": 98,
  "OpConvertFToU": 109, "OpConvertFToS": 110, "OpConvertSToF": 111, "OpConvertUToF": 112, "OpUConvert": 113, "OpSConvert": 114,
  "OpFConvert": 115, "OpConvertPtrToU": 117, "OpConvertUToPtr": 120, "OpBitcast": 124, "OpSNegate": 126, "OpFNegate": 127, "OpIAdd": 128,
  "OpFAdd": 129, "OpISub": 130, "OpFSub": 131, "OpIMul": 132, "OpFMul": 133, "OpUDiv": 134, "OpSDiv": 135, "OpFDiv": 136, "OpUMod": 137,
  "OpSRem": 138, "OpLogicalEqual": 164, "OpLogicalNotEqual": 165, "OpLogicalOr": 166, "OpLogicalAnd": 167, "OpLogicalNot": 168,
  "OpSelect": 169, "OpIEqual": 170, "OpINotEqual": 171, "OpSGreaterThanEqual": 175, "OpULessThan": 176, "OpSLessThan": 177,
  "OpIsNan": 156, "OpFOrdEqual": 180, "OpFUnordNotEqual": 183, "OpFOrdLessThan": 184, "OpFUnordLessThan": 185, "OpShiftRightLogical": 194,
  "OpShiftRightArithmetic": 195, "OpShiftLeftLogical": 196, "OpBitwiseOr": 197, "OpBitwiseXor": 198, "OpBitwiseAnd": 199, "OpControlBarrier": 224,
  "OpAtomicAnd": 240, "OpAtomicOr": 241, "OpPhi": 245, "OpLoopMerge": 246, "OpSelectionMerge": 247, "OpLabel": 248, "OpBranch": 249,
  "OpBranchConditional": 250, "OpReturn": 253, "OpTypeCooperativeMatrixKHR": 4456, "OpCooperativeMatrixLoadKHR": 4457,
  "OpCooperativeMatrixStoreKHR": 4458, "OpCooperativeMatrixMulAddKHR": 4459}
CAPABILITIES = {"Shader": 1, "Float16": 9, "Float64": 10, "Int64": 11, "Int16": 22, "Int8": 39, "ImageBuffer": 47, "StorageBuffer16BitAccess": 4433,
                "StorageBuffer8BitAccess": 4448, "SignedZeroInfNanPreserve": 4466, "PhysicalStorageBufferAddresses": 5347,
                "VulkanMemoryModel": 5345, "CooperativeMatrixKHR": 6022}
ENUMS = {"Logical": 0, "GLSL450": 1, "PhysicalStorageBuffer64": 5348, "GLCompute": 5, "LocalSize": 17, "SignedZeroInfNanPreserve": 4461,
         "None": 0, "Aligned": 2, "UniformConstant": 0, "Input": 1, "Workgroup": 4, "Function": 7, "PushConstant": 9, "StorageBuffer": 12,
         "PhysicalStorageBuffer": 5349, "SpecId": 1, "Block": 2, "ArrayStride": 6, "BuiltIn": 11, "NonWritable": 24, "Binding": 33,
         "DescriptorSet": 34, "Offset": 35, "WorkgroupId": 26, "LocalInvocationId": 27, "Buffer": 5, "R32ui": 33, "Rgba32ui": 30,
         "LocalInvocationIndex": 29, "MatrixASignedComponentsKHR": 1, "MatrixBSignedComponentsKHR": 2, "MatrixCSignedComponentsKHR": 4,
         "MatrixResultSignedComponentsKHR": 8, "Vulkan": 3, "MakePointerAvailable": 8, "MakePointerVisible": 16, "NonPrivatePointer": 32,
         "Trunc": 3, "Log2": 30, "Sqrt": 31, "Fma": 50}   # the last row: GLSL.std.450 instructions
SPIRV_MAGIC = 0x07230203

def spirv_instructions(spv:bytes) -> tuple[list[int], list[tuple[int, int, list[int]]]]:
  """The module's words, and (word position, opcode, words) of every instruction after the 5-word header. ValueError when the
  module is not well formed: a whole number of words, the magic number, every instruction 1 or more words and inside the module."""
  if len(spv) % 4 or len(spv) < 24: raise ValueError(f"{len(spv)} bytes is not a SPIR-V module")
  words = list(struct.unpack(f"<{len(spv)//4}I", spv))
  if words[0] != SPIRV_MAGIC: raise ValueError(f"bad SPIR-V magic number 0x{words[0]:08x}")
  insts, i = [], 5
  while i < len(words):
    if not 0 < (n := words[i] >> 16) <= len(words) - i: raise ValueError(f"SPIR-V instruction at word {i} has word count {n}")
    insts.append((i, words[i] & 0xffff, words[i:i+n]))
    i += n
  return words, insts

def string_words(s:str) -> list[int]:
  b = s.encode() + b"\0" * (4 - len(s) % 4)
  return list(struct.unpack(f"<{len(b)//4}I", b))

def add_nan_preserve(spv:bytes, widths:tuple[int, ...]) -> bytes:
  """Declare SignedZeroInfNanPreserve for every float width the module uses and the device honours. glslang's
  GL_EXT_spirv_intrinsics keeps only one execution mode per mode id, so a kernel using f32 and f16 needs this patch. Before
  SPIR-V 1.4 the capability is SPV_KHR_float_controls's, declared with it."""
  words, insts = spirv_instructions(spv)
  cap, entry_op, mode = OPCODES["OpCapability"], OPCODES["OpEntryPoint"], OPCODES["OpExecutionMode"]
  used = {w[2] for _, op, w in insts if op == OPCODES["OpTypeFloat"]} & set(widths)
  entry = next((w for _, op, w in insts if op == entry_op), None)
  if not used or entry is None: return spv
  last_cap = max(pos + len(w) for pos, op, w in insts if op == cap)
  entry_end = next(pos + len(w) for pos, op, w in insts if op == entry_op)
  modes = [x for wd in sorted(used) for x in ((4 << 16) | mode, entry[2], ENUMS["SignedZeroInfNanPreserve"], wd)]
  ext = string_words("SPV_KHR_float_controls") if words[1] < 0x00010400 else []
  decl = [(2 << 16) | cap, CAPABILITIES["SignedZeroInfNanPreserve"]] + ([(len(ext) + 1) << 16 | OPCODES["OpExtension"], *ext] if ext else [])
  words = words[:last_cap] + decl + words[last_cap:entry_end] + modes + words[entry_end:]
  return struct.pack(f"<{len(words)}I", *words)

MODE_SETTING = {OPCODES[n] for n in ("OpCapability", "OpExtension", "OpExtInstImport", "OpMemoryModel", "OpEntryPoint", "OpExecutionMode")}
def add_notes(spv:bytes, notes:list[str]) -> bytes:
  """The notes (KernelMeta.encode) as OpSourceExtension debug instructions after the execution modes: where the module's
  mode-setting section ends (SPIR-V's logical layout), found without reading the rest of it (this runs for every kernel)."""
  if not notes: return spv
  at = 5
  while at * 4 < len(spv) and ((w := struct.unpack_from("<I", spv, at * 4)[0]) & 0xffff) in MODE_SETTING:
    if not w >> 16: raise ValueError(f"SPIR-V instruction at word {at} has word count 0")   # would not advance
    at += w >> 16
  new = [x for sw in map(string_words, notes) for x in ((len(sw) + 1) << 16 | OPCODES["OpSourceExtension"], *sw)]
  return spv[:at * 4] + struct.pack(f"<{len(new)}I", *new) + spv[at * 4:]

def rebind(spv:bytes, binding:dict[int, int]) -> bytes:
  """The module with its Binding decorations renumbered: a windowed kernel's bindings to the windows they lie in (abi.py)."""
  words, insts = spirv_instructions(spv)
  for pos, op, w in insts:
    if op == OPCODES["OpDecorate"] and w[2] == ENUMS["Binding"]: words[pos + 3] = binding[w[3]]
  return struct.pack(f"<{len(words)}I", *words)

@dataclass(frozen=True)
class KernelMeta:
  """What the runtime needs of a kernel beyond its signature, carried in the module (tinygrad's cache keeps only the module): the
  renderer's plan as notes (`encode`, source comments that compiler.py moves into the module), the rest as its declarations."""
  reach: dict[int, tuple[tuple[int, int, int], ...]] = field(default_factory=dict)   # slot in pieces -> (a, lo, hi) (abi.py REACH)
  split: dict[int, tuple[int, int, int]] = field(default_factory=dict)   # split slot -> (windows, bytes each, first binding) (abi.py SPLIT)
  words: frozenset[int] = frozenset()   # slots of 1/2-byte elements reached in 32-bit words: bound at a whole word (abi.py WORD_VIEW)
  abi: KernelABI|None = None            # how each buffer and scalar reaches the shader, as the renderer decided it (abi.py)
  local: tuple[int, int, int] = (1, 1, 1)
  bindings: frozenset[int] = frozenset()
  readonly: frozenset[int] = frozenset()   # bindings the shader never writes (they need no write hazard)
  ro_addr: frozenset[int] = frozenset()    # push-constant offsets of the addresses the shader never writes through
  texel: frozenset[int] = frozenset()      # bindings that are storage texel buffers (renderer/plan.py texel_slots)
  texel4: frozenset[int] = frozenset()     # those of them of 4 32-bit words a texel (R32G32B32A32_UINT; the others R32_UINT)
  coop: bool = False                       # cooperative matrices: the pipeline requires full subgroups (before SPIR-V 1.6, and our tiles)
  def encode(self) -> list[str]:
    return [f"{REACH}:{slot}:{a}:{lo}:{hi}" for slot, rs in sorted(self.reach.items()) for a, lo, hi in rs] + \
           [f"{SPLIT}:{slot}:{k}:{size}:{first}" for slot, (k, size, first) in sorted(self.split.items())] + \
           [f"{WORD_VIEW}:{slot}" for slot in sorted(self.words)] + ([self.abi.encode()] if self.abi is not None else [])
  @property
  def graphable(self) -> bool: return not self.reach   # a kernel launched in pieces binds a descriptor set per piece
  @staticmethod
  @functools.lru_cache(maxsize=1024)   # a kernel is decoded by its program and by each graph batching it
  def decode(spv:bytes) -> KernelMeta:   # ValueError when the module is malformed
    O, E = OPCODES, ENUMS
    local, binding, pc_var, abi = (1, 1, 1), {}, None, None
    reach: dict[int, list[tuple[int, int, int]]] = {}
    split: dict[int, tuple[int, int, int]] = {}
    words: set[int] = set()
    # SPIR-V ids: an id looked up and missing is None, which finds nothing further
    members: dict[int|None, list[int]] = {}
    offsets: dict[tuple[int|None, int], int] = {}
    ptr_to: dict[int|None, int] = {}
    var_type: dict[int|None, int] = {}
    readonly_types: set[int|None] = set()
    images: dict[int|None, int] = {}   # image type -> its format
    coop = False
    for _, op, w in spirv_instructions(spv)[1]:
      if op == O["OpExecutionMode"] and w[2] == E["LocalSize"]: local = (w[3], w[4], w[5])
      elif op == O["OpCapability"] and w[1] == CAPABILITIES["CooperativeMatrixKHR"]: coop = True
      elif op == O["OpSourceExtension"]:
        kind, *nums = struct.pack(f"<{len(w) - 1}I", *w[1:]).split(b"\0")[0].decode().split(":")
        if kind == ABI:
          abi = KernelABI.decode(nums)
          continue
        n = tuple(map(int, nums))
        if kind == REACH: reach.setdefault(n[0], []).append((n[1], n[2], n[3]))
        elif kind == SPLIT: split[n[0]] = (n[1], n[2], n[3])
        elif kind == WORD_VIEW: words.add(n[0])
      elif op == O["OpDecorate"] and w[2] == E["Binding"]: binding[w[1]] = w[3]
      elif (op == O["OpDecorate"] and w[2] == E["NonWritable"]) or (op == O["OpMemberDecorate"] and w[3] == E["NonWritable"]):
        readonly_types.add(w[1])
      elif op == O["OpMemberDecorate"] and w[3] == E["Offset"]: offsets[(w[1], w[2])] = w[4]
      elif op == O["OpTypePointer"]: ptr_to[w[1]] = w[3]
      elif op == O["OpTypeStruct"]: members[w[1]] = w[2:]
      elif op == O["OpTypeImage"]: images[w[1]] = w[8]
      elif op == O["OpVariable"]:
        var_type[w[2]] = w[1]
        if w[3] == E["PushConstant"]: pc_var = w[2]
    pc_struct = ptr_to.get(var_type.get(pc_var))
    return KernelMeta({s: tuple(rs) for s, rs in reach.items()}, split, frozenset(words), abi, local, frozenset(binding.values()),
                      frozenset(b for v, b in binding.items() if v in readonly_types or ptr_to.get(var_type.get(v)) in readonly_types),
                      frozenset(offsets[(pc_struct, m)] for m, t in enumerate(members.get(pc_struct, ())) if ptr_to.get(t) in readonly_types),
                      frozenset(b for v, b in binding.items() if ptr_to.get(var_type.get(v)) in images),
                      frozenset(b for v, b in binding.items() if images.get(ptr_to.get(var_type.get(v))) == E["Rgba32ui"]), coop)
