"""tinygrad UOps -> SPIR-V assembly (spirv-as syntax, what DEBUG=4 prints), assembled in-process by compiler.py: no compiler binary.
A kernel has the GLSL renderer's layout and semantics (glsl.py, the reference of the differential tests), so the runtime cannot
tell the two apart; what its buffers and push constants are is the plan's (plan.py) and the ABI's (abi.py). Control flow is
structured: a RANGE is an OpLoopMerge loop with an OpPhi counter, IF and gated loads are selections, and an INDEX is only
dereferenced by its LOAD/STORE, so a gated access stays inside its branch. Values are SSA ids named like the C renderers'
(alu3, val0, gidx0, Ridx0), types and constants by what they are (%v4float, %int_3).
"""
from __future__ import annotations
import math, struct
from collections import Counter
from typing import Any, NamedTuple, cast
from tinygrad.dtype import DType, dtypes, AddrSpace, truncate, float_to_bf16
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher, GroupOp, axis_letters, range_str
from tinygrad.device import CompileError
from tinygrad.helpers import prod
from tinygrad_vk.caps import Caps, FLAGS, VEC_ALIGN, spirv_target
from tinygrad_vk.compiler import SPIRVCompiler
from tinygrad_vk.renderer.kernel import VulkanRenderer
from tinygrad_vk.renderer.plan import KernelPlan, Access, Buf, OFFSET, kernel_name, UINT_OF_SIZE
from tinygrad_vk.renderer.passes.packing import packed_dtypes, read_modify_write, var_in_words, VIEW_OFFSET, VAR_WORD
from tinygrad_vk.renderer.views import MEMORY
from tinygrad_vk.renderer.passes.half import held
from tinygrad_vk.renderer.coopmat import Wmma

# the SPIR-V type of each dtype (bfloat16 lives in 16-bit words, its math runs in float) and its declaration
TYPE = {dtypes.bool: "bool", dtypes.char: "char", dtypes.uchar: "uchar", dtypes.short: "short", dtypes.ushort: "ushort", dtypes.int: "int",
        dtypes.uint: "uint", dtypes.long: "long", dtypes.ulong: "ulong", dtypes.half: "half", dtypes.float: "float", dtypes.double: "double",
        dtypes.bfloat16: "ushort"}
DECL = {"void": "OpTypeVoid", "bool": "OpTypeBool", "char": "OpTypeInt 8 1", "uchar": "OpTypeInt 8 0", "short": "OpTypeInt 16 1",
        "ushort": "OpTypeInt 16 0", "int": "OpTypeInt 32 1", "uint": "OpTypeInt 32 0", "long": "OpTypeInt 64 1", "ulong": "OpTypeInt 64 0",
        "half": "OpTypeFloat 16", "float": "OpTypeFloat 32", "double": "OpTypeFloat 64"}
SC = {"StorageBuffer": "sb", "PhysicalStorageBuffer": "psb", "Workgroup": "wg", "Function": "fn", "PushConstant": "pc", "Input": "in",
      "UniformConstant": "uc"}
GLOBAL_SC = ("StorageBuffer", "PhysicalStorageBuffer")
FLOAT_EXP = {dtypes.half: 16, dtypes.float: 128, dtypes.double: 1024}   # inf is 0x1p+E, the canonical NaN 0x1.8p+E

# the instruction of each ALU op for (float, signed int, unsigned int, bool) operands; GLSL's operators compile to the same ones
CHAINED = (Ops.ADD, Ops.MUL)
ALU = {Ops.ADD: ("OpFAdd", "OpIAdd", "OpIAdd", "OpLogicalOr"), Ops.SUB: ("OpFSub", "OpISub", "OpISub", None),
       Ops.MUL: ("OpFMul", "OpIMul", "OpIMul", "OpLogicalAnd"), Ops.FDIV: ("OpFDiv", None, None, None),
       Ops.CDIV: ("OpFDiv", "OpSDiv", "OpUDiv", None), Ops.CMOD: (None, "OpSRem", "OpUMod", None),   # both truncate, as in C
       Ops.AND: (None, "OpBitwiseAnd", "OpBitwiseAnd", "OpLogicalAnd"), Ops.OR: (None, "OpBitwiseOr", "OpBitwiseOr", "OpLogicalOr"),
       Ops.XOR: (None, "OpBitwiseXor", "OpBitwiseXor", "OpLogicalNotEqual"),
       Ops.SHL: (None, "OpShiftLeftLogical", "OpShiftLeftLogical", None), Ops.SHR: (None, "OpShiftRightArithmetic", "OpShiftRightLogical", None),
       Ops.NEG: ("OpFNegate", "OpSNegate", "OpSNegate", "OpLogicalNot"), Ops.WHERE: ("OpSelect",) * 4,
       Ops.CMPLT: ("OpFOrdLessThan", "OpSLessThan", "OpULessThan", None),
       Ops.CMPNE: ("OpFUnordNotEqual", "OpINotEqual", "OpINotEqual", "OpLogicalNotEqual"),   # C: NaN != x is true
       Ops.CMPEQ: ("OpFOrdEqual", "OpIEqual", "OpIEqual", "OpLogicalEqual")}

def kind(dt:DType) -> int: return 3 if dt == dtypes.bool else 0 if dtypes.is_float(dt) else 2 if dtypes.is_unsigned(dt) else 1

class Ref(NamedTuple):
  """A memory access (kernel.Access) made concrete: what an INDEX gives, dereferenced by the LOAD/STORE that uses it."""
  var: str          # the variable, or for a buffer passed by address the pointer to its Block
  ty: str           # element type id
  dt: DType         # element scalar dtype (an element is a vecN of it in a vector variable)
  sc: str           # storage class
  idx: str = ""     # index of the first element
  k: int = 1        # elements per value (Access.k)
  size: int = 0     # bytes of an element: the Aligned operand of PhysicalStorageBuffer accesses
  wins: tuple[str, ...] = ()   # a split slot's window variables (Access.wins), `n` elements each
  n: int = 0
  addr64: bool = False   # idx is an int64 index: the element's address is computed in 64 bits (Access.addr64)
  texel: int = 0    # a storage texel buffer's elements a texel (plan.Buf.texel); vec: texels read whole (else one element)
  vec: int = 1

