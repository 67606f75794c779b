"""tinygrad UOps -> GLSL 4.50 compute shaders for Vulkan.

Layout of a rendered kernel (the ABI itself, shared with the runtime, is renderer/abi.py):
  - a global buffer is `layout(set=0, binding=<rank>) buffer` (readonly when the kernel never stores to it), or, past
    maxStorageBufferRange, a `buffer_reference` in the push constants with a macro that keeps the same array syntax;
  - one push-constant block: `_off[]`, the element offset of each buffer inside its binding (4 per word, one byte each:
    a descriptor offset must be a multiple of minStorageBufferOffsetAlignment, so a view is bound at the aligned-down byte
    offset and the remainder, always < 256 bytes, is added to every index), then the buffer addresses, then the scalar vars;
  - the local size is baked in (`layout(local_size_x=...)`); the runtime dispatches `global_size` workgroups;
  - a buffer view inside a kernel (BITCAST/SHRINK of a PARAM) reads an extra declaration aliasing the same binding;
  - coalesced (float4) loads/stores of a global buffer read a vecN declaration of the binding when the view's element offset
    keeps them aligned (specialization constant _a<slot>, one pipeline per alignment), and are packed from scalars otherwise;
  - bfloat16 is stored as uint16_t, computed in float, and converted with round-to-nearest-even bit math.
"""
from __future__ import annotations
import math, struct
from dataclasses import dataclass
from tinygrad.dtype import DType, dtypes, AddrSpace, truncate, float_to_bf16
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher
from tinygrad.renderer.cstyle import CStyleLanguage, base_rewrite
from tinygrad.device import CompileError
from tinygrad.helpers import strip_parens
from tinygrad_vk.caps import Caps, MAX_GROUPS_X, VEC_ALIGN, spirv_target
from tinygrad_vk.compiler import GLSLCompiler
from tinygrad_vk.renderer.kernel import (extra_matcher, check_kernel, plan_kernel, keeps_sin, supported_dtypes, dtname, kernel_name,
                                         UINT_OF_SIZE, multiple_of, is_view)
from tinygrad_vk.renderer.packing import packed_dtypes, word_array, read_modify_write

TYPES = {dtypes.bool: "bool", dtypes.char: "int8_t", dtypes.uchar: "uint8_t", dtypes.short: "int16_t", dtypes.ushort: "uint16_t",
         dtypes.int: "int", dtypes.uint: "uint", dtypes.long: "int64_t", dtypes.ulong: "uint64_t", dtypes.half: "float16_t",
         dtypes.float: "float", dtypes.double: "double",
         # bfloat16 lives in 16-bit words: every ALU op on it runs in float (create_non_native_float_pats), conversions are bit math
         dtypes.bfloat16: "uint16_t"}

VEC = {dtypes.bool: "bvec", dtypes.char: "i8vec", dtypes.uchar: "u8vec", dtypes.short: "i16vec", dtypes.ushort: "u16vec", dtypes.int: "ivec",
       dtypes.uint: "uvec", dtypes.long: "i64vec", dtypes.ulong: "u64vec", dtypes.half: "f16vec", dtypes.float: "vec", dtypes.double: "dvec",
       dtypes.bfloat16: "u16vec"}

# bytes of each GLSL element type a buffer is declared with (a buffer_reference's alignment and a 64-bit address's stride)
SIZE = {**{TYPES[d]: d.itemsize for d in TYPES}, **{f"{VEC[d]}{n}": n * d.itemsize for d in VEC for n in (2, 4)}}

def lit(dt:DType, v) -> str:
  """A GLSL literal of dtype dt (finite values)."""
  if dt == dtypes.bool: return "true" if v else "false"
  if dt == dtypes.double: return f"{float(v)!r}lf"
  if dt == dtypes.float: return f"{float(v)!r}"
  if dt == dtypes.half: return f"float16_t({float(v)!r})"
  if dt == dtypes.bfloat16: return f"uint16_t({struct.unpack('I', struct.pack('f', float_to_bf16(float(v))))[0] >> 16}u)"
  v = truncate[dt](v)
  if dt == dtypes.int: return "(-2147483647-1)" if v == -2**31 else str(v)
  if dt == dtypes.uint: return f"{v}u"
  if dt == dtypes.long: return "(-9223372036854775807l-1l)" if v == -2**63 else f"{v}l"
  if dt == dtypes.ulong: return f"{v}ul"
  return f"{TYPES[dt]}({v}{'u' if dt in dtypes.uints else ''})"

