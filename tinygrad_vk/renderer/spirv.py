"""tinygrad UOps -> SPIR-V 1.5 compute shaders for Vulkan 1.2, with no compiler binary.

The renderer writes SPIR-V assembly (spirv-as syntax, one instruction a line: what DEBUG=4 prints) and compiler.py assembles it
in-process. A kernel has the GLSL renderer's layout and semantics (renderer/glsl.py, the reference in the differential tests),
so the runtime cannot tell the two apart:
  - a global buffer is a StorageBuffer variable at DescriptorSet 0, Binding <slot>, NonWritable when the kernel never stores to
    it; a view (BITCAST/SHRINK of a PARAM) and an aligned float4 access use other variables of the same binding, the vecN ones
    behind the specialization constant _a<slot> (SpecId = slot);
  - push constants: `_off[]` (the element offset of each binding's view, a byte each), then the scalar vars at
    `TinyELF.iter_sig` offsets;
  - tinygrad's local size is the LocalSize execution mode; gidx/lidx are WorkgroupId/LocalInvocationId;
  - structured control flow: a RANGE is a loop whose counter is an OpPhi (OpLoopMerge), IF and gated loads are selections
    (OpSelectionMerge); an INDEX is only dereferenced by its LOAD/STORE, so a gated access stays inside its branch;
  - REG buffers are Function variables, LOCAL buffers Workgroup variables; values are SSA ids named like the C renderers'
    (alu3, val0, gidx0, Ridx0), types and constants by what they are (%v4float, %int_3).
"""
from __future__ import annotations
import math, struct
from collections import Counter
from typing import NamedTuple
from tinygrad.dtype import DType, dtypes, AddrSpace, truncate, float_to_bf16
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher, GroupOp, axis_letters, range_str
from tinygrad.renderer import Renderer
from tinygrad.renderer.cstyle import create_non_native_float_pats, pm_manual_bf16_cast
from tinygrad.device import TinyELF, CompileError
from tinygrad.helpers import ceildiv, prod
from tinygrad_vk.caps import Caps, MAX_GROUPS_X, VEC_ALIGN
from tinygrad_vk.compiler import SPIRVCompiler
from tinygrad_vk.renderer.glsl import GLSLRenderer, glsl_matcher, nan_bits_matcher, UINT_OF_SIZE, _multiple, _is_view, _refusal

# the SPIR-V type of each dtype (bfloat16 lives in 16-bit words, its math runs in float) and its declaration
TYPE = {dtypes.bool: "bool", dtypes.char: "char", dtypes.uchar: "uchar", dtypes.short: "short", dtypes.ushort: "ushort", dtypes.int: "int",
        dtypes.uint: "uint", dtypes.long: "long", dtypes.ulong: "ulong", dtypes.half: "half", dtypes.float: "float", dtypes.double: "double",
        dtypes.bfloat16: "ushort"}
DECL = {"void": "OpTypeVoid", "bool": "OpTypeBool", "char": "OpTypeInt 8 1", "uchar": "OpTypeInt 8 0", "short": "OpTypeInt 16 1",
        "ushort": "OpTypeInt 16 0", "int": "OpTypeInt 32 1", "uint": "OpTypeInt 32 0", "long": "OpTypeInt 64 1", "ulong": "OpTypeInt 64 0",
        "half": "OpTypeFloat 16", "float": "OpTypeFloat 32", "double": "OpTypeFloat 64"}
SC = {"StorageBuffer": "sb", "Workgroup": "wg", "Function": "fn", "PushConstant": "pc", "Input": "in"}
MEMORY = (AddrSpace.GLOBAL, AddrSpace.LOCAL, AddrSpace.REG)
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
  """Elements of a buffer variable: what an INDEX gives, dereferenced by the LOAD/STORE that uses it."""
  var: str
  ty: str           # element type id
  dt: DType         # element scalar dtype (an element is a vecN of it in a vector variable)
  sc: str           # storage class
  slot: int = -1    # binding, for storage buffers
  idx: str = ""     # index of the first element
  k: int = 1        # elements per value: a wide view element is k words