class Module:
  """A SPIR-V module being written: types, constants and variables declared once on first use, instructions, and the entry block's
  prologue (values every block may use: push constants, builtins, view offsets, buffer addresses)."""
  def __init__(self, caps:Caps):
    self.caps, self.n, self.target = caps, 0, spirv_target(caps)
    self.decl: dict[str, str] = {}     # id -> declaration line of every type, constant and module variable
    self.glob: list[str] = []
    self.deco: list[str] = []
    self.iface: list[str] = []
    self.fvars: list[str] = []
    self.pro: list[str] = []
    self.body: list[str] = []
    self.sb_bytes: set[int] = set()    # scalar sizes in storage buffers: 8/16-bit storage capabilities
    self.vmm = False                   # the Vulkan memory model (a kernel with cooperative matrices)
    self.uses_glsl = False
    self.cache: dict[str, str] = {}    # prologue values, once each
    self.block = "%entry"
    self.g("%fn_void", f"OpTypeFunction {self.T('void')}")
  def nid(self, prefix="t") -> str:
    self.n += 1
    return f"%{prefix}{self.n}"
  def g(self, rid:str, decl:str) -> str:
    if rid not in self.decl:
      self.decl[rid] = decl
      self.glob.append(f"{rid} = {decl}")
    return rid
  def T(self, dt:DType|str, n:int=1, arr:int=0, stride:int=0) -> str:
    """The type id of a scalar (dtype or name), its vecN, or an array of it (arr > 0; arr < 0: runtime array), once each."""
    name = dt if isinstance(dt, str) else TYPE[held(self.caps, dt)]
    if arr:
      # explicitly laid out arrays (stride) are other types than Function/Workgroup ones, which must not carry a layout
      rid = f"%arr{arr if arr > 0 else ''}_{self.T(name, n)[1:]}{'_s' if stride else ''}"
      if rid not in self.decl:
        self.g(rid, f"OpTypeArray {self.T(name, n)} {self.const(dtypes.uint, arr)}" if arr > 0 else f"OpTypeRuntimeArray {self.T(name, n)}")
        if stride: self.deco.append(f"OpDecorate {rid} ArrayStride {stride}")
      return rid
    if n > 4: return self.T(name, arr=n)   # a tensor core's fragment: SPIR-V's shader vectors stop at 4
    if n > 1: return rid if (rid := f"%v{n}{name}") in self.decl else self.g(rid, f"OpTypeVector {self.T(name)} {n}")
    return rid if (rid := f"%{name}") in self.decl else self.g(rid, DECL[name])
  def ty(self, u:UOp) -> str: return self.T(u.dtype, prod(u._shape) if u._shape else 1)   # values are scalars or vecN
  def ptr(self, sc:str, ty:str) -> str: return self.g(f"%p{SC[sc]}_{ty[1:]}", f"OpTypePointer {sc} {ty}")
  def const(self, dt:DType, v) -> str:
    if dt == dtypes.bool: return self.g(f"%{'true' if v else 'false'}", f"OpConstant{'True' if v else 'False'} {self.T(dt)}")
    if dt == dtypes.bfloat16: dt, v = dtypes.ushort, struct.unpack("I", struct.pack("f", float_to_bf16(float(v))))[0] >> 16
    if dtypes.is_float(dt):
      v = truncate[dt](float(v))
      tok = repr(v) if math.isfinite(v) else f"{'-' if v < 0 else ''}0x1{'.8' if math.isnan(v) else ''}p+{FLOAT_EXP[dt]}"
    else: tok = str(truncate[dt](int(v)))
    return self.g(f"%{TYPE[dt]}_{tok.replace('-', 'n').replace('.', '_').replace('+', '')}", f"OpConstant {self.T(dt)} {tok}")
  def var(self, rid:str, ty:str, sc:str) -> str:
    if rid not in self.decl:
      decl = f"OpVariable {self.ptr(sc, ty)} {sc}"
      if sc == "Function":
        self.decl[rid] = decl
        self.fvars.append(f"{rid} = {decl}")
      else:
        self.g(rid, decl)
        # the entry point lists the variables it uses: every one from SPIR-V 1.4 on, only Input/Output before
        if sc == "Input" or self.target.version >= (1, 4): self.iface.append(rid)
    return rid
  def psb(self, dt:DType, n:int, ro:bool) -> str:
    """The pointer type of a buffer passed by address whose elements are dt (or vecN of it): to a Block of one runtime array."""
    ety = self.T(dt, n)
    if (st := f"%bda_{ety[1:]}{'_ro' if ro else ''}") not in self.decl:
      self.g(st, f"OpTypeStruct {self.T(dt, n, arr=-1, stride=dt.itemsize * n)}")
      self.deco += [f"OpDecorate {st} Block", f"OpMemberDecorate {st} 0 Offset 0"] + ([f"OpMemberDecorate {st} 0 NonWritable"] if ro else [])
    return self.ptr("PhysicalStorageBuffer", st)
  def op(self, name:str, ty:str, *args:str, prefix="t", rid:str="") -> str:
    """One instruction with a result; its id is `rid` or a fresh one."""
    self.body.append(f"{(rid := rid or self.nid(prefix))} = {name} {ty} {' '.join(args)}")
    return rid
  def do(self, *words:str) -> str:
    """One instruction without a result."""
    self.body.append(" ".join(words))
    return ""
  def label(self, lbl:str) -> str:
    self.body.append(f"{lbl} = OpLabel")
    self.block = lbl
    return ""
  def ext(self, fn:str, ty:str, x:str) -> str:
    self.uses_glsl = True
    return self.op("OpExtInst", ty, "%glsl", fn, x)
  def add(self, i:str, j:int, dt:DType=dtypes.int) -> str: return self.op("OpIAdd", self.T(dt), i, self.const(dt, j)) if j else i
  def prologue(self, key:str, fn) -> str:
    """A value computed once in the entry block, which dominates every use."""
    if key not in self.cache:
      body, self.body = self.body, self.pro
      try: self.cache[key] = fn()
      finally: self.body = body
    return self.cache[key]
  def branch(self, cond:str, then, other=None, ty:str="", alt:str="") -> str:
    """if (cond) then() else other(), as a selection; with ty, the value: OpPhi of theirs (of `alt` when there is no other)."""
    t, f, m, pre = self.nid("L"), self.nid("L"), self.nid("L"), self.block
    self.do("OpSelectionMerge", m, "None")
    self.do("OpBranchConditional", cond, t, f if other else m)
    self.label(t)
    a, ta = then(), self.block
    self.do("OpBranch", m)
    if other:
      self.label(f)
      alt, pre = other(), self.block
      self.do("OpBranch", m)
    self.label(m)
    return self.op("OpPhi", ty, a, ta, alt, pre) if ty else ""
  def cast(self, frm:DType, to:DType, x:str) -> str:
    if (frm := held(self.caps, frm)) == (to := held(self.caps, to)): return x
    if to == dtypes.bool: return self.op("OpFUnordNotEqual" if dtypes.is_float(frm) else "OpINotEqual", self.T(to), x, self.const(frm, 0))
    if frm == dtypes.bool: return self.op("OpSelect", self.T(to), x, self.const(to, 1), self.const(to, 0))
    if dtypes.is_float(frm): return self.op("OpFConvert" if dtypes.is_float(to) else "OpConvertFToU" if dtypes.is_unsigned(to) else "OpConvertFToS",
                                            self.T(to), x)
    if dtypes.is_float(to): return self.op("OpConvertUToF" if dtypes.is_unsigned(frm) else "OpConvertSToF", self.T(to), x)
    # integers: extend or truncate with the source's signedness (C), then reinterpret
    if frm.itemsize == to.itemsize: return self.op("OpBitcast", self.T(to), x)
    if not dtypes.is_unsigned(frm): return self.op("OpSConvert", self.T(to), x)
    u = self.op("OpUConvert", self.T(UINT_OF_SIZE[to.itemsize]), x)
    return u if dtypes.is_unsigned(to) else self.op("OpBitcast", self.T(to), u)
  def bitcast(self, frm:DType, to:DType, x:str, n:int=1) -> str:
    if TYPE[frm] == TYPE[to]: return x
    if dtypes.bool in (frm, to): raise CompileError(f"no bitcast between {frm} and {to}")
    return self.op("OpBitcast", self.T(to, n), x)