_BITCAST = {(dtypes.float, dtypes.int): "floatBitsToInt", (dtypes.float, dtypes.uint): "floatBitsToUint",
            (dtypes.int, dtypes.float): "intBitsToFloat", (dtypes.uint, dtypes.float): "uintBitsToFloat",
            (dtypes.half, dtypes.short): "float16BitsToInt16", (dtypes.half, dtypes.ushort): "float16BitsToUint16",
            (dtypes.short, dtypes.half): "int16BitsToFloat16", (dtypes.ushort, dtypes.half): "uint16BitsToFloat16",
            (dtypes.double, dtypes.long): "doubleBitsToInt64", (dtypes.double, dtypes.ulong): "doubleBitsToUint64",
            (dtypes.long, dtypes.double): "int64BitsToDouble", (dtypes.ulong, dtypes.double): "uint64BitsToDouble"}
def render_bitcast(to:DType, frm:DType, x:str) -> str:
  to, frm = (dtypes.ushort if d == dtypes.bfloat16 else d for d in (to, frm))
  if to == frm: return x
  if (fn := _BITCAST.get((frm, to))) is not None: return f"{fn}({x})"
  if to in dtypes.ints and frm in dtypes.ints: return f"{TYPES[to]}({x})"   # same width: GLSL integer conversions keep the bits
  raise CompileError(f"VULKAN: no GLSL bitcast from {frm} to {to}")

def render_cast(to:DType, frm:DType, x:str) -> str:
  if to == frm: return x
  if to == dtypes.bool: return f"({x}!={lit(frm, 0)})"           # C semantics: nonzero (NaN included) is true
  if frm == dtypes.bool: return f"({x}?{lit(to, 1)}:{lit(to, 0)})"
  return f"{TYPES[to]}({x})"

def _is_signed(dt:DType) -> bool: return dt in dtypes.sints
def guard(op:str, x:str, dt:DType) -> str:
  # GLSL leaves log2(x<=0) and sqrt(x<0) undefined; tinygrad wants IEEE: NaN below zero, -inf at zero
  nan, inf = f"{TYPES[dt]}(uintBitsToFloat(0x7fc00000u))", f"{TYPES[dt]}(uintBitsToFloat(0x7f800000u))"
  if op == "log2": return f"(({x})<{lit(dt, 0)}?{nan}:(({x})=={lit(dt, 0)}?-{inf}:log2({x})))"
  return f"(({x})<{lit(dt, 0)}?{nan}:sqrt({x}))"

def _buf_slot(b:UOp) -> int|None:
  bu = b.buf_uop
  return bu.arg.slot if bu.op is Ops.PARAM and bu.addrspace == AddrSpace.GLOBAL else None

def _int_idx(ctx:GLSLRenderer, idx:UOp, addr64=False) -> str:
  """An index as int, or as int64 for an access through a 64-bit address (see _addr64)."""
  i = strip_parens(ctx[idx]) if idx.arg is Ops.ADD else ctx[idx]
  if addr64: return i if idx.dtype == dtypes.long else f"int64_t({i})"
  return i if idx.dtype == dtypes.int else f"int({i})"

def _addr64(ctx:GLSLRenderer, slot:int|None, *idxs:UOp) -> bool: return slot is not None and ctx.plan.addr64(slot, *idxs)

# Buffer views inside a kernel: INDEX(BITCAST/SHRINK(...(PARAM))). GLSL has no pointer casts, so a view is read through an
# aliased declaration of the same binding (Vulkan lets several variables share a binding). Every byte offset in the chain is a
# multiple of the smallest element size w it involves, so the view is addressed in w-byte words: a view element of w bytes is
# one word of an alias of the view's own type, a wider one is put together from (or split into) k words of a w-byte uint alias.

@dataclass(frozen=True)
class ViewAccess:
  name: str       # the (alias) array
  word: str       # index of the first word
  k: int          # words per view element
  wdt: DType      # word dtype
  addr64: bool    # int64 index: the element address is computed in 64 bits (_addr64)
  def at(self, j:int=0) -> str:
    w = f"{self.word}+{j}" if j else self.word
    return f"{self.name}_at({w})" if self.addr64 else f"{self.name}[{w}]"

