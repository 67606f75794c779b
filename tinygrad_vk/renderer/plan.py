"""The plan of a kernel, the one place both renderers (GLSL and SPIR-V) read it from, so that they agree with each other and
with the runtime: each buffer's and scalar's declaration under the ABI (abi.py, which the runtime packs), the push-constant
block, and per memory access (`KernelPlan.access`, `.vector`) the declaration it goes through and its index: views, 8/16-bit
words, vector aliases, split windows, 64-bit addresses. A renderer writes what the plan says in its syntax."""
from __future__ import annotations
from typing import Iterator, cast
from dataclasses import dataclass, replace
from tinygrad.dtype import DType, dtypes, AddrSpace
from tinygrad.uop.ops import Ops, UOp
from tinygrad.device import CompileError
from tinygrad.helpers import ceildiv
from tinygrad_vk.caps import Caps
from tinygrad_vk.spv import KernelMeta
from tinygrad_vk.renderer.abi import KernelABI, kernel_abi, numel, pieced
from tinygrad_vk.renderer.reach import slot_reach
from tinygrad_vk.renderer.views import chain, is_view, multiple_of
from tinygrad_vk.renderer.passes.packing import packed_dtypes, word_array, var_in_words

UINT_OF_SIZE = {1: dtypes.uchar, 2: dtypes.ushort, 4: dtypes.uint, 8: dtypes.ulong}

def kernel_name(uops:list[UOp]) -> str:
  return uops[-1].arg.function_name if uops and uops[-1].op is Ops.SINK and uops[-1].arg is not None else "test"

def local_size(uops:list[UOp]) -> tuple[int, int, int]:
  """The workgroup size baked into the shader: tinygrad's local dimensions."""
  local = [1, 1, 1]
  for u in uops:
    if u.op is Ops.SPECIAL and u.arg[0] == "l": local[int(u.arg[-1])] = int(cast(int, u.src[0].ssimplify()))   # local sizes are constants
  return (local[0], local[1], local[2])

@dataclass(frozen=True)
class Buf:
  """A global buffer parameter as the kernel declares it."""
  uop: UOp
  dtype: DType          # its element type in the shader: uint when packed in words (packing.py), uchar for bool, else its own
  binding: int|None     # descriptor binding, or None when passed by address
  address: int|None     # push-constant byte offset of its address
  writable: bool        # some STORE writes it (else readonly: the runtime needs no write hazard)
  texel: int = 0        # read through a storage texel buffer of 32-bit words, this many a texel: 1 (R32_UINT) or 4 (texel_slots)

OFFSET = None   # an Access term that is the view offset _o<slot>: the element offset of the view inside its binding (abi.py)

@dataclass(frozen=True)
class Access:
  """One access of a kernel's memory, as every renderer writes it: element `index` of a declaration of `base`'s memory whose
  elements are `dtype` (vecN of it where vec > 1), index = (sum of term * scale, + add) >> shift. The index is int32, or int64
  where `addr64`: the element's address is then computed in 64 bits (base address + index * element size, abi.py). A value
  of the access spans `k` consecutive elements, little end first (a view element wider than the words it is made of).
  A global buffer's declarations: its own (`Buf.dtype`, vec 1), and others of the same binding (or address) for views,
  uint words and aligned vecN accesses. A LOCAL or REG buffer has only its own."""
  base: UOp                                  # the PARAM (global) or BUFFER (LOCAL, REG)
  dtype: DType
  terms: tuple[tuple[UOp|None, int], ...]    # (index UOp, or OFFSET; scale)
  add: int = 0
  vec: int = 1
  shift: int = 0
  k: int = 1
  addr64: bool = False
  wins: tuple[int, int, int]|None = None     # a split slot (KernelMeta.split): (windows, elements per window, first binding)
  @property
  def slot(self) -> int|None: return self.base.arg.slot if self.base.op is Ops.PARAM else None