class Memory(Module):
  """Buffers and memory accesses as the shared plan decides them (kernel.Access): declarations by descriptor, texel buffer or
  address, views, 8/16-bit words, split windows, vectors."""
  plan: KernelPlan
  r: dict[UOp, Any]       # SPIRVKernel's: the id of each value
  member: dict[str, int]  # SPIRVKernel's: the push-constant members
  def push(self, ty:str, key:str, *idx:int, rid:str="") -> str:
    """Push-constant member `key` (element idx of an array one)."""
    chain = [self.ptr("PushConstant", ty), "%pc", *(self.const(dtypes.int, i) for i in (self.member[key], *idx))]
    return self.op("OpLoad", ty, self.op("OpAccessChain", *chain), rid=rid)
  def buf(self, slot:int, dt:DType, n:int=1, w:int|None=None) -> Ref:
    """The elements of the PARAM at `slot` as dt (or vecN of it): its own declaration, or another of the same memory (a view,
    a vecN access). By descriptor: a StorageBuffer variable at its binding (of a split slot: at window w's); by address: its
    pointer, cast to the element type."""
    b = self.plan.bufs[slot]
    if b.texel:   # a storage texel buffer of R32_UINT or R32G32B32A32_UINT: 32-bit elements (plan.texel_slots)
      fmt = "R32ui" if b.texel == 1 else "Rgba32ui"
      img = self.g(f"%img_{fmt.lower()}", f"OpTypeImage {self.T(dtypes.uint)} Buffer 0 0 0 2 {fmt}")
      if (rid := f"%data{slot}") not in self.decl:
        self.var(rid, img, "UniformConstant")
        self.deco += [f"OpDecorate {rid} DescriptorSet 0", f"OpDecorate {rid} Binding {b.binding}", f"OpDecorate {rid} NonWritable"]
      return Ref(rid, img, dt, "UniformConstant", texel=b.texel, vec=n)
    ety, self.sb_bytes = self.T(dt, n), self.sb_bytes | {dt.itemsize}
    own = (dt, n) == (b.dtype, 1)
    if b.address is not None:
      p = self.prologue(f"p{slot}", lambda: self.push(self.psb(b.dtype, 1, not b.writable), f"p{slot}", rid=f"%p{slot}"))
      if not own: p = self.prologue(f"p{slot}_{ety[1:]}", lambda: self.op("OpBitcast", self.psb(dt, n, not b.writable), p))
      return Ref(p, ety, dt, "PhysicalStorageBuffer", size=dt.itemsize * n)
    rid = (f"%data{slot}" if own else f"%data{slot}_{ety[1:]}") + (f"_w{w}" if w is not None else "")
    if rid not in self.decl:
      st = f"%sb_{ety[1:]}"
      if st not in self.decl:
        self.g(st, f"OpTypeStruct {self.T(dt, n, arr=-1, stride=dt.itemsize * n)}")
        self.deco += [f"OpDecorate {st} Block", f"OpMemberDecorate {st} 0 Offset 0"]
      self.var(rid, st, "StorageBuffer")
      self.deco += [f"OpDecorate {rid} DescriptorSet 0", f"OpDecorate {rid} Binding {b.binding if w is None else self.plan.meta.split[slot][2] + w}"]
      if not b.writable: self.deco.append(f"OpDecorate {rid} NonWritable")
    return Ref(rid, ety, dt, "StorageBuffer")
  def off(self, slot:int) -> str:
    """_o<slot>: the element offset of the view bound at `slot` inside its binding, a byte or a word of _off[] (abi.off_word)."""
    def load():
      word, shift, mask = self.plan.abi.off_word(slot)
      u = self.T(dtypes.uint)
      b = self.push(u, "off", word)
      if mask is not None:
        b = self.op("OpBitwiseAnd", u, self.op("OpShiftRightLogical", u, b, self.const(dtypes.uint, shift)), self.const(dtypes.uint, mask))
      return self.op("OpBitcast", self.T(dtypes.int), b, rid=f"%o{slot}")
    return self.prologue(f"o{slot}", load)
  def param(self, x:UOp):
    if x.addrspace == AddrSpace.GLOBAL: return self.buf(x.arg.slot, self.plan.bufs[x.arg.slot].dtype)
    if var_in_words(x): return f"var{x.arg.slot}"   # read through var_word only
    ty, key = self.T(x.dtype), f"var{x.arg.slot}"
    return self.prologue(key, lambda: self.push(ty, key, rid=f"%{key}"))
  def var_word(self, key:str, w:int) -> str:
    u = self.T(dtypes.uint)
    return self.prologue(f"{key}_{w}", lambda: self.push(u, key, w))
  def buffer(self, x:UOp) -> Ref:
    sc, name = ("Workgroup", "smem") if x.addrspace == AddrSpace.LOCAL else ("Function", "reg")
    # packed shared memory is words (renderer/passes/packing.py)
    dt, n = (dtypes.uint, x.max_numel() * x.dtype.itemsize // 4) if sc == "Workgroup" and x.dtype in packed_dtypes(self.caps) else \
      (x.dtype, x.max_numel())
    return Ref(self.var(f"%{name}{x.arg.slot}", self.T(dt, arr=n), sc), self.T(dt), dt, sc)
  def index(self, x:UOp, b:UOp, i:UOp):
    if b.addrspace not in MEMORY:   # a lane of a vector value (a coalesced load or a STACK)
      if i.op is Ops.CAST and i.src[0].op is Ops.CONST: return self.op("OpCompositeExtract", self.T(b.dtype), self.r[b], str(i.src[0].arg))
      return self.op("OpVectorExtractDynamic", self.T(b.dtype), self.r[b], self.r[i])
    return self.ref(self.plan.access(x))
  def ref(self, a:Access) -> Ref:
    """The access's declaration, and its index computed from the plan's terms."""
    idt, idx = dtypes.long if a.addr64 else dtypes.int, ""
    for t, s in a.terms:
      v = self.cast(dtypes.int, idt, self.off(cast(int, a.slot))) if t is OFFSET else self.cast(t.dtype, idt, self.r[t])   # OFFSET: of a slot
      if s != 1: v = self.op("OpIMul", self.T(idt), v, self.const(idt, s))
      idx = self.op("OpIAdd", self.T(idt), idx, v) if idx else v
    idx = self.add(idx, a.add, idt)
    if a.shift: idx = self.op("OpShiftRightArithmetic", self.T(idt), idx, self.const(idt, a.shift))
    ref = self.r[a.base] if a.slot is None else self.buf(a.slot, a.dtype, a.vec)
    return self.windows(ref._replace(idx=idx, k=a.k, addr64=a.addr64), a)
  def windows(self, ref:Ref, a:Access) -> Ref:
    """The ref through the windows of a split slot (Access.wins)."""
    if a.wins is None: return ref
    k, n, _ = a.wins
    return ref._replace(wins=tuple(self.buf(cast(int, a.slot), a.dtype, a.vec, w).var for w in range(k)), n=n)   # split: a slot's
  def in_window(self, ref:Ref, j:int, fn):
    """fn(pointer to element j of the ref): of a split slot, in the window its index falls in (a selection per window)."""
    if not ref.wins: return fn(self.pointer(ref, j))
    i = self.add(ref.idx, j)
    def go(w:int) -> str:
      if w == len(ref.wins) - 1: return fn(self.pointer(ref, j, w)) or ""
      cond = self.op("OpSLessThan", self.T(dtypes.bool), i, self.const(dtypes.int, (w + 1) * ref.n))
      return self.branch(cond, lambda: fn(self.pointer(ref, j, w)) or "", lambda: go(w + 1))
    go(0)
  def pointer(self, ref:Ref, j:int=0, w:int|None=None, clamp=False) -> str:
    # an int64 index: the driver computes the element's address in 64 bits (not OpConvertPtrToU/OpConvertUToPtr arithmetic, which
    # SwiftShader reports unsupported: "SpirvShader.cpp:812 WARNING: UNSUPPORTED: ConvertPtrToU")
    if ref.addr64: return self.op("OpAccessChain", self.ptr(ref.sc, ref.ty), ref.var, self.const(dtypes.int, 0), self.add(ref.idx, j, dtypes.long),
                                  prefix="at64_")
    idx, var, it = ref.idx, ref.var, self.T(dtypes.int)
    if j or w: idx = self.op("OpIAdd", it, idx, self.const(dtypes.int, j - (w or 0) * ref.n))
    if w is not None:   # window w of a split slot; a read of every window keeps each index inside its own
      var = ref.wins[w]
      if clamp:
        last = self.op("OpISub", it, self.op("OpBitcast", it, self.op("OpArrayLength", self.T(dtypes.uint), var, "0")), self.const(dtypes.int, 1))
        idx = self.op("OpSelect", it, self.op("OpSLessThan", self.T(dtypes.bool), idx, self.const(dtypes.int, 0)), self.const(dtypes.int, 0), idx)
        idx = self.op("OpSelect", it, self.op("OpSLessThan", self.T(dtypes.bool), last, idx), last, idx)
    chain = [self.const(dtypes.int, 0), idx] if ref.sc in GLOBAL_SC else [idx]
    return self.op("OpAccessChain", self.ptr(ref.sc, ref.ty), var, *chain)
  # a pointer into PhysicalStorageBuffer memory is accessed with its alignment; in the Vulkan memory model (vmm) workgroup memory
  # is made available by each store and visible to each load, as glslang writes them (barrier() alone orders, it does not publish)
  def mem(self, ref:Ref, store=False) -> tuple[str, ...]:
    if ref.sc == "Workgroup" and self.vmm: return (f"{'MakePointerAvailable' if store else 'MakePointerVisible'}|NonPrivatePointer",
                                                   self.const(dtypes.uint, 2))
    return ("Aligned", str(ref.size)) if ref.sc == "PhysicalStorageBuffer" else ()
  def ld(self, ref:Ref, j:int=0, prefix="t") -> str:
    if ref.sc == "UniformConstant":   # element j past the index: texel i's first component (R32), component i&3 of texel i>>2 (RGBA32)
      img = self.prologue(f"img{ref.var}", lambda: self.op("OpLoad", ref.ty, ref.var))
      u, u4, it, i = self.T(dtypes.uint), self.T(dtypes.uint, 4), self.T(dtypes.int), self.add(ref.idx, j)
      if ref.vec > 1: return self.bitcast(dtypes.uint, ref.dt, self.op("OpImageRead", u4, img, i, prefix=prefix), 4)   # texel i whole
      if ref.texel == 1: v = self.op("OpCompositeExtract", u, self.op("OpImageRead", u4, img, i), "0", prefix=prefix)
      else:
        texel = self.op("OpImageRead", u4, img, self.op("OpShiftRightArithmetic", it, i, self.const(dtypes.int, 2)))
        v = self.op("OpVectorExtractDynamic", u, texel, self.op("OpBitwiseAnd", it, i, self.const(dtypes.int, 3)), prefix=prefix)
      return self.bitcast(dtypes.uint, ref.dt, v)
    if not ref.wins: return self.op("OpLoad", ref.ty, self.pointer(ref, j), *self.mem(ref), prefix=prefix)
    # a split slot: every window read at the index clamped into it, the one the index falls in selected
    vals = [self.op("OpLoad", ref.ty, self.pointer(ref, j, w, clamp=True)) for w in range(len(ref.wins))]
    i, sel = self.add(ref.idx, j), vals[-1]
    for w in reversed(range(len(vals) - 1)):
      sel = self.op("OpSelect", ref.ty, self.op("OpSLessThan", self.T(dtypes.bool), i, self.const(dtypes.int, (w + 1) * ref.n)), vals[w], sel,
                    prefix=prefix)
    return sel
  def st(self, ref:Ref, v:str, j:int=0): self.in_window(ref, j, lambda p: self.do("OpStore", p, v, *self.mem(ref, store=True)))
  def read(self, ref:Ref, dt:DType, prefix="val") -> str:
    if ref.k > 1:   # a wide view element: k words, little end first
      u, wdt, bits = UINT_OF_SIZE[dt.itemsize], ref.dt, ""
      for j in range(ref.k):
        w = self.cast(wdt, u, self.ld(ref, j))
        if j: w = self.op("OpShiftLeftLogical", self.T(u), w, self.const(dtypes.int, 8 * wdt.itemsize * j))
        bits = self.op("OpBitwiseOr", self.T(u), bits, w) if bits else w
      return self.bitcast(u, dt, bits)
    v = self.ld(ref, prefix=prefix)
    # bool buffers hold bytes: read them as uint so that only 8-bit storage (not 8-bit arithmetic) is needed
    if dt == dtypes.bool and ref.dt != dt:
      v = self.op("OpINotEqual", self.T(dt), self.op("OpUConvert", self.T(dtypes.uint), v), self.const(dtypes.uint, 0))
    return v
  def write(self, ref:Ref, dt:DType, v:str):
    if ref.k > 1:
      u, wdt = UINT_OF_SIZE[dt.itemsize], ref.dt
      bits = self.bitcast(dt, u, v)
      for j in range(ref.k):
        w = self.op("OpShiftRightLogical", self.T(u), bits, self.const(dtypes.int, 8 * wdt.itemsize * j)) if j else bits
        self.st(ref, self.cast(u, wdt, w), j)
      return
    if dt == dtypes.bool and ref.dt != dt:
      v = self.op("OpUConvert", ref.ty, self.op("OpSelect", self.T(dtypes.uint), v, self.const(dtypes.uint, 1), self.const(dtypes.uint, 0)))
    self.st(ref, v)
  def vector(self, sh:UOp) -> tuple[str|None, Ref|None, list[Ref]]:
    """A coalesced (float4) access: (the condition of its vecN access, that access, its scalar accesses), kernel.vector."""
    vec, lanes = self.plan.vector(sh)
    refs = [self.ref(l) for l in lanes]
    if vec is None: return None, None, refs
    spec = self.g(f"%a{vec.slot}", f"OpSpecConstant {self.T(dtypes.int)} {VEC_ALIGN}")
    if (d := f"OpDecorate {spec} SpecId {vec.slot}") not in self.deco: self.deco.append(d)
    # a specialization constant too, so that the driver folds what depends on it
    cond = self.g(f"%a{vec.slot}_{vec.vec}", f"OpSpecConstantOp {self.T(dtypes.bool)} SGreaterThanEqual {spec} {self.const(dtypes.int, vec.vec)}")
    # the vecN index is lane 0's >> shift (Access.vector): computed once from lane 0's
    idx = self.op("OpShiftRightArithmetic", self.T(dtypes.int), refs[0].idx, self.const(dtypes.int, vec.shift))
    return cond, self.windows(self.buf(cast(int, vec.slot), vec.dtype, vec.vec)._replace(idx=idx), vec), refs   # a global buffer's
  def load(self, bidx:UOp) -> str:
    if bidx.op is Ops.SHRINK:
      cond, vec, lanes = self.vector(bidx)
      ty = self.T(bidx.dtype, len(lanes))
      packed = self.op("OpCompositeConstruct", ty, *[self.read(l, bidx.dtype) for l in lanes], prefix="val")
      if cond is None: return packed
      # both read, one selected (not a branch: drivers fold it once the constant is specialized); the vecN read is in bounds either way
      conds = self.op("OpCompositeConstruct", self.T(dtypes.bool, len(lanes)), *[cond] * len(lanes))   # SPIR-V 1.3: one per lane
      return self.op("OpSelect", ty, conds, self.read(cast(Ref, vec), bidx.dtype), packed, prefix="val")   # set with cond
    return self.read(ref, bidx.dtype) if isinstance(ref := self.r[bidx], Ref) else ref
  def store(self, bidx:UOp, v:UOp) -> str:
    if (rmw := read_modify_write(bidx, v)) is not None:   # a packed field of a word other invocations may store to at once
      scope, relaxed = self.const(dtypes.uint, 1), self.const(dtypes.uint, 0)
      def atomics(p:str):
        for op, x in zip(("OpAtomicAnd", "OpAtomicOr"), rmw):
          if x is not None: self.op(op, self.T(dtypes.uint), p, scope, relaxed, self.r[x])
      self.in_window(self.r[bidx], 0, atomics)
      return ""
    if bidx.op is Ops.SHRINK:
      cond, vec, lanes = self.vector(bidx)
      def scalars(): [self.write(l, v.dtype, self.op("OpCompositeExtract", self.T(v.dtype), self.r[v], str(j))) for j, l in enumerate(lanes)]
      if cond is None: scalars()
      else: self.branch(cond, lambda: self.write(cast(Ref, vec), v.dtype, self.r[v]), scalars)   # set with cond
    else: self.write(self.r[bidx], v.dtype, self.r[v])
    return ""

class SPIRVKernel(Memory):
  """A kernel's UOps lowered into the module: push constants as the ABI lays them out, values, ALU and structured control flow."""
  def __init__(self, plan:KernelPlan, uops:list[UOp]):
    super().__init__(plan.caps)
    self.plan = plan
    self.r: dict[UOp, Any] = {}   # the id of each value (str), or of an INDEX its Ref
    self.structs: dict[UOp, Any] = {}   # open RANGE -> its labels (a tuple), open IF -> its merge label
    self.uses, self.consumer = Counter(s for u in uops for s in u.src), {s: u for u in uops for s in u.src}
    self.skip = self.dead_rmw_values(uops)
    self.vmm = any(u.op is Ops.WMMA for u in uops)   # cooperative matrices, which SPIR-V allows only in the Vulkan memory model
    members = plan.push_constants()
    self.member = {key: i for i, (_, key, _, _, _) in enumerate(members)}
    if members:
      tys = [self.psb(dt, 1, not b.writable) if isinstance(b, Buf) else self.T(dt, arr=n, stride=4) if n else self.T(dt)
             for _, _, dt, n, b in members]
      self.deco += ["OpDecorate %PC Block"] + [f"OpMemberDecorate %PC {i} Offset {m[0]}" for i, m in enumerate(members)]
      self.var("%pc", self.g("%PC", f"OpTypeStruct {' '.join(tys)}"), "PushConstant")
  def dead_rmw_values(self, uops:list[UOp]) -> set[UOp]:
    """The value of a read-modify-write store of a packed field, (LOAD & keep) | field: the store is two atomics on keep and
    field instead (packing.read_modify_write), so the LOAD and the masking are never computed."""
    dead = set()
    for u in uops:
      if u.op is Ops.STORE and (rmw := read_modify_write(u.src[0], v := u.src[1])) is not None:
        keep, field = rmw
        masked = v if field is None else v.src[1] if v.src[0] is field else v.src[0]
        dead |= {x for x in (v, masked, masked.src[1] if masked.src[0] is keep else masked.src[0]) if self.uses[x] == 1}
    return dead
  def special(self, x:UOp) -> str:
    builtin = {"g": "WorkgroupId", "l": "LocalInvocationId"}[x.arg[0]]
    def load():
      v = self.var(f"%{builtin}", self.T(dtypes.uint, 3), "Input")
      if (d := f"OpDecorate {v} BuiltIn {builtin}") not in self.deco: self.deco.append(d)
      return self.op("OpLoad", self.T(dtypes.uint, 3), v)
    vec, i = self.prologue(builtin, load), self.T(dtypes.int)
    def value():   # gidx0 past maxComputeWorkGroupCount[0] adds the push constant _xbase (abi.py XBASE)
      wide = x.arg == "gidx0" and "xbase" in self.member
      v = self.op("OpBitcast", i, self.op("OpCompositeExtract", self.T(dtypes.uint), vec, x.arg[-1]), **({} if wide else {"rid": f"%{x.arg}"}))
      if not wide: return v
      return self.op("OpIAdd", i, v, self.push(i, "xbase"), rid=f"%{x.arg}")
    return self.prologue(x.arg, value)
  def wmma(self, x:UOp) -> str:
    """A WMMA through workgroup memory (coopmat.py): the thread's fragments into its subgroup's tiles, D = A*B + C on cooperative
    matrices, its fragment of D back."""
    w, uint = Wmma.of(x), self.T(dtypes.uint)
    sizes, dts, g = w.sizes(), (w.din, w.din, w.dout), prod(self.plan.local) // w.S
    tiles = [self.var(f"%t{k}_{w.name}", self.T(dt, arr=g * n), "Workgroup") for k, dt, n in zip("ABC", dts, sizes)]
    def index():
      v = self.var("%LocalInvocationIndex", uint, "Input")
      if (d := f"OpDecorate {v} BuiltIn LocalInvocationIndex") not in self.deco: self.deco.append(d)
      i = self.op("OpLoad", uint, v)
      return self.op("OpUDiv", uint, i, self.const(dtypes.uint, w.S)), self.op("OpUMod", uint, i, self.const(dtypes.uint, w.S))
    sg, lane = cast(tuple[str, str], self.prologue(f"wmma_lane{w.S}", index))
    wg = Ref("", "", w.din, "Workgroup")
    pub, see = self.mem(wg, store=True), self.mem(wg)
    def at(t:str, dt:DType, i:str) -> str: return self.op("OpAccessChain", self.ptr("Workgroup", self.T(dt)), t, i)
    bases = [self.op("OpIMul", uint, sg, self.const(dtypes.uint, n)) for n in sizes]
    frags = [self.op("OpIAdd", uint, b, self.op("OpIMul", uint, lane, self.const(dtypes.uint, n // w.S))) for b, n in zip(bases, sizes)]
    for t, dt, f, n, src in zip(tiles, dts, frags, sizes, x.src):
      for e in range(n // w.S):
        self.do("OpStore", at(t, dt, self.add(f, e, dtypes.uint)), self.op("OpCompositeExtract", self.T(dt), self.r[src], str(e)), *pub)
    # OpControlBarrier Subgroup Subgroup AcquireRelease|WorkgroupMemory
    def sync(): self.do("OpControlBarrier", *(self.const(dtypes.uint, v) for v in (3, 3, 0x108)))
    sync()
    def mat(dt:DType, rows:int, cols:int, use:int) -> str:
      return self.g(f"%cm{use}_{rows}x{cols}{self.T(dt)[1:]}", "OpTypeCooperativeMatrixKHR " +
                    " ".join([self.T(dt), *(self.const(dtypes.uint, v) for v in (3, rows, cols, use))]))
    # the use (MatrixA/B/Accumulator), the layout (RowMajor 0, ColumnMajor 1) and the stride are constants' ids
    types = [mat(dt, r, c, use) for use, (dt, (r, c, _, _)) in enumerate(zip(dts, w.tiles()))]
    ms = [self.op("OpCooperativeMatrixLoadKHR", ty, at(t, dt, base), self.const(dtypes.uint, int(colmajor)), self.const(dtypes.uint, stride),
                  *see) for ty, t, dt, base, (_, _, colmajor, stride) in zip(types, tiles, dts, bases, w.tiles())]
    sin, sout = w.signed
    mask = "|".join(m for m, on in (("MatrixASignedComponentsKHR", sin), ("MatrixBSignedComponentsKHR", sin),
                                    ("MatrixCSignedComponentsKHR", sout), ("MatrixResultSignedComponentsKHR", sout)) if on)
    d = self.op("OpCooperativeMatrixMulAddKHR", types[2], *ms, *([mask] if mask else []))
    self.do("OpCooperativeMatrixStoreKHR", at(tiles[2], w.dout, bases[2]), d, self.const(dtypes.uint, 0), self.const(dtypes.uint, w.N), *pub)
    sync()
    back = [self.op("OpLoad", self.T(w.dout), at(tiles[2], w.dout, self.add(frags[2], e, dtypes.uint)), *see) for e in range(sizes[2] // w.S)]
    return self.op("OpCompositeConstruct", self.ty(x), *back, prefix=f"__WMMA_{w.name}_")
  def alu(self, x:UOp) -> str:
    ty, sdt = self.ty(x), x.src[0].dtype if x.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else x.dtype
    if x.op in CHAINED and dtypes.is_float(x.dtype):
      acc, *rest = [self.r[o] for o in self.chain(x)]
      for o in rest: acc = self.op(cast(str, ALU[x.op][0]), ty, acc, o, prefix="alu")   # CHAINED ops all have a float opcode
      return acc
    a = [self.r[s] for s in x.src]
    if x.op is Ops.RECIPROCAL: return self.op("OpFDiv", ty, self.const(x.dtype, 1), a[0], prefix="alu")
    if x.op is Ops.TRUNC: return self.ext("Trunc", ty, a[0])
    if x.op in (Ops.SQRT, Ops.LOG2):
      # IEEE where GLSL.std.450 leaves them undefined (glsl.guard): NaN below zero and for NaN (an unordered x < 0), -inf at zero
      zero, b = self.const(x.dtype, 0), self.T(dtypes.bool)
      v = self.ext("Sqrt" if x.op is Ops.SQRT else "Log2", ty, a[0])
      if x.op is Ops.LOG2: v = self.op("OpSelect", ty, self.op("OpFOrdEqual", b, a[0], zero), self.const(x.dtype, -math.inf), v)
      return self.op("OpSelect", ty, self.op("OpFUnordLessThan", b, a[0], zero), self.const(x.dtype, math.nan), v, prefix="alu")
    if x.op is Ops.CMOD and dtypes.is_float(x.dtype):   # a-b*trunc(a/b), as the GLSL renderer
      return self.op("OpFSub", ty, a[0], self.op("OpFMul", ty, a[1], self.ext("Trunc", ty, self.op("OpFDiv", ty, *a))), prefix="alu")
    if (name := ALU.get(x.op, (None,) * 4)[kind(sdt)]) is None: raise CompileError(f"no SPIR-V instruction for {x.op} on {sdt}")
    return self.op(name, ty, *a, prefix="alu")
  # tinygrad's C-style renderers (CPU's clang, GLSL) print a single-use ADD/MUL operand of the same op without parentheses, so
  # a + (b + c) runs as (a + b) + c. Float chains are evaluated that way here too: the same bits as DEV=CPU and the GLSL renderer.
  def chain(self, x:UOp) -> list[UOp]: return [o for s in x.src for o in (self.chain(s) if self.inner(s) else [s])]
  def inner(self, u:UOp) -> bool:
    """Whether u is such an operand: it is computed as part of its consumer's chain."""
    return u.op in CHAINED and dtypes.is_float(u.dtype) and self.uses[u] == 1 and self.consumer[u].op is u.op
  def loop(self, x:UOp) -> str:
    hdr, body, cont, merge, pre = self.nid("L"), self.nid("L"), self.nid("L"), self.nid("L"), self.block
    i, nxt = f"%{axis_letters[x.arg[-1]]}idx{range_str(x)}" if x.dtype != dtypes.void else "", self.nid()
    self.do("OpBranch", hdr)
    self.label(hdr)
    self.structs[x] = (hdr, cont, merge, i, nxt)
    if x.dtype == dtypes.void:   # an unbounded loop: END's condition says whether to go round again
      self.do("OpLoopMerge", merge, cont, "None")
      self.do("OpBranch", body)
    else:
      self.op("OpPhi", self.ty(x), self.const(x.dtype, 0), pre, nxt, cont, rid=i)
      lt = self.op("OpULessThan" if dtypes.is_unsigned(x.dtype) else "OpSLessThan", self.T(dtypes.bool), i, self.r[x.src[0]])
      self.do("OpLoopMerge", merge, cont, "None")
      self.do("OpBranchConditional", lt, body, merge)
    self.label(body)
    return i
  def end(self, x:UOp) -> str:
    rng = x.src[1]
    hdr, cont, merge, i, nxt = self.structs.pop(rng)
    self.do("OpBranch", cont)
    self.label(cont)
    if rng.dtype == dtypes.void: self.do("OpBranchConditional", self.r[x.src[2]], hdr, merge)
    else:
      self.op("OpIAdd", self.ty(rng), i, self.const(rng.dtype, 1), rid=nxt)
      self.do("OpBranch", hdr)
    return self.label(merge)
  def if_(self, x:UOp) -> str:
    t, self.structs[x] = self.nid("L"), self.nid("L")
    self.do("OpSelectionMerge", self.structs[x], "None")
    self.do("OpBranchConditional", self.r[x.src[0]], t, self.structs[x])
    return self.label(t)
  def endif(self, x:UOp) -> str:
    self.do("OpBranch", m := self.structs.pop(x.src[0]))
    return self.label(m)
  def finish(self, name:str) -> str:
    d, addresses = self.decl, any(b.address is not None for b in self.plan.bufs.values())
    floats = [w for w, t in ((16, "%half"), (32, "%float"), (64, "%double")) if t in d and f"nan{w}" in self.caps]
    # the capabilities the kernel uses, each only where the device has it (a missing one is a renderer bug: refused, never handed to
    # the driver). 8-bit integers without shaderInt8 are bool buffers' bytes, read and written as uint: 8-bit storage alone
    uses = {"Float16": ("f16", "%half" in d), "Float64": ("f64", "%double" in d), "Int64": ("i64", "%long" in d or "%ulong" in d),
            "Int16": ("i16", "%short" in d or "%ushort" in d), "Int8": ("i8", ("%char" in d or "%uchar" in d) and "i8" in self.caps),
            "StorageBuffer16BitAccess": ("s16", 2 in self.sb_bytes), "StorageBuffer8BitAccess": ("s8", 1 in self.sb_bytes),
            "PhysicalStorageBufferAddresses": ("bda", addresses), "ImageBuffer": ("texel", "%img_r32ui" in d or "%img_rgba32ui" in d),
            "VulkanMemoryModel": ("vmm", self.vmm), "CooperativeMatrixKHR": ("coopmat", self.vmm)}
    if (missing := [f"{c} ({FLAGS[f]})" for c, (f, used) in uses.items() if used and f not in self.caps]):
      raise CompileError(f"VULKAN: kernel {name} needs SPIR-V capabilities this device lacks: {', '.join(missing)}")
    caps = ["Shader", *(c for c, (_, used) in uses.items() if used), *(["SignedZeroInfNanPreserve"] if floats else [])]
    # what each capability needs declared where its SPIR-V extension is not core yet (SPIR-V 1.3 on Vulkan 1.1)
    exts = [e for c, e in (("StorageBuffer8BitAccess", "SPV_KHR_8bit_storage"), ("StorageBuffer16BitAccess", "SPV_KHR_16bit_storage"),
            ("PhysicalStorageBufferAddresses", "SPV_KHR_physical_storage_buffer"), ("SignedZeroInfNanPreserve", "SPV_KHR_float_controls"),
            ("VulkanMemoryModel", "SPV_KHR_vulkan_memory_model"), ("CooperativeMatrixKHR", "SPV_KHR_cooperative_matrix"))
            if c in caps and not self.target.core(e)]
    return "\n".join([f"; tinygrad_vk {self.target.name}, kernel: {name}", *(f"; {n}" for n in self.plan.meta.encode()),
      *(f"OpCapability {c}" for c in caps),
      *(f'OpExtension "{e}"' for e in exts),
      *(['%glsl = OpExtInstImport "GLSL.std.450"'] if self.uses_glsl else []),
      f"OpMemoryModel {'PhysicalStorageBuffer64' if addresses else 'Logical'} {'Vulkan' if self.vmm else 'GLSL450'}",
      f"OpEntryPoint GLCompute %main \"main\" {' '.join(self.iface)}".rstrip(), "OpExecutionMode %main LocalSize {} {} {}".format(*self.plan.local),
      *(f"OpExecutionMode %main SignedZeroInfNanPreserve {w}" for w in floats), *self.deco, *self.glob,
      "%main = OpFunction %void None %fn_void", "%entry = OpLabel", *self.fvars, *self.pro, *self.body, "OpReturn", "OpFunctionEnd"])

spirv_lower = PatternMatcher([
  (UPat.cvar("c").cast(name="x"), lambda ctx,x,c: ctx.const(x.dtype, c.arg)),
  (UPat(Ops.CONST, name="x"), lambda ctx,x: ctx.const(x.dtype, x.arg)),
  (UPat(Ops.PARAM, name="x"), lambda ctx,x: ctx.param(x)),
  (UPat(Ops.BUFFER, name="x"), lambda ctx,x: ctx.buffer(x)),
  (UPat(Ops.AFTER, name="x"), lambda ctx,x: ctx.r[x.src[0]]),
  (UPat(Ops.SPECIAL, name="x"), lambda ctx,x: ctx.special(x)),
  (UPat(Ops.RANGE, name="x"), lambda ctx,x: ctx.loop(x)),
  (UPat(Ops.END, name="x"), lambda ctx,x: ctx.end(x)),
  (UPat(Ops.IF, name="x"), lambda ctx,x: ctx.if_(x)),
  (UPat(Ops.ENDIF, name="x"), lambda ctx,x: ctx.endif(x)),
  # OpControlBarrier Workgroup Workgroup AcquireRelease|WorkgroupMemory, as GLSL's barrier()
  (UPat(Ops.BARRIER), lambda ctx: ctx.do("OpControlBarrier", ctx.const(dtypes.uint, 2), ctx.const(dtypes.uint, 2), ctx.const(dtypes.uint, 0x108))),
  # views (and packing's word views) and vector accesses are rendered by the INDEX/LOAD/STORE that uses them
  (UPat((Ops.SHRINK, Ops.BITCAST), name="x"), lambda ctx,x: "" if x.op is Ops.SHRINK or x.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None),
  (UPat(Ops.INDEX, src=(UPat.var("b"), UPat.var("i")), name="x"), lambda ctx,x,b,i: ctx.index(x, b, i)),
  # the element offset of the view bound at a slot, in packing's word indexes
  (UPat(Ops.CUSTOMI, arg=VIEW_OFFSET, name="x"), lambda ctx,x: ctx.off(int(x.src[0].vmin))),
  (UPat(Ops.CUSTOMI, arg=VAR_WORD, name="x"), lambda ctx,x: ctx.var_word(ctx.r[x.src[0]], int(x.src[1].vmin))),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"), UPat.var("alt"), UPat.var("gate"))),
   lambda ctx,bidx,alt,gate: ctx.branch(ctx.r[gate], lambda: ctx.load(bidx), ty=ctx.ty(alt), alt=ctx.r[alt])),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"),)), lambda ctx,bidx: ctx.load(bidx)),
  (UPat(Ops.STORE, src=(UPat.var("bidx"), UPat.var("v"))), lambda ctx,bidx,v: ctx.store(bidx, v)),
  (UPat(Ops.STACK, name="x"), lambda ctx,x: ctx.op("OpCompositeConstruct", ctx.ty(x), *[ctx.r[s] for s in x.src], prefix="cast")),
  # value casts; a cast of a pointer has no SPIR-V here
  (UPat(Ops.CAST, name="x"), lambda ctx,x: ctx.cast(x.src[0].dtype, x.dtype, ctx.r[x.src[0]]) if x.addrspace not in MEMORY else None),
  (UPat(Ops.BITCAST, name="x"), lambda ctx,x: ctx.bitcast(x.src[0].dtype, x.dtype, ctx.r[x.src[0]]) if x.addrspace not in MEMORY else None),
  (UPat(GroupOp.ALU, name="x"), lambda ctx,x: ctx.alu(x)),
  (UPat(Ops.WMMA, name="x"), lambda ctx,x: ctx.wmma(x)),
])

class SPIRVRenderer(VulkanRenderer):
  def __init__(self, target):
    super().__init__(target)
    self.compiler = SPIRVCompiler(spirv_target(self.caps))
  def render(self, uops:list[UOp]) -> str:
    k, name = SPIRVKernel(self.kernel_plan(uops), uops), kernel_name(uops)
    for u in uops:
      if u.op in (Ops.NOOP, Ops.GROUP, Ops.SINK) or (u.op is Ops.CONST and u.dtype in dtypes.weaks) or (u.op is Ops.STACK and not u.src): continue
      if k.inner(u) or u in k.skip: continue
      try: ret = spirv_lower.rewrite(u, ctx=k)
      except Exception as e:
        raise CompileError(f"VULKAN: kernel {name}: cannot lower {u.op} ({u.dtype}, arg={u.arg}) to SPIR-V: {type(e).__name__}: "
                           f"{str(e)[:300]}") from e
      if ret is None: raise CompileError(f"VULKAN: kernel {name}: no SPIR-V for {u.op} ({u.dtype}, arg={u.arg}, "
                                         f"srcs {[(s.op, s.dtype) for s in u.src]})")
      k.r[u] = ret
    return k.finish(name)