def view_access(ctx:GLSLRenderer, b:UOp, idx:UOp) -> ViewAccess:
  idxs, v = [(idx, b.dtype.itemsize)], b   # (element offset, element size) summed into bytes
  while v.op in (Ops.BITCAST, Ops.SHRINK, Ops.AFTER):
    if v.op is Ops.SHRINK: idxs.append((v.src[1], v.dtype.itemsize))
    v = v.src[0]
  if v.op is not Ops.PARAM or v.addrspace != AddrSpace.GLOBAL: raise CompileError(f"VULKAN: no GLSL for a buffer view of {v.op}")
  addr64 = _addr64(ctx, v.arg.slot, *(i for i, _ in idxs))
  terms = [(_int_idx(ctx, i, addr64), s) for i, s in idxs]
  if dtypes.bool in (b.dtype, v.dtype): raise CompileError("VULKAN: no GLSL for a bitcast view of a bool buffer")
  terms.append((f"int64_t(_o{v.arg.slot})" if addr64 else f"_o{v.arg.slot}", v.dtype.itemsize))
  w = min(s for _, s in terms)
  word = "+".join(t if s == w else f"({t})*{s//w}" for t, s in reversed(terms))
  k, wdt = b.dtype.itemsize // w, (b.dtype if b.dtype.itemsize == w else UINT_OF_SIZE[w])
  name = ctx[v] if wdt == v.dtype else f"{ctx[v]}_{dtname(wdt)}"
  if wdt != v.dtype: ctx.aliases.setdefault(v.arg.slot, {})[TYPES[wdt]] = name
  return ViewAccess(name, word, k, wdt, addr64)

def _elem(ctx:GLSLRenderer, b:UOp, idx:UOp, j:int=0) -> str:
  """Element idx+j of a buffer; a global one is offset by its view's _o."""
  slot = _buf_slot(b)
  if _addr64(ctx, slot, idx): return f"{ctx[b]}_at({_int_idx(ctx, idx, True)}+int64_t(_o{slot}{f'+{j}' if j else ''}))"
  i = _int_idx(ctx, idx)
  if j: i = f"{i}+{j}"
  return f"{ctx[b]}[{i}+_o{slot}]" if slot is not None else f"{ctx[b]}[{i}]"

def _word_array(ctx:GLSLRenderer, bidx:UOp) -> str|None:
  """The uint array of a word access of a buffer of 1/2-byte elements (packing.word_array): the buffer itself, or a uint alias."""
  if (w := word_array(ctx.caps, bidx)) is None: return None
  base, own = w
  return ctx[base] if own else ctx.aliases.setdefault(base.arg.slot, {}).setdefault("uint", f"{ctx[base]}_uint")

def render_index(ctx:GLSLRenderer, x:UOp, b:UOp, idx:UOp) -> str:
  if (words := _word_array(ctx, x)) is not None: return f"{words}[{_int_idx(ctx, idx)}]"
  if is_view(b):
    return view_access(ctx, b, idx).at()
  # a lane of a vector value (a coalesced load or a STACK), not a buffer element
  if b.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL, AddrSpace.REG): return f"({ctx[b]})[{_int_idx(ctx, idx)}]"
  return _elem(ctx, b, idx)

# Coalesced (float4) accesses: LOAD/STORE of SHRINK(buf, offset, n). When tinygrad's index is a multiple of n, a global buffer is
# read through a vecN declaration of the same binding, provided the view's element offset _o (known only at launch) is a multiple
# of n too. That is the specialization constant _a<slot> (the alignment of _o: 4, 2 or 1; constant_id = slot), so the driver folds
# the test when it builds the pipeline. Otherwise, and for local/register buffers, they are n scalar accesses packed into a vector.
def _vector_alias(ctx:GLSLRenderer, sh:UOp) -> tuple[str, str]|None:
  """(condition, vector element) for an aligned vector access of a global buffer, or None."""
  b, n = sh.src[0], sh.max_numel()
  if (slot := _buf_slot(b)) is None or b.op is not Ops.PARAM or n not in (2, 4) or b.dtype not in VEC or b.dtype == dtypes.bool: return None
  if multiple_of(sh.src[1]) % n or "vec" not in ctx.caps or _addr64(ctx, slot, sh.src[1]): return None
  name = ctx.aliases.setdefault(slot, {}).setdefault(f"{VEC[b.dtype]}{n}", f"{ctx[b]}_v{n}")
  return f"(_a{slot}>={n})", f"{name}[({_int_idx(ctx, sh.src[1])}+_o{slot})>>{n.bit_length()-1}]"

