"""The launches off the common path (VulkanProgram.__call__): a windowed kernel's (renderer/abi.py: more descriptor-bound slots than
descriptors, or slots launched in pieces) binds windows over the memory blocks its buffers lie in, and a view of a slot reached in
words (WORD_VIEW) that starts inside a word is moved to a whole word first. The planning takes the device's Caps, not the device."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, cast
from tinygrad.device import BufferSpec
from tinygrad.helpers import round_up
from tinygrad_vk.caps import Caps
from tinygrad_vk.memory import guard_len, VulkanBuffer
from tinygrad_vk.queue import record_barrier
if TYPE_CHECKING: from tinygrad_vk.program import VulkanProgram

# a window starts at a multiple of this and of minStorageBufferOffsetAlignment: a slot's element offset inside it is then as
# aligned as the view itself (the widest vector alias, dvec4, is 32 bytes)
WINDOW_ALIGN = 32
GATHER_SPEC = BufferSpec()

def window_step(caps:Caps) -> int: return max(caps.align, WINDOW_ALIGN)

@dataclass(eq=False)
class Window:
  """Bytes [start, end) of a VkBuffer bound to one descriptor: the slots in it (slot, buffer), the shader bindings of split slots
  it holds, and whether it is kept (never gathered into the scratch: a slot in pieces or split)."""
  handle: Any
  start: int
  end: int
  members: list[tuple[int, Any]] = field(default_factory=list)
  binds: list[int] = field(default_factory=list)
  kept: bool = False

@dataclass
class Scratches:
  """Scratch buffers (buffer, bytes) of a launch, given back once it is recorded (tinygrad's cache, or freed once the queue is done
  with them): a later use is queue-ordered after."""
  scratches: list[tuple[VulkanBuffer, int]]
  def free(self, allocator):
    for s, n in self.scratches: allocator.free(s, n, GATHER_SPEC)
    self.scratches = []

@dataclass
class Windows(Scratches):
  """Where the slots of a windowed kernel are for one launch: descriptor k is `spans[k]` (VkBuffer, offset, range), shader binding
  j is window `of[j]`, slot i lies at element `offsets[i]` of its window (of a split slot: of its first), after the `copies`
  (source view, scratch view) that gather the slots left over into the scratch."""
  spans: list[tuple[object, int, int]]
  of: tuple[int, ...]
  offsets: dict[int, int]
  copies: list[tuple[VulkanBuffer, VulkanBuffer]]

@dataclass
class Realigned(Scratches):
  """A launch's buffers with the views of slots reached in words that start inside a word replaced by scratch buffers: `before`
  (view, scratch) copied in before the launch, `after` (scratch, view) copied out after it."""
  bufs: list
  before: list[tuple[VulkanBuffer, VulkanBuffer]]
  after: list[tuple[VulkanBuffer, VulkanBuffer]]

def binding_end(caps:Caps, guard:bool, i:int, b, start:int, name:str) -> int:
  """The end of slot i's binding of view b from byte `start` of its VkBuffer: whole words (8/16-bit data may be accessed through
  32-bit words, renderer/passes/packing.py; buffers are allocated in words), past maxStorageBufferRange refused."""
  if (end := start + round_up(b.offset - start + b.size, 4)) - start > caps.range:
    raise RuntimeError(f"VULKAN: buffer {i} of {name} is {end - start} bytes, over maxStorageBufferRange ({caps.range})")
  # VULKAN_GUARD: the guard after the buffer in range too, or a driver that bounds-checks would drop a store past the end unseen.
  # Only for a view that ends where its buffer does: another one's range would cover the views after it, which the hazard
  # tracking (and synchronisation validation) would then see it access.
  if guard and end >= (r := b.root).offset + r.size: end = max(end, min(start + caps.range, r.offset + r.size + guard_len(r.size)))
  return end

def piece_len(caps:Caps, reach:dict[int, tuple[tuple[int, int, int], ...]], name:str) -> int|None:
  """Workgroups along x per piece, where slots are launched in pieces (abi.py REACH, per slot (bytes per workgroup, lowest, highest
  byte of workgroup 0)): as many as keep each piece's reach within maxStorageBufferRange (0: any number); None when none is."""
  if not reach: return None
  def most(rs) -> int|None:   # the workgroups one window of this slot holds (None: any number)
    room = caps.range - window_step(caps) - 4 - (max(hi for _, _, hi in rs) - min(lo for _, lo, _ in rs))
    if room < 0: raise RuntimeError(f"VULKAN: one workgroup of {name} reaches past maxStorageBufferRange ({caps.range})")
    return room // a + 1 if (a := max(abs(a) for a, _, _ in rs)) else None
  return min([n for rs in reach.values() if rs and (n := most(rs)) is not None], default=0)

