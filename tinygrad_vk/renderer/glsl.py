"""tinygrad UOps -> GLSL 4.50 compute shaders, compiled by glslang: the reference the SPIR-V renderer is tested against. What a
kernel declares and how it indexes is the plan's (plan.py) and the ABI's (abi.py). GLSL has no pointer casts: a view or a vecN
access of a buffer reads another declaration aliasing its binding, and a buffer passed by address is a buffer_reference behind a
macro that keeps the array syntax. bfloat16 is stored as uint16_t and computed in float.
"""
from __future__ import annotations
import math, struct
from typing import cast
from tinygrad.dtype import DType, dtypes, AddrSpace, truncate, float_to_bf16
from tinygrad.uop.ops import Ops, UOp, UPat, PatternMatcher
from tinygrad.renderer.cstyle import CStyleLanguage, base_rewrite
from tinygrad.device import CompileError
from tinygrad.helpers import strip_parens, prod
from tinygrad_vk.caps import VEC_ALIGN, spirv_target
from tinygrad_vk.compiler import GLSLCompiler
from tinygrad_vk.renderer.kernel import VulkanRenderer
from tinygrad_vk.renderer.plan import Access, Buf, OFFSET, UINT_OF_SIZE
from tinygrad_vk.renderer.passes.packing import packed_dtypes, read_modify_write
from tinygrad_vk.renderer.views import MEMORY
from tinygrad_vk.renderer.passes.half import held
from tinygrad_vk.renderer.coopmat import Wmma

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

def select(c:str, t:str, f:str) -> str:
  """c ? t : f for values, as mix() with a bool selector: one OpSelect, where glslang makes a ?: a branch and a Function variable,
  slow for drivers to build. Never for a gated load: only ?: keeps the load from running."""
  return f"mix({f},{t},{c})"

def render_cast(to:DType, frm:DType, x:str) -> str:
  if to == frm: return x
  if to == dtypes.bool: return f"({x}!={lit(frm, 0)})"           # C semantics: nonzero (NaN included) is true
  if frm == dtypes.bool: return select(x, lit(to, 1), lit(to, 0))
  return f"{TYPES[to]}({x})"

def offset(word:int, shift:int, mask:int|None) -> str: return f"_off[{word}]" if mask is None else f"(_off[{word}] >> {shift}u) & {mask}u"

def guard(op:str, x:str, dt:DType) -> str:
  # GLSL leaves log2(x<=0) and sqrt(x<0) undefined, and NaN is outside every domain; tinygrad wants IEEE: NaN below zero and for
  # NaN (!(x>=0) is both), -inf at zero
  nan, inf = f"{TYPES[dt]}(uintBitsToFloat(0x7fc00000u))", f"{TYPES[dt]}(uintBitsToFloat(0x7f800000u))"
  if op == "log2": return select(f"!(({x})>={lit(dt, 0)})", nan, select(f"({x})=={lit(dt, 0)}", f"-{inf}", f"log2({x})"))
  return select(f"!(({x})>={lit(dt, 0)})", nan, f"sqrt({x})")

def _int_idx(ctx:GLSLRenderer, idx:UOp, addr64=False) -> str:
  """An index as int, or as int64 for an access through a 64-bit address (Access.addr64)."""
  i = strip_parens(ctx[idx]) if idx.arg is Ops.ADD else ctx[idx]
  if addr64: return i if idx.dtype == dtypes.long else f"int64_t({i})"
  return i if idx.dtype == dtypes.int else f"int({i})"

# memory accesses as the plan decides them (kernel.Access); another declaration of a buffer's memory is an alias of its binding
def _name(ctx:GLSLRenderer, a:Access) -> str:
  if ctx.plan.own(a): return ctx[a.base]
  t = f"{VEC[a.dtype]}{a.vec}" if a.vec > 1 else TYPES[a.dtype]
  return ctx.aliases.setdefault(cast(int, a.slot), {}).setdefault(t, f"{ctx[a.base]}_{t}")   # a slotless access is its own