def _lanes(ctx:GLSLRenderer, sh:UOp) -> list[str]:
  if sh.src[0].op not in (Ops.PARAM, Ops.BUFFER, Ops.AFTER): raise CompileError(f"VULKAN: no GLSL for a vector access through {sh.src[0].op}")
  return [_elem(ctx, sh.src[0], sh.src[1], j) for j in range(sh.max_numel())]

def _wide_view(ctx:GLSLRenderer, bidx:UOp) -> ViewAccess|None:
  if bidx.op is not Ops.INDEX or not is_view(bidx.src[0]) or _word_array(ctx, bidx) is not None: return None
  return va if (va := view_access(ctx, bidx.src[0], bidx.src[1])).k > 1 else None

def render_load(ctx:GLSLRenderer, bidx:UOp) -> str:
  if bidx.op is Ops.SHRINK:
    packed = f"{ctx.render_type(bidx)}({', '.join(_lanes(ctx, bidx))})"
    return f"({cond}?{vec}:{packed})" if (va := _vector_alias(ctx, bidx)) is not None and (cond := va[0]) and (vec := va[1]) else packed
  if (va := _wide_view(ctx, bidx)) is not None:
    dt = bidx.dtype
    u = UINT_OF_SIZE[dt.itemsize]
    bits = "|".join(f"({TYPES[u]}({va.at(j)})<<{8*va.wdt.itemsize*j})" if j else f"{TYPES[u]}({va.at()})"
                    for j in range(va.k))
    return render_bitcast(dt, u, f"({bits})")
  # bool buffers hold bytes: read them as uint so that only 8-bit storage (not 8-bit arithmetic) is needed
  return f"(uint({ctx[bidx]})!=0u)" if bidx.dtype == dtypes.bool and _buf_slot(bidx) is not None else ctx[bidx]

def render_store(ctx:GLSLRenderer, bidx:UOp, v:UOp) -> str:
  if (rmw := read_modify_write(bidx, v)) is not None:
    keep, field = rmw
    return f"atomicAnd({ctx[bidx]}, {ctx[keep]});" + (f" atomicOr({ctx[bidx]}, {ctx[field]});" if field is not None else "")
  if bidx.op is Ops.SHRINK:
    packed = "".join(f" {l} = _v[{j}];" for j, l in enumerate(_lanes(ctx, bidx)))
    if (va := _vector_alias(ctx, bidx)) is not None: packed = f" if {va[0]} {va[1]} = _v; else {{{packed} }}"
    return f"{{ {ctx.render_type(v)} _v = {ctx[v]};{packed} }}"
  if (va := _wide_view(ctx, bidx)) is not None:
    dt = v.dtype
    u = UINT_OF_SIZE[dt.itemsize]
    return f"{{ {TYPES[u]} _t = {render_bitcast(u, dt, ctx[v])};" + \
      "".join(f" {va.at(j)} = {TYPES[va.wdt]}(_t>>{8*va.wdt.itemsize*j});" if j else f" {va.at()} = {TYPES[va.wdt]}(_t);"
              for j in range(va.k)) + " }"
  val = f"uint8_t({ctx[v]}?1u:0u)" if v.dtype == dtypes.bool and _buf_slot(bidx) is not None else ctx[v]
  return f"{ctx[bidx]} = {val};"