def reach_window(caps:Caps, rs:tuple[tuple[int, int, int], ...], i:int, b, piece:tuple[int, int]|None) -> Window:
  """The window of slot i, launched in pieces, over what workgroups piece[0]..piece[1]-1 reach of its view b (no piece: workgroup 0)."""
  g0, g1 = piece if piece is not None else (0, 1)
  lo = b.offset + min(min(a * g0, a * max(g1 - 1, g0)) + lo for a, lo, _ in rs)
  hi = b.offset + max(max(a * g0, a * max(g1 - 1, g0)) + hi for a, _, hi in rs)
  start = max(lo, 0)
  return Window(b.handle, start - start % window_step(caps), min(round_up(hi, 4), b.root.block.size), [(i, b)], kept=True)

def split_windows(caps:Caps, split:tuple[int, ...], b, scratch) -> list[Window]:
  """The k windows of a split slot (k, size, first binding): `size` bytes each from its view b's start aligned down, those past the
  end of its memory block at the `scratch` buffer."""
  k, size, first = split
  start, end = b.offset - b.offset % window_step(caps), b.root.block.size
  return [Window(b.handle, s, min(s + size, end), binds=[first + w], kept=True) if (s := start + w * size) < end else
          Window(scratch.handle, scratch.offset, scratch.offset + 256, binds=[first + w], kept=True) for w in range(k)]

def block_windows(caps:Caps, members:list[tuple[int, int, Any]], end:Callable[[int, Any, int], int]) -> list[Window]:
  """The windows of one memory block's slots (offset, slot, view): in offset order, each joins the window before while that
  stays within maxStorageBufferRange (with `share`). `end(slot, view, start)` is where its binding from `start` ends."""
  wins: list[Window] = []
  for off, i, b in sorted(members, key=lambda m: m[0]):
    e = end(i, b, start := off - off % window_step(caps))
    if wins and "share" in caps and max(wins[-1].end, e) - wins[-1].start <= caps.range:
      wins[-1].end = max(wins[-1].end, e)
      wins[-1].members.append((i, b))
    else: wins.append(Window(b.handle, start, e, [(i, b)]))
  return wins

def plan_gather(caps:Caps, wins:list[Window], ndesc:int, written:set[int], name:str) -> tuple[list[Window], list[tuple[int, Any, int, int]], int]:
  """More windows than the `ndesc` descriptors: the windows kept (the kept ones, the `written` slots' and, while descriptors last,
  one being the scratch's, the read-only ones with the most bytes), the slots gathered into the scratch, each (slot, view, its
  byte in the scratch, its bytes before that in its word), and the scratch's size."""
  keep: list[Window] = []
  rest: list[Window] = []
  for w in wins: (keep if w.kept or any(i in written for i, _ in w.members) else rest).append(w)
  if len(keep) >= ndesc:
    raise RuntimeError(f"VULKAN: {name} needs {len(keep)} windows that cannot be gathered (outputs, buffers past "
                       f"maxStorageBufferRange) and more: over its {ndesc} descriptors (maxPerStageDescriptorStorageBuffers)")
  rest.sort(key=lambda w: w.end - w.start, reverse=True)
  room, step, size, placed = ndesc - 1 - len(keep), window_step(caps), 0, []
  for i, b in (m for w in rest[room:] for m in w.members):   # at the same offset modulo `step`, so each keeps its alignment; from
    dst = round_up(size, step) + b.offset % step              # the word its first element is in
    lead, size = b.offset % 4, round_up(dst + b.size, 4)
    placed.append((i, b, dst, lead))
  if size > caps.range:
    raise RuntimeError(f"VULKAN: the {len(placed)} inputs of {name} gathered into one window take {size} bytes, over "
                       f"maxStorageBufferRange ({caps.range})")
  return keep + rest[:room], placed, size