def _index(ctx:GLSLRenderer, a:Access, j:int) -> str:
  def term(t:UOp|None, s:int) -> str:
    v = (f"int64_t(_o{a.slot})" if a.addr64 else f"_o{a.slot}") if t is OFFSET else _int_idx(ctx, t, a.addr64)
    return v if s == 1 else f"({v})*{s}"
  i = "+".join(term(t, s) for t, s in a.terms) + (f"+{a.add + j}" if a.add + j else "")
  return f"({i})>>{a.shift}" if a.shift else i

def at(ctx:GLSLRenderer, a:Access, j:int=0, w:int|None=None) -> str:
  """Element j of the access (one of its k words). Of a split slot (spv.KernelMeta.split): in window w, or as a value, each
  window's element at the index clamped into it, the window the index falls in selected."""
  i = _index(ctx, a, j)
  if a.slot is not None and (t := ctx.plan.bufs[a.slot].texel):   # a texel, or the lane of one (component i&3 of texel i>>2)
    if a.vec > 1: return f"{VEC[a.dtype]}4({'uintBitsToFloat' if dtypes.is_float(a.dtype) else ''}(imageLoad({ctx[a.base]}, {i})))"
    return render_bitcast(a.dtype, dtypes.uint, f"imageLoad({ctx[a.base]}, {i}).x" if t == 1 else f"imageLoad({ctx[a.base]}, ({i})>>2)[({i})&3]")
  if a.addr64: return f"{_name(ctx, a)}_at({i})"
  if a.wins is None: return f"{_name(ctx, a)}[{i}]"
  k, n, _ = a.wins
  if w is not None: return f"{_name(ctx, a)}_w{w}[({i})-{w*n}]"
  def win(w:int) -> str: return f"{_name(ctx, a)}_w{w}[clamp(({i})-{w*n}, 0, {_name(ctx, a)}_w{w}.length()-1)]"
  sel = win(k - 1)
  for w in reversed(range(k - 1)): sel = f"((({i})<{(w+1)*n})?{win(w)}:{sel})"
  return sel

def in_window(ctx:GLSLRenderer, a:Access, j:int, stmt) -> str:
  """stmt(lvalue) for element j of the access: of a split slot, in the window its index falls in."""
  if a.wins is None: return stmt(at(ctx, a, j))
  k, n, _ = a.wins
  i = _index(ctx, a, j)
  out = stmt(at(ctx, a, j, k - 1))
  for w in reversed(range(k - 1)): out = f"if (({i})<{(w+1)*n}) {{ {stmt(at(ctx, a, j, w))} }} else {{ {out} }}"
  return out

def _read(ctx:GLSLRenderer, a:Access, dt:DType) -> str:
  if a.k > 1:   # a view element of k words, little end first
    u = TYPES[UINT_OF_SIZE[dt.itemsize]]
    return render_bitcast(dt, UINT_OF_SIZE[dt.itemsize],
                          "(" + "|".join(f"({u}({at(ctx, a, j)})<<{8*a.dtype.itemsize*j})" if j else f"{u}({at(ctx, a)})" for j in range(a.k)) + ")")
  # bool buffers hold bytes: read them as uint so that only 8-bit storage (not 8-bit arithmetic) is needed
  return f"(uint({at(ctx, a)})!=0u)" if dt == dtypes.bool and a.dtype != dt else at(ctx, a)

def _write(ctx:GLSLRenderer, a:Access, dt:DType, v:str) -> str:
  if a.k > 1:
    u = UINT_OF_SIZE[dt.itemsize]
    return f"{{ {TYPES[u]} _t = {render_bitcast(u, dt, v)};" + "".join(
      " " + in_window(ctx, a, j, lambda lv, j=j: f"{lv} = {TYPES[a.dtype]}(_t{f'>>{8*a.dtype.itemsize*j}' if j else ''});")
      for j in range(a.k)) + " }"
  if dt == dtypes.bool and a.dtype != dt: v = f"uint8_t({select(v, '1u', '0u')})"
  return in_window(ctx, a, 0, lambda lv: f"{lv} = {v};")

