"""The kernel ABI: how each buffer and scalar of a kernel reaches the shader. The renderers emit it and the runtime (program.py)
packs it, both from `kernel_abi` and the Caps the kernel was compiled for (`Target.arch`), so they always agree.

A buffer parameter (slot 0..n-1) is
  - passed by address (`bda`) when its binding could pass maxStorageBufferRange: a view is bound from its start aligned down (to
    minStorageBufferOffsetAlignment, or ADDR_ALIGN for an address), so n bytes may need n + align - 1 of range. n is the PARAM's
    size, known at compile time (a small view of a huge buffer keeps the descriptor path); a symbolic size counts as unbounded;
  - else bound by descriptor: set 0, binding = its rank among the descriptor-bound slots. With more of them than
    maxPerStageDescriptorStorageBuffers (D) the kernel is `windowed`: the runtime (windows.py) reaches them through at most D
    descriptors, each a window over one memory block (memory.py) holding the slots that lie in it, and renumbers the shader's
    Binding decorations to the windows (a pipeline per assignment); a slot's element offset inside its window is then a whole
    word of _off. Where the slots lie in more blocks than D, the read-only ones of the blocks left over are first gathered into
    one scratch buffer (`VULKAN_DISABLE=share` gives every slot a window of its own, so this path is taken whenever D is passed).
    A slot that could pass maxStorageBufferRange without `bda` makes the kernel windowed too (REACH): the plan (reach.py) proves
    that the bytes of it workgroup x can touch lie in [a*x + lo, a*x + hi) for each access, the module carries that as
    `OpSourceExtension "tinygrad_vk.reach:<slot>:<a>:<lo>:<hi>"`, and the runtime launches the kernel in pieces of workgroups
    along x, each with that slot's window where the piece reaches (its _o may be negative). Where no such bound exists (an index
    read from memory) or one workgroup reaches past the range, the slot is split (SPLIT, "tinygrad_vk.split:<slot>:<k>:<w>:<first
    binding>"): k windows of w bytes from its view's start aligned down, at k bindings of their own past the slots' ranks; an
    access reads every window at its index clamped into it and selects the one the index falls in, and stores to that one only.
    Refused when the windows and one more for the other slots do not fit the descriptors.
    With `bda` this is the path too where loads by address were measured much slower than through a descriptor (`reach`, probe.py:
    llvmpipe before Mesa 25); a kernel whose windows would not fit the descriptors then passes those slots by address after all.
A slot of 1- or 2-byte elements reached in 32-bit words (packing.py; WORD_VIEW, "tinygrad_vk.words:<slot>") is bound at a whole
word: _o<slot> x itemsize is a multiple of 4, so a field's bit shift comes from the index inside the view alone. The runtime
(windows.py `realign`) moves a view at another byte through an aligned scratch buffer, copied in before the launch and out after.
Push constants (std430, byte offsets):
  0               uint _off[ceil(n/4)]: per slot one byte, the view's element offset past its aligned-down start (< 256);
                  windowed: uint _off[n], per slot its element offset inside its window
  then 8-aligned  uint64 per address slot, in slot order: the aligned-down start address (GLSL: a buffer_reference)
  then            the scalar vars at TinyELF.iter_sig offsets
  then 4-aligned  int _xbase where launch x may pass maxComputeWorkGroupCount[0] (XBASE): the runtime
                  dispatches at most that many workgroups at a time (vkCmdDispatchBase's base must stay under the limit), and
                  gidx0 is gl_WorkGroupID.x + _xbase
Indexing: tinygrad indexes with int32, or int64 where an index can pass 2^31-1. An int32 index goes into the array access
(OpAccessChain), which the driver scales to a 64-bit address: buffers of any size pass by address without 64-bit arithmetic in
the shader, or shaderInt64 (as on the Raspberry Pi's v3dv). An int64 index cannot index an array: on an address slot the element's
address is computed in 64 bits (base + index * itemsize); a descriptor slot has at most 2^31-1 elements (a bigger one goes by
address, and is refused without `bda`), so its int64 index is narrowed to int32 without loss.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from tinygrad.device import TinyELF
from tinygrad.dtype import DType, DTYPES_DICT
from tinygrad.helpers import ceildiv, round_up
from tinygrad_vk.caps import Caps

ADDR_ALIGN = 256    # an address is passed aligned down to this: the widest vector alias (dvec4, 32 B) stays aligned
INT32_MAX = 2**31 - 1

@dataclass(frozen=True)
class KernelABI:
  binding: tuple[int|None, ...]     # per slot: its descriptor binding, None when passed by address
  address: tuple[int|None, ...]     # per slot: push-constant byte offset of its address, None when bound by descriptor
  vars: tuple[tuple[int, DType], ...]   # (push-constant byte offset, dtype) of each scalar var
  pc_size: int
  windowed: bool = False            # more descriptor-bound slots than descriptors, or one in pieces: the runtime maps them to windows
  ndesc: int = 0                    # descriptors the pipeline layout has
  nbind: int = 0                    # the shader's bindings: the descriptor-bound slots' ranks, then the windows of split slots
  xbase: int|None = None            # push-constant byte offset of the int added to gl_WorkGroupID.x (XBASE)
  @property
  def nwords(self) -> int: return len(self.binding) if self.windowed else ceildiv(len(self.binding), 4)   # words of _off[]
  def off_word(self, slot:int) -> tuple[int, int, int|None]:
    """Where _o<slot> is in _off: (word, shift, mask), mask None for a whole word."""
    return (slot, 0, None) if self.windowed else (slot // 4, 8 * (slot % 4), 255)
  def encode(self) -> str:
    """The ABI as one note (spv.KernelMeta): the runtime reads it back instead of deciding it again."""
    def j(xs) -> str: return ",".join("-" if x is None else str(x) for x in xs)
    return ":".join([ABI, j(self.binding), j(self.address), ",".join(f"{o}/{repr(dt)[len('dtypes.'):]}" for o, dt in self.vars),
                     str(self.pc_size), str(int(self.windowed)), str(self.ndesc), str(self.nbind), j([self.xbase])])
  @staticmethod
  def decode(fields:list[str]) -> KernelABI:
    def ints(s:str) -> tuple: return tuple(None if x == "-" else int(x) for x in s.split(",") if x)
    vs = tuple((int(o), DTYPES_DICT[n]) for o, n in (v.split("/") for v in fields[2].split(",") if v))
    return KernelABI(ints(fields[0]), ints(fields[1]), vs, int(fields[3]), fields[4] == "1", int(fields[5]), int(fields[6]), ints(fields[7])[0])

REACH, SPLIT, WORD_VIEW, ABI = "tinygrad_vk.reach", "tinygrad_vk.split", "tinygrad_vk.words", "tinygrad_vk.abi"

def past_range(caps:Caps, itemsize:int, numel:int|None) -> bool:
  """A binding of this many elements could pass maxStorageBufferRange (a view is bound from its start aligned down)."""
  return numel is None or numel * itemsize + caps.align - 1 > caps.range

def by_address(caps:Caps, itemsize:int, numel:int|None) -> bool:
  """With `reach` (loads by address measured slow, probe.py) only what windows cannot index: a symbolic size, over 2^31-1 elements."""
  if numel is None: return "bda" in caps
  if numel > INT32_MAX and not {"bda", "i64"} <= caps.flags:
    raise ValueError(f"a buffer of {numel} elements needs 64-bit indexing, which needs bufferDeviceAddress and shaderInt64 "
                     f"(missing or off: {', '.join(f for f in ('bda', 'i64') if f not in caps)})")
  return "bda" in caps and past_range(caps, itemsize, numel) and ("reach" not in caps or numel > INT32_MAX)

def pieced(caps:Caps, itemsize:int, numel:int|None) -> bool:
  """A slot reached in pieces (no `bda`, or `reach`; a known size past the range): see REACH."""
  return numel is not None and past_range(caps, itemsize, numel) and not by_address(caps, itemsize, numel)

def kernel_abi(caps:Caps, bufs:list[tuple[int, int|None]], var_dtypes:list[DType], wide:bool=False, windows:int=0) -> KernelABI:
  """bufs: (itemsize, element count or None when symbolic) of slots 0..n-1; var_dtypes: the scalar vars in signature order; wide:
  launch x may pass maxComputeWorkGroupCount[0] (XBASE); windows: the bindings of split slots (SPLIT)."""
  addressed = [by_address(caps, isz, n) for isz, n in bufs]
  windowed = len(bufs) - sum(addressed) > caps.bufs or any(pieced(caps, isz, n) for isz, n in bufs)
  binding = [None if a else i - sum(addressed[:i]) for i, a in enumerate(addressed)]   # a descriptor slot's rank
  address: list[int|None] = []
  ndesc, off = len(bufs) - sum(addressed), 4 * (len(bufs) if windowed else ceildiv(len(bufs), 4))
  for a in addressed:   # each address 8-aligned after _off[], in slot order
    address.append((off := round_up(off, 8)) if a else None)
    off += 8 * a
  vars_ = tuple(TinyELF.iter_sig(tuple((None, 0, dt, ()) for dt in var_dtypes), off))
  pc_size = round_up(max([o + dt.itemsize for o, dt in vars_] + [off]), 4)
  return KernelABI(tuple(binding), tuple(address), vars_, pc_size + 4 * wide, windowed, min(ndesc + windows, caps.bufs), ndesc + windows,
                   pc_size if wide else None)

def numel(shape:tuple|None) -> int|None:
  """Elements of a PARAM's shape (TinyELF signature or UOp), None when symbolic or unknown."""
  return math.prod(shape) if shape is not None and all(isinstance(s, int) for s in shape) else None

def max_kernel_bufs(caps:Caps, limit:int) -> int:
  """The most buffers (at most `limit`) one kernel can take: as many as the push constants hold the view offsets of (a byte each,
  a word each when windowed). A kernel whose scalar vars do not fit beside them is refused, naming maxPushConstantsSize."""
  return max([n for n in range(1, limit + 1) if kernel_abi(caps, [(4, 1)] * n, []).pc_size <= caps.pc], default=1)