glsl_rewrite = PatternMatcher([
  (UPat.cvar("c").cast(dtypes.bfloat16, name="x"), lambda ctx,x,c: lit(x.dtype, c.val)),
  (UPat.cvar("c").cast(dtypes.floats, name="x"), lambda ctx,x,c: None if math.isfinite(c.val) else
    f"{TYPES[x.dtype]}({'' if c.val > 0 or math.isnan(c.val) else '-'}uintBitsToFloat({'0x7fc00000u' if math.isnan(c.val) else '0x7f800000u'}))"),
  (UPat.cvar("c").cast(name="x"), lambda ctx,x,c: lit(x.dtype, c.val) if x.dtype in TYPES else None),
  (UPat(Ops.CAST, name="x"), lambda ctx,x: render_cast(x.dtype, x.src[0].dtype, ctx[x.src[0]]) if x.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL)
   else None),
  (UPat(Ops.BITCAST, name="x"), lambda ctx,x: render_bitcast(x.dtype, x.src[0].dtype, ctx[x.src[0]])
   if x.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None),
  # views are always inlined into the INDEX that uses them, which renders the whole chain (view_access, or a word access)
  # a vector access (LOAD/STORE of SHRINK) is rendered by the LOAD/STORE itself
  (UPat((Ops.BITCAST, Ops.SHRINK), name="x"),
   lambda ctx,x: "" if x.op is Ops.SHRINK or x.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None),
  (UPat(Ops.BUFFER, name="x"), lambda ctx,x: f"shared uint {ctx[x]}[{x.max_numel() * x.dtype.itemsize // 4}];"
   if x.addrspace == AddrSpace.LOCAL and x.dtype in packed_dtypes(ctx.caps) else
   f"{'shared ' if x.addrspace == AddrSpace.LOCAL else ''}{TYPES[x.dtype]} {ctx[x]}[{x.max_numel()}];"),
  (UPat(Ops.INDEX, src=(UPat.var("b"), UPat.var("idx")), name="x"), render_index),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"), UPat.var("alt"), UPat.var("gate"))),
   lambda ctx,bidx,alt,gate: f"({ctx[gate]}?{render_load(ctx, bidx)}:{ctx[alt]})"),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"),)), render_load),
  (UPat(Ops.STORE, src=(UPat.var("bidx"), UPat.var("v"))), render_store),
]) + base_rewrite

def _bool_op(sym:str, bsym:str):
  return lambda a,b,dtype: f"({a}{bsym}{b})" if dtype == dtypes.bool else f"({a}{sym}{b})"