def render_index(ctx:GLSLRenderer, x:UOp, b:UOp, idx:UOp) -> str:
  # a lane of a vector value (a coalesced load or a STACK), not a buffer element
  if b.addrspace not in MEMORY: return f"({ctx[b]})[{_int_idx(ctx, idx)}]"
  return at(ctx, ctx.plan.access(x))

def render_load(ctx:GLSLRenderer, bidx:UOp) -> str:
  if bidx.op is Ops.SHRINK:
    vec, lanes = ctx.plan.vector(bidx)
    packed = f"{ctx.render_type(bidx)}({', '.join(_read(ctx, l, bidx.dtype) for l in lanes)})"
    # both read, one selected (a ?: would be a branch: see select; the vecN read is in bounds either way)
    return packed if vec is None else f"mix({packed},{at(ctx, vec)},bvec{len(lanes)}(_a{vec.slot}>={vec.vec}))"
  return _read(ctx, ctx.plan.access(bidx), bidx.dtype) if bidx.src[0].addrspace in MEMORY else ctx[bidx]

def render_store(ctx:GLSLRenderer, bidx:UOp, v:UOp) -> str:
  if (rmw := read_modify_write(bidx, v)) is not None:
    keep, field = rmw
    return in_window(ctx, ctx.plan.access(bidx), 0,
                     lambda lv: f"atomicAnd({lv}, {ctx[keep]});" + (f" atomicOr({lv}, {ctx[field]});" if field is not None else ""))
  if bidx.op is Ops.SHRINK:
    vec, lanes = ctx.plan.vector(bidx)
    packed = "".join(" " + _write(ctx, l, v.dtype, f"_v[{j}]") for j, l in enumerate(lanes))
    if vec is not None: packed = f" if (_a{vec.slot}>={vec.vec}) {{ {in_window(ctx, vec, 0, lambda lv: f'{lv} = _v;')} }} else {{{packed} }}"
    return f"{{ {ctx.render_type(v)} _v = {ctx[v]};{packed} }}"
  return _write(ctx, ctx.plan.access(bidx), v.dtype, ctx[v])

glsl_rewrite = PatternMatcher([
  (UPat.cvar("c").cast(dtypes.bfloat16, name="x"), lambda ctx,x,c: lit(x.dtype, c.val)),
  (UPat.cvar("c").cast(dtypes.floats, name="x"), lambda ctx,x,c: None if math.isfinite(c.val) else
    f"{TYPES[x.dtype]}({'' if c.val > 0 or math.isnan(c.val) else '-'}uintBitsToFloat({'0x7fc00000u' if math.isnan(c.val) else '0x7f800000u'}))"),
  (UPat.cvar("c").cast(name="x"), lambda ctx,x,c: lit(x.dtype, c.val) if x.dtype in TYPES else None),
  (UPat(Ops.CAST, name="x"), lambda ctx,x: render_cast(held(ctx.caps, x.dtype), held(ctx.caps, x.src[0].dtype), ctx[x.src[0]])
   if x.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None),
  (UPat(Ops.BITCAST, name="x"), lambda ctx,x: render_bitcast(x.dtype, x.src[0].dtype, ctx[x.src[0]])
   if x.addrspace not in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None),
  # a view is rendered by the INDEX that uses it (the plan reads the whole chain), a vector access (SHRINK) by its LOAD/STORE
  (UPat((Ops.BITCAST, Ops.SHRINK), name="x"),
   lambda ctx,x: "" if x.op is Ops.SHRINK or x.addrspace in (AddrSpace.GLOBAL, AddrSpace.LOCAL) else None),
  (UPat(Ops.BUFFER, name="x"), lambda ctx,x: f"shared uint {ctx[x]}[{x.max_numel() * x.dtype.itemsize // 4}];"
   if x.addrspace == AddrSpace.LOCAL and x.dtype in packed_dtypes(ctx.caps) else
   f"{'shared ' if x.addrspace == AddrSpace.LOCAL else ''}{TYPES[held(ctx.caps, x.dtype)]} {ctx[x]}[{x.max_numel()}];"),
  (UPat(Ops.INDEX, src=(UPat.var("b"), UPat.var("idx")), name="x"), render_index),
  (UPat(Ops.WMMA, name="x"), lambda ctx,x: f"__WMMA_{Wmma.of(x).name}({', '.join(ctx[s] for s in x.src)})"),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"), UPat.var("alt"), UPat.var("gate"))),
   lambda ctx,bidx,alt,gate: f"({ctx[gate]}?{render_load(ctx, bidx)}:{ctx[alt]})"),
  (UPat(Ops.LOAD, src=(UPat.var("bidx"),)), render_load),
  (UPat(Ops.STORE, src=(UPat.var("bidx"), UPat.var("v"))), render_store),
]) + base_rewrite