@dataclass(frozen=True)
class KernelPlan:
  caps: Caps
  abi: KernelABI
  bufs: dict[int, Buf]                  # slot -> buffer, for the slots the kernel still uses
  vars: tuple[tuple[UOp, int], ...]     # (scalar PARAM, push-constant byte offset)
  local: tuple[int, int, int]
  meta: KernelMeta   # the reach, split and word-reached slots: what the module carries for the runtime (renderers write meta.encode())
  def push_constants(self) -> list[tuple[int, str, DType, int, Buf|UOp|None]]:
    """The push-constant block (abi.py) in offset order: (byte offset, key, element type, array length or 0, what it is for):
    off: _off[]; p<slot>: the address of the Buf, a pointer to its element type; var<slot>: the scalar PARAM (uint[2] when held
    in words, packing.py); xbase: _xbase."""
    m: list[tuple[int, str, DType, int, Buf|UOp|None]] = [(0, "off", dtypes.uint, self.abi.nwords, None)] if self.bufs else []
    m += [(b.address, f"p{s}", b.dtype, 0, b) for s, b in self.bufs.items() if b.address is not None]
    m += [(o, f"var{u.arg.slot}", *((dtypes.uint, 2) if var_in_words(u) else (u.dtype, 0)), u) for u, o in self.vars]
    if self.abi.xbase is not None: m.append((self.abi.xbase, "xbase", dtypes.int, 0, None))
    return sorted(m, key=lambda x: x[0])
  def windows(self, a:Access) -> Access:
    """The access through the windows of its slot where it is split (abi.py SPLIT)."""
    if a.slot is None or (sp := self.meta.split.get(a.slot)) is None: return a
    return replace(a, wins=(sp[0], sp[1] // (a.dtype.itemsize * a.vec), sp[2]))
  def addr64(self, slot:int|None, *idxs:UOp) -> bool:
    """tinygrad indexes this buffer in 64 bits and it is passed by address: the element address is computed in 64 bits (abi.py).
    A descriptor-bound buffer has at most 2^31-1 elements, so its int64 index is narrowed without loss."""
    return slot in self.bufs and self.bufs[slot].address is not None and any(i.dtype == dtypes.long for i in idxs)
  def own(self, a:Access) -> bool:
    """Whether the access goes through the buffer's own declaration (else another declaration of its memory)."""
    return a.slot is None or (a.dtype, a.vec) == (self.bufs[a.slot].dtype, 1)
  def access(self, bidx:UOp, j:int=0) -> Access:
    """The access of INDEX(buffer or view, index), element j past it."""
    b, i = bidx.src
    if (words := word_array(self.caps, bidx)) is not None:   # a word of 1/2-byte elements: the index holds the view offset
      return self.windows(Access(words, dtypes.uint, ((i, 1),), j))
    if is_view(b):
      # every byte offset in the chain is a multiple of the smallest element size w it involves: the view is addressed in w-byte
      # words, of the view's own type where its elements are w bytes, else k words of a w-byte uint for each element
      base, terms, _ = chain(bidx)
      if dtypes.bool in (b.dtype, base.dtype): raise CompileError("VULKAN: no bitcast view of a bool buffer")
      addr64 = self.addr64(base.arg.slot, *(t for t, _ in terms))
      all_terms: list[tuple[UOp|None, int]] = [*terms, (OFFSET, base.dtype.itemsize)]
      w = min(s for _, s in all_terms)
      wdt = b.dtype if b.dtype.itemsize == w else UINT_OF_SIZE[w]
      return self.windows(Access(base, wdt, tuple((t, s // w) for t, s in reversed(all_terms)), j, k=b.dtype.itemsize // w, addr64=addr64))
    return self.element(b, i, j)
  def element(self, b:UOp, i:UOp, j:int=0) -> Access:
    """Element i+j of a buffer (a PARAM or BUFFER, maybe under AFTER); a global one is offset by its view's _o."""
    base = b.buf_uop
    if base.op is Ops.PARAM:
      return self.windows(Access(base, self.bufs[base.arg.slot].dtype, ((i, 1), (OFFSET, 1)), j, addr64=self.addr64(base.arg.slot, i)))
    return Access(base, base.dtype, ((i, 1),), j)
  def vector(self, sh:UOp) -> tuple[Access|None, list[Access]]:
    """A coalesced (float4) access SHRINK(buffer, index, n): its n scalar accesses, and the vecN access that replaces them when
    the view offset keeps it aligned (None where it never can). Where tinygrad's index is a multiple of n, it is aligned when
    _o<slot> is too: the specialization constant _a<slot> says so (constant id = slot; one pipeline per alignment, program.py)."""
    b, n = sh.src[0], sh.max_numel()
    if b.op not in (Ops.PARAM, Ops.BUFFER, Ops.AFTER): raise CompileError(f"VULKAN: no vector access through {b.op}")
    lanes = [self.element(b, sh.src[1], j) for j in range(n)]
    # a slot passed by address is accessed lane by lane: there Mesa 22.3's llvmpipe loads a vec4 ~4x slower than 4 scalars whose
    # alignment it cannot prove (GEMM 1024 by address 3.9 -> 10.9 GFLOP/s, add 16M 1.9 -> 6.2 GB/s), SwiftShader dies of SIGILL
    # on the pointer cast to a vecN declaration (OpBitcast of a PhysicalStorageBuffer pointer), Mesa 25's lavapipe runs both alike
    if b.op is not Ops.PARAM or b.addrspace != AddrSpace.GLOBAL or n not in (2, 4) or b.dtype == dtypes.bool or "vec" not in self.caps or \
       multiple_of(sh.src[1]) % n or self.bufs[b.arg.slot].address is not None or self.bufs[b.arg.slot].texel == 1: return None, lanes
    return self.windows(replace(lanes[0], vec=n, shift=n.bit_length() - 1, wins=None)), lanes
  def accesses(self, uops:list[UOp], ops=(Ops.LOAD, Ops.STORE)) -> Iterator[Access]:
    """The scalar accesses of global memory by these ops (a vector access's lanes), as the renderers write them."""
    for u in uops:
      if u.op in ops and (b := u.src[0]).addrspace == AddrSpace.GLOBAL:
        yield from self.vector(b)[1] if b.op is Ops.SHRINK else [self.access(b)] if b.op is Ops.INDEX else []

def _stored_param(st:UOp) -> UOp:
  b = st.src[0]
  while b.op not in (Ops.PARAM, Ops.BUFFER) and b.src: b = b.src[0]
  return b

def plan_kernel(caps:Caps, uops:list[UOp]) -> KernelPlan:
  params = sorted((u for u in uops if u.op is Ops.PARAM), key=lambda u: u.arg.slot)
  gbufs = [u for u in params if u.addrspace == AddrSpace.GLOBAL]
  pvars = [u for u in params if u.addrspace == AddrSpace.ALU]
  # a buffer whose accesses were all folded away has no PARAM here, but keeps its slot (the runtime binds a scratch buffer there)
  slot_info = {u.arg.slot: (u.dtype.itemsize, numel(u._shape)) for u in gbufs}
  gx = next((u.src[0].vmax for u in uops if u.op is Ops.SPECIAL and u.arg == "gidx0"), 1)
  sizes = [slot_info.get(i, (1, 0)) for i in range(max(slot_info, default=-1) + 1)]
  vdts, wide = [u.dtype for u in pvars], gx > caps.wgcount[0]
  try: abi = kernel_abi(caps, sizes, vdts, wide)
  except ValueError as e: raise CompileError(f"VULKAN: {e}") from e
  if abi.pc_size > caps.pc:
    raise CompileError(f"VULKAN: {sum(a is not None for a in abi.address)} buffer addresses, {len(abi.binding)} view offsets and the scalars "
                       f"need {abi.pc_size} bytes of push constants, the device has {caps.pc} (maxPushConstantsSize)")
  written = {_stored_param(u) for u in uops if u.op is Ops.STORE}
  packed = packed_dtypes(caps)
  bufs = {u.arg.slot: Buf(u, dtypes.uint if u.dtype in packed else dtypes.uchar if u.dtype == dtypes.bool else u.dtype,
                          abi.binding[u.arg.slot], abi.address[u.arg.slot], u in written) for u in gbufs}
  words = frozenset(w.arg.slot for u in uops if u.op is Ops.INDEX and (w := word_array(caps, u)) is not None and w.op is Ops.PARAM)
  plan = KernelPlan(caps, abi, bufs, tuple((u, off) for u, (off, _) in zip(pvars, abi.vars)), local_size(uops),
                    KernelMeta(words=words, abi=abi))
  if not (big := {s for s, (isz, n) in slot_info.items() if pieced(caps, isz, n)}): return texel_slots(plan, uops)
  # past maxStorageBufferRange without bda (or with `reach`): in pieces where each workgroup's reach is bounded, else split into
  # windows that each access selects from, when the descriptors hold them beside one window for the other slots
  reach, why = slot_reach(plan, uops, big)
  # a slot read whole by every workgroup, read-only, of 32-bit elements: one storage texel buffer where maxTexelBufferElements holds
  # it (llvmpipe: 4x maxStorageBufferRange), at its own binding's descriptor (windows.py `place`), not windows each access reads all of
  texel = {s for s in texel_ok(plan, uops, set(why)) if cast(int, abi.binding[s]) < caps.bufs}
  why = {s: w for s, w in why.items() if s not in texel}
  # each window whole 256-byte units within maxStorageBufferRange, with room for the view's start aligned down (by < 256 bytes)
  split, first, wb = {}, sum(b is not None for b in abi.binding), caps.range - caps.range % 256 - 256
  for s in sorted(why) if wb > 0 else ():
    isz, n = slot_info[s]
    split[s] = (k := ceildiv(cast(int, n) * isz + 256, wb), wb, first)   # big: pieced, of a known size
    first += k
  need = sum(k for k, _, _ in split.values()) + len(texel) + (len(slot_info) > len(split) + len(texel))
  if "reach" in caps and why and (wb <= 0 or need > caps.bufs):   # windows are only preferred to addresses: by address
    return plan_kernel(replace(caps, flags=caps.flags - {"reach"}), uops)
  if need > caps.bufs:
    raise CompileError(f"VULKAN: buffer {', '.join(map(str, sorted(why)))} of {kernel_name(uops)} is over maxStorageBufferRange "
                       f"({caps.range}) and {'; '.join(why[s] for s in sorted(why))}: its windows and the other buffers need {need} "
                       f"descriptors, the device has {caps.bufs} (maxPerStageDescriptorStorageBuffers): it needs bufferDeviceAddress")
  abi = kernel_abi(caps, sizes, vdts, wide, sum(k for k, _, _ in split.values()))   # the descriptors count the windows
  bufs = {s: replace(b, texel=1) if s in texel else b for s, b in plan.bufs.items()}
  return replace(plan, abi=abi, bufs=bufs, meta=replace(plan.meta, reach=reach, split=split, abi=abi))

# texel buffers per kernel at most: llvmpipe slows down past 15 (docs/capabilities.md "storage texel buffers")
MAX_TEXELS = 15

def texel_ok(plan:KernelPlan, uops:list[UOp], slots:set[int]) -> set[int]:
  """The slots of these that may be read through storage texel buffers ("texel"): llvmpipe loads a storage buffer lane by lane, a
  branch and a bounds check each, a texel buffer with one gather. A slot qualifies when the kernel only reads it, through a
  descriptor, every access a 32-bit element (a texel of R32_UINT, the one format: each type is read as its bits), and its binding
  (from a start aligned down by < 256 bytes) is within maxTexelBufferElements; the first MAX_TEXELS of them. Its vector accesses
  read lanes, or whole texels of 4 words (texel_slots)."""
  caps = plan.caps
  if "texel" not in caps: return set()
  ok = {s for s in slots if not (b := plan.bufs[s]).writable and b.binding is not None and b.dtype.itemsize == 4 and
        cast(int, numel(b.uop._shape)) + 256 // 4 <= caps.texels}
  ok -= {a.slot for a in plan.accesses(uops, (Ops.LOAD,)) if a.dtype.itemsize != 4 or a.k != 1}
  return set(sorted(ok)[:MAX_TEXELS])

def texel_slots(plan:KernelPlan, uops:list[UOp]) -> KernelPlan:
  """The plan with the slots of an unwindowed kernel that qualify (texel_ok) read through storage texel buffers: R32G32B32A32_UINT
  ones ("texel4") where every load is a float4 at an index tinygrad keeps a multiple of 4 (a texel each where the view offset is
  aligned too, KernelPlan.vector; a lane a component of one elsewhere), else R32_UINT."""
  if plan.abi.windowed or not (ok := texel_ok(plan, uops, set(plan.bufs))): return plan
  quads = set(ok) if "texel4" in plan.caps else set()   # (texel4 requires vec: caps.REQUIRES)
  for u in uops:
    if u.op is not Ops.LOAD or (b := u.src[0]).addrspace != AddrSpace.GLOBAL: continue
    if b.op is Ops.SHRINK and b.src[0].op is Ops.PARAM and b.max_numel() == 4 and multiple_of(b.src[1]) % 4 == 0: continue
    quads -= {a.slot for a in plan.accesses([u], (Ops.LOAD,))}
  return replace(plan, bufs={s: replace(b, texel=4 if s in quads else 1) if s in ok else b for s, b in plan.bufs.items()})