class GLSLRenderer(CStyleLanguage):
  float4, float4_style = "float4", ("(", ")")   # STACK renders as vecN(a, b, ...): render_type gives vecN
  has_local, has_shared = True, True
  barrier = "barrier();"   # glslang emits OpControlBarrier with WorkgroupMemory semantics: enough for shared memory
  code_for_workitem = {"g": lambda x: f"int(gl_WorkGroupID.{'xyz'[int(x)]})", "l": lambda x: f"int(gl_LocalInvocationID.{'xyz'[int(x)]})"}
  type_map = TYPES
  infinity, nan = "uintBitsToFloat(0x7f800000u)", "uintBitsToFloat(0x7fc00000u)"
  # SIN is left out on purpose: Vulkan only bounds its error inside [-pi, pi], so tinygrad's decomposition is used instead
  code_for_op = {
    Ops.SQRT: lambda x,dtype: guard("sqrt", x, dtype), Ops.LOG2: lambda x,dtype: guard("log2", x, dtype),
    Ops.EXP2: lambda x,dtype: f"exp2({x})", Ops.TRUNC: lambda x,dtype: f"trunc({x})",
    Ops.RECIPROCAL: lambda x,dtype: f"({lit(dtype, 1)}/{x})", Ops.NEG: lambda x,dtype: f"(!{x})" if dtype == dtypes.bool else f"(-{x})",
    Ops.AND: _bool_op("&", "&&"), Ops.OR: _bool_op("|", "||"), Ops.XOR: _bool_op("^", "^^"),
    Ops.ADD: _bool_op("+", "||"), Ops.MUL: _bool_op("*", "&&"), Ops.SUB: lambda a,b,dtype: f"({a}-{b})",
    Ops.FDIV: lambda a,b,dtype: f"({a}/{b})", Ops.CDIV: lambda a,b,dtype: f"({a}/{b})",
    # C truncating remainder: GLSL's % on signed ints is OpSMod (sign of the divisor)
    Ops.CMOD: lambda a,b,dtype: f"({a}-{b}*({a}/{b}))" if _is_signed(dtype) else f"({a}-{b}*trunc({a}/{b}))" if dtypes.is_float(dtype)
      else f"({a}%{b})",
    Ops.CMPNE: lambda a,b,dtype: f"({a}!={b})", Ops.CMPEQ: lambda a,b,dtype: f"({a}=={b})", Ops.CMPLT: lambda a,b,dtype: f"({a}<{b})",
    Ops.SHR: lambda a,b,dtype: f"({a}>>{b})", Ops.SHL: lambda a,b,dtype: f"({a}<<{b})",
    Ops.WHERE: lambda a,b,c,dtype: f"({a}?{b}:{c})"}
  string_rewrite = glsl_rewrite

  def __init__(self, target):
    super().__init__(target)
    self.caps = Caps.decode(target.arch)
    self.global_max = (MAX_GROUPS_X, *self.caps.wgcount[1:])
    self.local_max, self.shared_max = self.caps.wgsize, self.caps.smem
    self.supports_float4 = "vec" in self.caps
    self.extra_matcher = extra_matcher(self.caps)
    # SIN is kept through tinygrad's decompositions where its sin needs 64-bit integers: sin32.py lowers it (check_kernel checks)
    if keeps_sin(self.caps): self.code_for_op = {**self.code_for_op, Ops.SIN: lambda x,dtype: ""}
    self.compiler = GLSLCompiler(tuple(w for w in (16, 32, 64) if f"nan{w}" in self.caps), spirv_target(self.caps))

  def _render_dtype(self, dtype:DType, sz:int=1, addrspace=AddrSpace.ALU, mutable=True, override_ptr=False, shape=None) -> str:
    if dtype not in TYPES: raise CompileError(f"VULKAN: no GLSL type for {dtype}")
    if sz == 1: return TYPES[dtype]
    if sz > 4: raise CompileError(f"VULKAN: GLSL has no vector of {sz} {dtname(dtype)}")
    return f"{VEC[dtype]}{sz}"

  def render(self, uops:list[UOp]) -> str:
    check_kernel(self.caps, uops, kernel_name(uops))
    self.aliases: dict[int, dict[str, str]] = {}   # slot -> {GLSL element type: alias name}: other declarations of the binding
    self.plan = plan_kernel(self.caps, uops)
    return super().render(uops)

  def supported_dtypes(self) -> set[DType]: return supported_dtypes(self.caps)

  def render_kernel(self, function_name:str, kernel:list[str], bufs:list[tuple[str, tuple[UOp, bool]]], uops:list[UOp], prefix=None) -> str:
    local = [1, 1, 1]
    for u in uops:
      if u.op is Ops.SPECIAL and u.arg[0] == "l": local[int(u.arg[-1])] = int(u.src[0].ssimplify())
    shared = [l.strip() for l in kernel if l.lstrip().startswith("shared ")]
    body = [l for l in kernel if not l.lstrip().startswith("shared ")]
    names = {u: name for name, (u, _) in bufs}
    plan, aliases = self.plan, self.aliases
    pc = [(0, f"uint _off[{plan.nwords}];")] if plan.bufs else []   # (offset, member): members are declared in offset order
    pc += [(off, f"layout(offset={off}) {TYPES[u.dtype]} {names[u]};") for u, off in plan.vars]
    exts = ["GL_EXT_shader_explicit_arithmetic_types", "GL_EXT_shader_8bit_storage", "GL_EXT_shader_16bit_storage"]
    lines = ["#version 450", f"// kernel: {function_name}", *(f"#extension {e} : require" for e in exts + (["GL_EXT_buffer_reference"]
             if any(b.address is not None for b in plan.bufs.values()) else [])),
             f"layout(local_size_x={local[0]}, local_size_y={local[1]}, local_size_z={local[2]}) in;"]
    defines = []
    for slot, b in sorted(plan.bufs.items()):
      name = names[b.uop]
      ro, views = "" if b.writable else "readonly ", {TYPES[b.dtype]: name, **aliases.get(slot, {})}
      if (off := b.address) is None:
        lines += [f"layout(set=0, binding={b.binding}, std430) {ro}buffer {n}_B {{ {t} {n}[]; }};" for t, n in views.items()]
        continue
      # passed by address: a buffer_reference type per view of it, and a macro that keeps the array syntax of the descriptor path
      pc.append((off, f"layout(offset={off}) {name}_R _p{slot};"))
      for t, n in views.items():
        lines.append(f"layout(buffer_reference, std430, buffer_reference_align={SIZE[t]}) {ro}buffer {n}_R {{ {t} v[]; }};")
        defines.append(f"#define {n} {f'_p{slot}' if n == name else f'{n}_R(_p{slot})'}.v")
        if "i64" in self.caps: defines.append(f"#define {n}_at(i) {n}_R(uint64_t(_p{slot})+uint64_t(i)*{SIZE[t]}ul).v[0]")
    if pc: lines.append("layout(push_constant, std430) uniform PC { " + " ".join(m for _, m in sorted(pc)) + " };")
    lines += defines + [f"layout(constant_id={slot}) const int _a{slot} = {VEC_ALIGN};" for slot in sorted(plan.bufs) if aliases.get(slot)]
    lines += shared + ["void main() {"] + [f"  int _o{s} = int((_off[{s//4}] >> {8*(s%4)}u) & 255u);" for s in sorted(plan.bufs)] + body + ["}"]
    return "\n".join(lines)