def assign(wins:list[Window], nbind:int, binding:tuple[int|None, ...], itemsize:list[int], offsets:dict[int, int], name:str) -> tuple[int, ...]:
  """The window of each shader binding; each slot's element offset in its window goes into `offsets`."""
  of = [0] * nbind
  for k, w in enumerate(wins):
    for i, b in w.members:
      if (b.offset - w.start) % itemsize[i]:
        raise RuntimeError(f"VULKAN: buffer {i} of {name} is a view at byte offset {b.offset}, not a multiple of its "
                           f"{itemsize[i]}-byte element: Vulkan cannot bind it")
      offsets[i] = (b.offset - w.start) // itemsize[i]
    for bnd in w.binds + [cast(int, binding[i]) for i, _ in w.members]: of[bnd] = k
  return tuple(of)

def place(prg:VulkanProgram, bufs, piece:tuple[int, int]|None=None) -> Windows:
  """The windows of a windowed kernel's launch (of the workgroups of `piece`, where slots are launched in pieces). Past the
  descriptors, the read-only windows with the fewest bytes are gathered into a scratch buffer (the written ones keep theirs)."""
  dev, caps, wins, offsets = prg.dev, prg.dev.caps, [], {}
  blocks: dict[Any, list[tuple[int, int, Any]]] = {}   # per VkBuffer, its descriptor-bound slots (offset, slot, view)
  texels: dict[int, Window] = {}   # a storage texel buffer's window, at the descriptor of its binding (a texel one in the layout)
  for i, b in zip(prg.slots, bufs):
    if (rs := prg.reach.get(i)) is not None: wins.append(reach_window(caps, rs, i, b, piece))
    elif (bnd := prg.abi.binding[i]) in prg.texel:
      texels[bnd] = Window(b.handle, b.offset - b.offset % window_step(caps), round_up(b.offset + b.size, 4), [(i, b)], kept=True)
    elif (sp := prg.split_slots.get(i)) is not None:
      wins += split_windows(caps, sp, b, dev.scratch)
      offsets[i] = b.offset % window_step(caps) // prg.itemsize[i]
    elif prg.abi.binding[i] is not None: blocks.setdefault(b.handle, []).append((b.offset, i, b))
  for members in blocks.values(): wins += block_windows(caps, members, lambda i, b, s: binding_end(caps, prg.guard, i, b, s, prg.name))
  copies, scratches = [], []
  if len(wins) + len(texels) > prg.ndesc:
    wins, placed, size = plan_gather(caps, wins, prg.ndesc - len(texels), {prg.slots[j] for j in prg.written}, prg.name)
    scratches.append((scratch := dev.allocator.alloc(size, GATHER_SPEC), size))
    copies = [(b.view(round_up(b.size + lead, 4), -lead), scratch.view(round_up(b.size + lead, 4), dst - lead)) for _, b, dst, lead in placed]
    dev.gathered += len(copies)
    wins.append(Window(scratch.handle, scratch.offset, scratch.offset + size, [(i, scratch.view(b.size, dst)) for i, b, dst, _ in placed]))
  if texels:   # the other windows fill the other descriptors in order, the scratch any left before a texel one
    rest, empty = iter(wins), Window(dev.scratch.handle, dev.scratch.offset, dev.scratch.offset + dev.scratch.size)
    wins = [texels[k] if k in texels else next(rest, empty) for k in range(max(len(wins) + len(texels), max(texels) + 1))]
  of = assign(wins, prg.nbind, prg.abi.binding, prg.itemsize, offsets, prg.name)
  return Windows(scratches, [(w.handle, w.start, w.end - w.start) for w in wins], of, offsets, copies)