def wmma_function(w:Wmma, invocations:int) -> list[str]:
  """A WMMA through workgroup memory (coopmat.py): the thread's fragments into its subgroup's tiles, D = A*B + C on cooperative
  matrices, its fragment of D back."""
  (a, b, c), ti, to, n = w.sizes(), TYPES[w.din], TYPES[w.dout], w.name
  fa, fb, fc = a // w.S, b // w.S, c // w.S
  sync = "controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);"
  def mat(t:str, rows:int, cols:int, use:str) -> str: return f"coopmat<{t}, gl_ScopeSubgroup, {rows}, {cols}, gl_MatrixUse{use}>"
  def layout(colmajor:bool) -> str: return f"gl_CooperativeMatrixLayout{'ColumnMajor' if colmajor else 'RowMajor'}"
  g = invocations // w.S
  return [f"shared {ti} _tA_{n}[{g*a}]; shared {ti} _tB_{n}[{g*b}]; shared {to} _tC_{n}[{g*c}];",
    f"{to}[{fc}] __WMMA_{n}({ti} a[{fa}], {ti} b[{fb}], {to} c[{fc}]) {{",
    f"  uint t = gl_LocalInvocationIndex / {w.S}u, l = gl_LocalInvocationIndex % {w.S}u;",
    f"  for (uint e = 0u; e < {fa}u; e++) _tA_{n}[t*{a}u + l*{fa}u + e] = a[e];",
    f"  for (uint e = 0u; e < {fb}u; e++) _tB_{n}[t*{b}u + l*{fb}u + e] = b[e];",
    f"  for (uint e = 0u; e < {fc}u; e++) _tC_{n}[t*{c}u + l*{fc}u + e] = c[e];",
    f"  {sync}",
    *(f"  {mat(ty, r, c, use)} m{k}; coopMatLoad(m{k}, _t{k}_{n}, t*{size}u, {stride}u, {layout(colmajor)});" for k, ty, use, size,
      (r, c, colmajor, stride) in zip("ABC", (ti, ti, to), ("A", "B", "Accumulator"), (a, b, c), w.tiles())),
    f"  coopMatStore(coopMatMulAdd(mA, mB, mC), _tC_{n}, t*{c}u, {w.N}u, {layout(False)});",
    f"  {sync}",
    f"  {to} d[{fc}]; for (uint e = 0u; e < {fc}u; e++) d[e] = _tC_{n}[t*{c}u + l*{fc}u + e];",
    "  return d;", "}"]

def _bool_op(sym:str, bsym:str):
  return lambda a,b,dtype: f"({a}{bsym}{b})" if dtype == dtypes.bool else f"({a}{sym}{b})"