class SPIRVKernel:
  """The module being written: types, constants and variables declared once on first use, the entry block's prologue (values
  every block may use: push constants, builtins, view offsets) and the body."""
  def __init__(self, ren:SPIRVRenderer, uops:list[UOp]):
    self.caps, self.r, self.n = ren.caps, {}, 0
    self.decl: dict[str, str] = {}     # id -> declaration line of every type, constant and module variable
    self.glob, self.deco, self.iface, self.fvars, self.pro, self.body = [], [], [], [], [], []
    self.sb_bytes: set[int] = set()    # scalar sizes in storage buffers: 8/16-bit storage capabilities
    self.uses_glsl = False
    self.cache: dict[str, str] = {}    # prologue values, once each
    self.structs: dict[UOp, tuple] = {}   # open RANGE/IF -> their labels
    self.block = "%entry"
    self.uses, self.consumer = Counter(s for u in uops for s in u.src), {s: u for u in uops for s in u.src}
    self.g("%fn_void", f"OpTypeFunction {self.T('void')}")
    params = sorted((u for u in uops if u.op is Ops.PARAM), key=lambda u: u.arg.slot)
    self.gbufs = {u.arg.slot: u for u in params if u.addrspace == AddrSpace.GLOBAL}
    self.written = {u.src[0].buf_uop.arg.slot for u in uops if u.op is Ops.STORE and u.src[0].addrspace == AddrSpace.GLOBAL}
    # push constants, laid out as program.py packs them (the GLSL renderer's layout)
    nwords, pvars = ceildiv(max(self.gbufs) + 1, 4) if self.gbufs else 0, [u for u in params if u.addrspace == AddrSpace.ALU]
    members = [(0, self.T(dtypes.uint, arr=nwords, stride=4))] if nwords else []
    members += [(off, self.T(dt)) for off, dt in TinyELF.iter_sig(tuple((None, u.arg.slot, u.dtype, ()) for u in pvars), 4 * nwords)]
    self.pvar = {u.arg.slot: (len(members) - len(pvars) + i, u.dtype) for i, u in enumerate(pvars)}
    if members:
      pc = self.g("%PC", f"OpTypeStruct {' '.join(t for _, t in members)}")
      self.deco += ["OpDecorate %PC Block"] + [f"OpMemberDecorate %PC {i} Offset {off}" for i, (off, _) in enumerate(members)]
      self.var("%pc", pc, "PushConstant")
    for slot, u in self.gbufs.items(): self.buf(slot, dtypes.uchar if u.dtype == dtypes.bool else u.dtype)

  # ---- ids, types, constants, variables
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
    name = dt if isinstance(dt, str) else TYPE[dt]
    if arr:
      # explicitly laid out arrays (stride) are other types than Function/Workgroup ones, which must not carry a layout
      rid = f"%arr{arr if arr > 0 else ''}_{self.T(name, n)[1:]}{'_s' if stride else ''}"
      if rid not in self.decl:
        self.g(rid, f"OpTypeArray {self.T(name, n)} {self.const(dtypes.uint, arr)}" if arr > 0 else f"OpTypeRuntimeArray {self.T(name, n)}")
        if stride: self.deco.append(f"OpDecorate {rid} ArrayStride {stride}")
      return rid
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
        self.iface.append(rid)
    return rid

  def buf(self, slot:int, dt:DType, n:int=1) -> Ref:
    """The StorageBuffer variable of binding `slot` whose elements are dt (or vecN of it): the PARAM's own, or an alias."""
    ety = self.T(dt, n)
    own = self.gbufs[slot].dtype
    rid = f"%data{slot}" if n == 1 and (dt == own or (own == dtypes.bool and dt == dtypes.uchar)) else f"%data{slot}_{ety[1:]}"
    if rid not in self.decl:
      self.sb_bytes.add(dt.itemsize)
      st = f"%sb_{ety[1:]}"
      if st not in self.decl:
        self.g(st, f"OpTypeStruct {self.T(dt, n, arr=-1, stride=dt.itemsize * n)}")
        self.deco += [f"OpDecorate {st} Block", f"OpMemberDecorate {st} 0 Offset 0"]
      self.var(rid, st, "StorageBuffer")
      self.deco += [f"OpDecorate {rid} DescriptorSet 0", f"OpDecorate {rid} Binding {slot}"]
      if slot not in self.written: self.deco.append(f"OpDecorate {rid} NonWritable")
    return Ref(rid, ety, dt, "StorageBuffer", slot)

  # ---- instructions
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

  # ---- values
  def int_idx(self, i:UOp) -> str: return self.r[i] if i.dtype == dtypes.int else self.cast(i.dtype, dtypes.int, self.r[i])

  def off(self, slot:int) -> str:
    """_o<slot>: the element offset of the view bound at `slot` inside its binding, one byte of _off[]."""
    def load():
      w = self.op("OpLoad", self.T(dtypes.uint), self.op("OpAccessChain", self.ptr("PushConstant", self.T(dtypes.uint)), "%pc",
                                                          self.const(dtypes.int, 0), self.const(dtypes.int, slot // 4)))
      u = self.T(dtypes.uint)
      b = self.op("OpBitwiseAnd", u, self.op("OpShiftRightLogical", u, w, self.const(dtypes.uint, 8 * (slot % 4))), self.const(dtypes.uint, 255))
      return self.op("OpBitcast", self.T(dtypes.int), b, rid=f"%o{slot}")
    return self.prologue(f"o{slot}", load)

  def special(self, x:UOp) -> str:
    builtin = {"g": "WorkgroupId", "l": "LocalInvocationId"}[x.arg[0]]
    def load():
      v = self.var(f"%{builtin}", self.T(dtypes.uint, 3), "Input")
      if (d := f"OpDecorate {v} BuiltIn {builtin}") not in self.deco: self.deco.append(d)
      return self.op("OpLoad", self.T(dtypes.uint, 3), v)
    vec = self.prologue(builtin, load)
    return self.prologue(x.arg, lambda: self.op("OpBitcast", self.T(dtypes.int), self.op("OpCompositeExtract", self.T(dtypes.uint), vec,
                                                                                           x.arg[-1]), rid=f"%{x.arg}"))

  def param(self, x:UOp):
    if x.addrspace == AddrSpace.GLOBAL: return self.buf(x.arg.slot, dtypes.uchar if x.dtype == dtypes.bool else x.dtype)
    member, dt = self.pvar[x.arg.slot]
    def load(): return self.op("OpLoad", self.T(dt), self.op("OpAccessChain", self.ptr("PushConstant", self.T(dt)), "%pc",
                                                             self.const(dtypes.int, member)), rid=f"%var{x.arg.slot}")
    return self.prologue(f"var{member}", load)

  def buffer(self, x:UOp) -> Ref:
    sc, name = ("Workgroup", "smem") if x.addrspace == AddrSpace.LOCAL else ("Function", "reg")
    return Ref(self.var(f"%{name}{x.arg.slot}", self.T(x.dtype, arr=x.max_numel()), sc), self.T(x.dtype), x.dtype, sc)

  def cast(self, frm:DType, to:DType, x:str) -> str:
    if frm == to: return x
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

  def bitcast(self, frm:DType, to:DType, x:str) -> str:
    if TYPE[frm] == TYPE[to]: return x
    if dtypes.bool in (frm, to): raise CompileError(f"no bitcast between {frm} and {to}")
    return self.op("OpBitcast", self.T(to), x)

  def alu(self, x:UOp) -> str:
    ty, sdt = self.ty(x), x.src[0].dtype if x.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else x.dtype
    if x.op in CHAINED and dtypes.is_float(x.dtype):
      acc, *rest = [self.r[o] for o in self.chain(x)]
      for o in rest: acc = self.op(ALU[x.op][0], ty, acc, o, prefix="alu")
      return acc
    a = [self.r[s] for s in x.src]
    if x.op is Ops.RECIPROCAL: return self.op("OpFDiv", ty, self.const(x.dtype, 1), a[0], prefix="alu")
    if x.op is Ops.EXP2: return self.ext("Exp2", ty, a[0])
    if x.op is Ops.TRUNC: return self.ext("Trunc", ty, a[0])
    if x.op in (Ops.SQRT, Ops.LOG2):
      # GLSL.std.450 leaves log2(x<=0) and sqrt(x<0) undefined; tinygrad wants IEEE: NaN below zero, -inf at zero
      zero, b = self.const(x.dtype, 0), self.T(dtypes.bool)
      v = self.ext("Sqrt" if x.op is Ops.SQRT else "Log2", ty, a[0])
      if x.op is Ops.LOG2: v = self.op("OpSelect", ty, self.op("OpFOrdEqual", b, a[0], zero), self.const(x.dtype, -math.inf), v)
      return self.op("OpSelect", ty, self.op("OpFOrdLessThan", b, a[0], zero), self.const(x.dtype, math.nan), v, prefix="alu")
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

  # ---- memory
  def index(self, b:UOp, i:UOp):
    if b.addrspace not in MEMORY:   # a lane of a vector value (a coalesced load or a STACK)
      if i.op is Ops.CAST and i.src[0].op is Ops.CONST: return self.op("OpCompositeExtract", self.T(b.dtype), self.r[b], str(i.src[0].arg))
      return self.op("OpVectorExtractDynamic", self.T(b.dtype), self.r[b], self.r[i])
    if _is_view(b): return self.view(b, i)
    return self.elem(b, self.int_idx(i))

  def elem(self, b:UOp, idx:str) -> Ref:
    ref = self.r[b]
    if ref.sc == "StorageBuffer": idx = self.op("OpIAdd", self.T(dtypes.int), idx, self.off(ref.slot))
    return ref._replace(idx=idx)

  # Buffer views inside a kernel: INDEX(BITCAST/SHRINK(...(PARAM))), read through another variable of the same binding, in
  # w-byte words (w: the smallest element size in the chain): a view element of w bytes is a word of the view's own type, a wider
  # one is put together from (or split into) k words of a w-byte uint variable. As renderer/glsl.py's view_access.
  def view(self, b:UOp, i:UOp) -> Ref:
    terms, v = [(self.int_idx(i), b.dtype.itemsize)], b
    while v.op in (Ops.BITCAST, Ops.SHRINK, Ops.AFTER):
      if v.op is Ops.SHRINK: terms.append((self.int_idx(v.src[1]), v.dtype.itemsize))
      v = v.src[0]
    if v.op is not Ops.PARAM or v.addrspace != AddrSpace.GLOBAL: raise CompileError(f"no SPIR-V for a buffer view of {v.op}")
    if dtypes.bool in (b.dtype, v.dtype): raise CompileError("no SPIR-V for a bitcast view of a bool buffer")
    terms.append((self.off(v.arg.slot), v.dtype.itemsize))
    w, word = min(s for _, s in terms), ""
    for t, s in reversed(terms):
      if s != w: t = self.op("OpIMul", self.T(dtypes.int), t, self.const(dtypes.int, s // w))
      word = self.op("OpIAdd", self.T(dtypes.int), word, t) if word else t
    return self.buf(v.arg.slot, b.dtype if b.dtype.itemsize == w else UINT_OF_SIZE[w])._replace(idx=word, k=b.dtype.itemsize // w)

  def pointer(self, ref:Ref, j:int=0) -> str:
    idx = ref.idx if not j else self.op("OpIAdd", self.T(dtypes.int), ref.idx, self.const(dtypes.int, j))
    chain = [self.const(dtypes.int, 0), idx] if ref.sc == "StorageBuffer" else [idx]
    return self.op("OpAccessChain", self.ptr(ref.sc, ref.ty), ref.var, *chain)

  def read(self, ref:Ref, dt:DType, prefix="val") -> str:
    if ref.k > 1:   # a wide view element: k words, little end first
      u, wdt, bits = UINT_OF_SIZE[dt.itemsize], ref.dt, ""
      for j in range(ref.k):
        w = self.cast(wdt, u, self.op("OpLoad", ref.ty, self.pointer(ref, j)))
        if j: w = self.op("OpShiftLeftLogical", self.T(u), w, self.const(dtypes.int, 8 * wdt.itemsize * j))
        bits = self.op("OpBitwiseOr", self.T(u), bits, w) if bits else w
      return self.bitcast(u, dt, bits)
    v = self.op("OpLoad", ref.ty, self.pointer(ref), prefix=prefix)
    # bool buffers hold bytes: read them as uint so that only 8-bit storage (not 8-bit arithmetic) is needed
    if dt == dtypes.bool and ref.sc == "StorageBuffer":
      v = self.op("OpINotEqual", self.T(dt), self.op("OpUConvert", self.T(dtypes.uint), v), self.const(dtypes.uint, 0))
    return v

  def write(self, ref:Ref, dt:DType, v:str):
    if ref.k > 1:
      u, wdt = UINT_OF_SIZE[dt.itemsize], ref.dt
      bits = self.bitcast(dt, u, v)
      for j in range(ref.k):
        w = self.op("OpShiftRightLogical", self.T(u), bits, self.const(dtypes.int, 8 * wdt.itemsize * j)) if j else bits
        self.do("OpStore", self.pointer(ref, j), self.cast(u, wdt, w))
      return
    if dt == dtypes.bool and ref.sc == "StorageBuffer":
      v = self.op("OpUConvert", ref.ty, self.op("OpSelect", self.T(dtypes.uint), v, self.const(dtypes.uint, 1), self.const(dtypes.uint, 0)))
    self.do("OpStore", self.pointer(ref), v)

  # Coalesced (float4) accesses: LOAD/STORE of SHRINK(buf, offset, n). Where tinygrad's index is a multiple of n, a global buffer is
  # read through a vecN variable of its binding, provided the view offset _o is a multiple of n too: the specialization constant
  # _a<slot> says so, and the driver folds the branch when it builds the pipeline. Otherwise: n scalar accesses.
  def vector(self, sh:UOp) -> tuple[str|None, Ref|None, list[Ref]]:
    b, n = sh.src[0], sh.max_numel()
    if b.op not in (Ops.PARAM, Ops.BUFFER, Ops.AFTER): raise CompileError(f"no SPIR-V for a vector access through {b.op}")
    i = self.int_idx(sh.src[1])
    lanes = [self.elem(b, self.op("OpIAdd", self.T(dtypes.int), i, self.const(dtypes.int, j)) if j else i) for j in range(n)]
    if b.op is not Ops.PARAM or b.addrspace != AddrSpace.GLOBAL or n not in (2, 4) or b.dtype == dtypes.bool or "vec" not in self.caps or \
       _multiple(sh.src[1]) % n: return None, None, lanes
    slot = b.arg.slot
    spec = self.g(f"%a{slot}", f"OpSpecConstant {self.T(dtypes.int)} {VEC_ALIGN}")
    if (d := f"OpDecorate {spec} SpecId {slot}") not in self.deco: self.deco.append(d)
    cond = self.prologue(f"a{slot}_{n}", lambda: self.op("OpSGreaterThanEqual", self.T(dtypes.bool), spec, self.const(dtypes.int, n)))
    idx = self.op("OpShiftRightArithmetic", self.T(dtypes.int), lanes[0].idx, self.const(dtypes.int, n.bit_length() - 1))
    return cond, self.buf(slot, b.dtype, n)._replace(idx=idx), lanes

  def load(self, bidx:UOp) -> str:
    if bidx.op is Ops.SHRINK:
      cond, vec, lanes = self.vector(bidx)
      ty = self.T(bidx.dtype, len(lanes))
      def packed(): return self.op("OpCompositeConstruct", ty, *[self.read(l, bidx.dtype) for l in lanes], prefix="val")
      return packed() if cond is None else self.branch(cond, lambda: self.read(vec, bidx.dtype), packed, ty)
    return self.read(ref, bidx.dtype) if isinstance(ref := self.r[bidx], Ref) else ref

  def store(self, bidx:UOp, v:UOp) -> str:
    if bidx.op is Ops.SHRINK:
      cond, vec, lanes = self.vector(bidx)
      def scalars(): [self.write(l, v.dtype, self.op("OpCompositeExtract", self.T(v.dtype), self.r[v], str(j))) for j, l in enumerate(lanes)]
      if cond is None: scalars()
      else: self.branch(cond, lambda: self.write(vec, v.dtype, self.r[v]), scalars)
    else: self.write(self.r[bidx], v.dtype, self.r[v])
    return ""

  # ---- control flow
  def range(self, x:UOp) -> str:
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

  def finish(self, name:str, local:list[int]) -> str:
    floats = [w for w, t in ((16, "%half"), (32, "%float"), (64, "%double")) if t in self.decl and f"nan{w}" in self.caps]
    # a kernel only declares what it uses; 8/16-bit integer arithmetic only where the device has it (bool buffers are bytes
    # read and written as uint: 8-bit storage alone)
    caps = ["Shader"] + [c for c, need in (("Float16", "%half" in self.decl), ("Float64", "%double" in self.decl),
      ("Int64", "%long" in self.decl or "%ulong" in self.decl), ("Int16", ("%short" in self.decl or "%ushort" in self.decl) and "i16" in self.caps),
      ("Int8", ("%char" in self.decl or "%uchar" in self.decl) and "i8" in self.caps), ("StorageBuffer16BitAccess", 2 in self.sb_bytes),
      ("StorageBuffer8BitAccess", 1 in self.sb_bytes), ("SignedZeroInfNanPreserve", floats)) if need]
    return "\n".join([f"; tinygrad_vk SPIR-V 1.5 (Vulkan 1.2), kernel: {name}", *(f"OpCapability {c}" for c in caps),
      *(['%glsl = OpExtInstImport "GLSL.std.450"'] if self.uses_glsl else []), "OpMemoryModel Logical GLSL450",
      f"OpEntryPoint GLCompute %main \"main\" {' '.join(self.iface)}".rstrip(), "OpExecutionMode %main LocalSize {} {} {}".format(*local),
      *(f"OpExecutionMode %main SignedZeroInfNanPreserve {w}" for w in floats), *self.deco, *self.glob,
      "%main = OpFunction %void None %fn_void", "%entry = OpLabel", *self.fvars, *self.pro, *self.body, "OpReturn", "OpFunctionEnd"])

spirv_lower = PatternMatcher([
  (UPat.cvar("c").cast(name="x"), lambda ctx,x,c: ctx.const(x.dtype, c.arg)),
  (UPat(Ops.CONST, name="x"), lambda ctx,x: ctx.const(x.dtype, x.arg)),
  (UPat(Ops.PARAM, name="x"), lambda ctx,x: ctx.param(x)),
  (UPat(Ops.BUFFER, name="x"), lambda ctx,x: ctx.buffer(x)),
  (UPat(Ops.AFTER, name="x"), lambda ctx,x: ctx.r[x.src[0]]),
  (UPat(Ops.SPECIAL, name="x"), lambda ctx,x: ctx.special(x)),
  (UPat(Ops.RANGE, name="x"), lambda ctx,x: ctx.range(x)),
  (UPat(Ops.END, name="x"), lambda ctx,x: ctx.end(x)),
  (UPat(Ops.IF, name="x"), lambda ctx,x: ctx.if_(x)),
  (UPat(Ops.ENDIF, name="x"), lambda ctx,x: ctx.endif(x)),
  # OpControlBarrier Workgroup Workgroup AcquireRelease|WorkgroupMemory, as GLSL's barrier()
  (UPat(Ops.BARRIER), lambda ctx: ctx.do("OpControlBarrier", ctx.const(dtypes.uint, 2), ctx.const(dtypes.uint, 2), ctx.const(dtypes.uint, 0x108))),
  # views and vector accesses are rendered by the INDEX/LOAD/STORE that uses them
  (UPat((Ops.SHRINK, Ops.BITCAST), name="x"), lambda ctx,x: "" if x.op is Ops.SHRINK or _is_view(x) else None),
  (UPat(Ops.INDEX, src=(UPat.var("b"), UPat.var("i"))), lambda ctx,b,i: ctx.index(b, i)),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"), UPat.var("alt"), UPat.var("gate"))),
   lambda ctx,bidx,alt,gate: ctx.branch(ctx.r[gate], lambda: ctx.load(bidx), ty=ctx.ty(alt), alt=ctx.r[alt])),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"),)), lambda ctx,bidx: ctx.load(bidx)),
  (UPat(Ops.STORE, src=(UPat.var("bidx"), UPat.var("v"))), lambda ctx,bidx,v: ctx.store(bidx, v)),
  (UPat(Ops.STACK, name="x"), lambda ctx,x: ctx.op("OpCompositeConstruct", ctx.ty(x), *[ctx.r[s] for s in x.src], prefix="cast")),
  # value casts; a cast of a pointer has no SPIR-V here
  (UPat(Ops.CAST, name="x"), lambda ctx,x: ctx.cast(x.src[0].dtype, x.dtype, ctx.r[x.src[0]]) if x.addrspace not in MEMORY else None),
  (UPat(Ops.BITCAST, name="x"), lambda ctx,x: ctx.bitcast(x.src[0].dtype, x.dtype, ctx.r[x.src[0]]) if x.addrspace not in MEMORY else None),
  (UPat(GroupOp.ALU, name="x"), lambda ctx,x: ctx.alu(x)),
])

def loop_back_edges(uops:list[UOp]) -> int:
  """Upper bound of the loop back-edges one invocation runs (each loop entry counts one more, for its exit test)."""
  total, mult = 0, [1]
  for u in uops:
    if u.op is Ops.RANGE and u.dtype != dtypes.void:
      total += mult[-1] * (int(u.src[0].vmax) + 1)
      mult.append(mult[-1] * int(u.src[0].vmax))
    elif u.op is Ops.END and u.src[1].dtype != dtypes.void: mult.pop()
  return total

class SPIRVRenderer(Renderer):
  has_local, has_shared = True, True
  # the same native ops as the GLSL renderer, so tinygrad decomposes the same ones and both give the same results
  code_for_op = {op: lambda: None for op in GLSLRenderer.code_for_op}
  supported_dtypes = GLSLRenderer.supported_dtypes

  def __init__(self, target):
    super().__init__(target)
    self.caps = Caps.decode(target.arch)
    self.global_max = (MAX_GROUPS_X, *self.caps.wgcount[1:])
    self.local_max, self.shared_max = self.caps.wgsize, self.caps.smem
    self.supports_float4 = "vec" in self.caps
    self.extra_matcher = (glsl_matcher if "nan32" in self.caps else glsl_matcher + nan_bits_matcher) + \
      create_non_native_float_pats((dtypes.bfloat16,)) + pm_manual_bf16_cast
    self.compiler = SPIRVCompiler()

  def render(self, uops:list[UOp]) -> str:
    name = uops[-1].arg.function_name if uops and uops[-1].op is Ops.SINK and uops[-1].arg is not None else "test"
    if (bad := {u.dtype for u in uops if u.dtype in TYPE} - self.supported_dtypes() - {dtypes.void}):
      raise CompileError(f"VULKAN: this device does not support {', '.join(sorted(d.name for d in bad))} "
                         f"({'; '.join(sorted({_refusal(d) for d in bad}))})")
    # until renderer/loops.py reshapes such kernels: never run one that llvmpipe's loop limiter would cut short
    if self.caps.maxloop and (n := loop_back_edges(uops)) >= self.caps.maxloop:
      raise CompileError(f"VULKAN: kernel {name} runs up to {n} loop iterations per invocation, and this driver stops every loop of an "
                         f"invocation after {self.caps.maxloop} in total (Mesa llvmpipe, gallivm LP_MAX_TGSI_LOOP_ITERATIONS). Use a GPU "
                         "driver, or split the work (e.g. smaller reductions).")
    k, local = SPIRVKernel(self, uops), [1, 1, 1]
    for u in uops:
      if u.op in (Ops.NOOP, Ops.GROUP, Ops.SINK) or (u.op is Ops.CONST and u.dtype in dtypes.weaks) or (u.op is Ops.STACK and not u.src): continue
      if u.op is Ops.SPECIAL and u.arg[0] == "l": local[int(u.arg[-1])] = int(u.src[0].ssimplify())
      if k.inner(u): continue
      try: ret = spirv_lower.rewrite(u, ctx=k)
      except Exception as e:
        raise CompileError(f"VULKAN: kernel {name}: cannot lower {u.op} ({u.dtype}, arg={u.arg}) to SPIR-V: {type(e).__name__}: "
                           f"{str(e)[:300]}") from e
      if ret is None: raise CompileError(f"VULKAN: kernel {name}: no SPIR-V for {u.op} ({u.dtype}, arg={u.arg}, "
                                         f"srcs {[(s.op, s.dtype) for s in u.src]})")
      k.r[u] = ret
    return k.finish(name, local)