def realign(prg:VulkanProgram, bufs) -> Realigned|None:
  """The launch's buffers with each view of a slot reached in words that starts inside a word moved to a scratch buffer of its
  own (one per view, whichever slots pass it); None when there is none. Rare: tinygrad folds slices into the index, only a
  Buffer.view (a JIT input, a realized slice) is bound at another byte."""
  if not prg.words: return None
  views: dict[tuple[int, int, int], list[int]] = {}
  for j, (i, b) in enumerate(zip(prg.slots, bufs)):
    if i in prg.words and b.offset % 4: views.setdefault((id(b.root), b.offset, b.size), []).append(j)
  if not views: return None
  ra, alloc = Realigned([], list(bufs), [], []), prg.dev.allocator
  try:
    for js in views.values():
      b = bufs[js[0]]
      ra.scratches.append((s := alloc.alloc(n := round_up(b.size, 4), GATHER_SPEC), n))
      ra.before.append((b, v := s.view(b.size, 0)))
      if any(j in prg.written for j in js): ra.after.append((v, b))
      for j in js: ra.bufs[j] = v
  except BaseException:
    ra.free(alloc)
    raise
  return ra

def launch(prg:VulkanProgram, bufs, ra:Realigned|None, groups:tuple[int, int, int], vals, wait:bool) -> tuple:
  """A launch off the common path: windowed, or the common one, between the copies of the views `ra` moves to whole words."""
  q = prg.dev.queue
  try:
    if ra is not None:
      for src, dst in ra.before: q.copy(src, dst, src.size)
      bufs = tuple(ra.bufs)
    ret = windowed(prg, bufs, groups, vals, wait) if prg.abi.windowed else prg.launch(bufs, groups, vals, wait)
    if ra is not None:
      for src, dst in ra.after: q.copy(src, dst, src.size)
    return ret
  finally:
    if ra is not None: ra.free(prg.dev.allocator)

def windowed(prg:VulkanProgram, bufs, groups:tuple[int, int, int], vals, wait:bool) -> tuple:
  """A windowed launch, in pieces where a slot has a reach: its gathers, then its dispatches, ordered after and before
  everything like a graph replay (a window's range covers the other buffers of its block too)."""
  q, pieces, wins = prg.dev.queue, prg.pieces(groups[0]), []
  try:
    for p in pieces: wins.append(place(prg, bufs, p))
    for w in wins:
      for src, dst in w.copies: q.copy(src, dst, src.size)
    packed = [prg.pack(bufs, vals, w) for w in wins]   # any new pipeline is built here, before the launch is ordered
    with q.prepare_opaque([*bufs, *(s for w in wins for s, _ in w.scratches)]) as batch:
      t0 = batch.timestamp() if wait or q.profiling() else None
      for (g0, g1), w, (pc, pipeline) in zip(pieces, wins, packed):
        if g0: record_barrier(batch.cmd)   # one launch's parts: see queue.record_barrier
        if len(pieces) > 1: prg.pack(bufs, vals, w)   # the descriptor structs hold this piece's windows again
        dset = batch.alloc_set(prg.set_layout) if prg.ndesc else None
        prg.update(dset)
        prg.record(batch.cmd, dset, pc, pipeline, (g1 - g0, *groups[1:]), g0)
      return batch, t0, prg.recorded(batch, t0)
  finally:
    for w in wins: w.free(prg.dev.allocator)