class GLSLRenderer(VulkanRenderer, CStyleLanguage):
  float4, float4_style = "float4", ("(", ")")   # STACK renders as vecN(a, b, ...): render_type gives vecN
  barrier = "barrier();"   # glslang emits OpControlBarrier with WorkgroupMemory semantics: enough for shared memory
  code_for_workitem = {"g": lambda x: f"int(gl_WorkGroupID.{'xyz'[int(x)]})", "l": lambda x: f"int(gl_LocalInvocationID.{'xyz'[int(x)]})"}
  type_map = TYPES
  infinity, nan = "uintBitsToFloat(0x7f800000u)", "uintBitsToFloat(0x7fc00000u)"
  code_for_op = {   # kernel.NATIVE_OPS
    Ops.SQRT: lambda x,dtype: guard("sqrt", x, dtype), Ops.LOG2: lambda x,dtype: guard("log2", x, dtype),
    Ops.TRUNC: lambda x,dtype: f"trunc({x})",
    Ops.RECIPROCAL: lambda x,dtype: f"({lit(dtype, 1)}/{x})", Ops.NEG: lambda x,dtype: f"(!{x})" if dtype == dtypes.bool else f"(-{x})",
    Ops.AND: _bool_op("&", "&&"), Ops.OR: _bool_op("|", "||"), Ops.XOR: _bool_op("^", "^^"),
    Ops.ADD: _bool_op("+", "||"), Ops.MUL: _bool_op("*", "&&"), Ops.SUB: lambda a,b,dtype: f"({a}-{b})",
    Ops.FDIV: lambda a,b,dtype: f"({a}/{b})", Ops.CDIV: lambda a,b,dtype: f"({a}/{b})",
    # C truncating remainder: GLSL's % on signed ints is OpSMod (sign of the divisor)
    Ops.CMOD: lambda a,b,dtype: f"({a}-{b}*({a}/{b}))" if dtype in dtypes.sints else f"({a}-{b}*trunc({a}/{b}))" if dtypes.is_float(dtype)
      else f"({a}%{b})",
    Ops.CMPNE: lambda a,b,dtype: f"({a}!={b})", Ops.CMPEQ: lambda a,b,dtype: f"({a}=={b})", Ops.CMPLT: lambda a,b,dtype: f"({a}<{b})",
    Ops.SHR: lambda a,b,dtype: f"({a}>>{b})", Ops.SHL: lambda a,b,dtype: f"({a}<<{b})",
    Ops.WHERE: lambda a,b,c,dtype: select(a, b, c)}
  string_rewrite = glsl_rewrite
  def __init__(self, target):
    super().__init__(target)
    self.compiler = GLSLCompiler(tuple(w for w in (16, 32, 64) if f"nan{w}" in self.caps), spirv_target(self.caps))
  def _render_dtype(self, dtype:DType, sz:int=1, addrspace=AddrSpace.ALU, mutable=True, override_ptr=False, shape=None) -> str:
    if (dtype := held(self.caps, dtype)) not in TYPES: raise CompileError(f"VULKAN: no GLSL type for {dtype}")
    if sz == 1: return TYPES[dtype]
    if sz > 4: return f"{TYPES[dtype]}[{sz}]"   # a tensor core's fragment (GLSL's vectors stop at 4)
    return f"{VEC[dtype]}{sz}"
  def render(self, uops:list[UOp]) -> str:
    self.aliases: dict[int, dict[str, str]] = {}   # slot -> {GLSL element type: alias name}: other declarations of the binding
    self.plan = self.kernel_plan(uops)
    g = GLSLRenderer.code_for_workitem["g"]   # gidx0 past maxComputeWorkGroupCount[0] adds _xbase (abi.py XBASE)
    self.code_for_workitem = {**GLSLRenderer.code_for_workitem, "g": (lambda x: f"({g(x)}+_xbase)" if x == "0" else g(x))
                              if self.plan.abi.xbase is not None else g}
    return super().render(uops)
  def render_kernel(self, function_name:str, kernel:list[str], bufs:list[tuple[str, tuple[UOp, bool]]], uops:list[UOp], prefix=None) -> str:
    shared = [l.strip() for l in kernel if l.lstrip().startswith("shared ")]
    body = [l for l in kernel if not l.lstrip().startswith("shared ")]
    names = {u: name for name, (u, _) in bufs}
    plan, aliases = self.plan, self.aliases
    def member(off:int, key:str, dt:DType, n:int, what) -> str:
      if key == "off": return f"uint _off[{n}];"
      ty, name = (f"{names[what.uop]}_R", f"_{key}") if isinstance(what, Buf) else (TYPES[dt], names[what] if what is not None else f"_{key}")
      return f"layout(offset={off}) {ty} {name}{f'[{n}]' if n else ''};"
    pc = [member(*m) for m in plan.push_constants()]
    exts = ["GL_EXT_shader_explicit_arithmetic_types", "GL_EXT_shader_8bit_storage", "GL_EXT_shader_16bit_storage"]
    if any(b.address is not None for b in plan.bufs.values()): exts.append("GL_EXT_buffer_reference")
    wmmas = sorted({Wmma.of(u) for u in uops if u.op is Ops.WMMA}, key=lambda w: w.name)
    if wmmas: exts += ["GL_KHR_cooperative_matrix", "GL_KHR_memory_scope_semantics"]
    lines = ["#version 450", f"// kernel: {function_name}", *(f"// {n}" for n in plan.meta.encode()), *(f"#extension {e} : require" for e in exts),
             "layout(local_size_x={}, local_size_y={}, local_size_z={}) in;".format(*plan.local)]
    defines = []
    for slot, b in sorted(plan.bufs.items()):
      name = names[b.uop]
      ro, views = "" if b.writable else "readonly ", {TYPES[b.dtype]: name, **aliases.get(slot, {})}
      if b.address is None:
        if b.texel:
          lines.append(f"layout(set=0, binding={b.binding}, {'r32ui' if b.texel == 1 else 'rgba32ui'}) uniform readonly uimageBuffer {name};")
        elif (sp := plan.meta.split.get(slot)) is not None:   # a split slot: its windows (spv.KernelMeta.split)
          lines += [f"layout(set=0, binding={sp[2] + w}, std430) {ro}buffer {n}_w{w}_B {{ {t} {n}_w{w}[]; }};" for t, n in views.items()
                    for w in range(sp[0])]
        else: lines += [f"layout(set=0, binding={b.binding}, std430) {ro}buffer {n}_B {{ {t} {n}[]; }};" for t, n in views.items()]
        continue
      # passed by address: a buffer_reference type per view of it, and a macro that keeps the array syntax of the descriptor path
      for t, n in views.items():
        lines.append(f"layout(buffer_reference, std430, buffer_reference_align={SIZE[t]}) {ro}buffer {n}_R {{ {t} v[]; }};")
        defines.append(f"#define {n} {f'_p{slot}' if n == name else f'{n}_R(_p{slot})'}.v")
        if "i64" in self.caps: defines.append(f"#define {n}_at(i) {n}_R(uint64_t(_p{slot})+uint64_t(i)*{SIZE[t]}ul).v[0]")
    if pc: lines.append("layout(push_constant, std430) uniform PC { " + " ".join(pc) + " };")
    lines += defines + [f"layout(constant_id={slot}) const int _a{slot} = {VEC_ALIGN};" for slot, b in sorted(plan.bufs.items())
                        if aliases.get(slot) or b.texel == 4]
    lines += shared + [l for w in wmmas for l in wmma_function(w, prod(plan.local))] + ["void main() {"] + \
      [f"  int _o{s} = int({offset(*plan.abi.off_word(s))});" for s in sorted(plan.bufs)] + body + ["}"]
    return "\n".join(lines)
