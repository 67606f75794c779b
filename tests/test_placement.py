"""windows.py's placement of a windowed kernel's slots, without a device: views of nonuniform sizes at offsets off the window step
(64 bytes here: minStorageBufferOffsetAlignment), a 1 KiB maxStorageBufferRange."""
from types import SimpleNamespace as NS
import pytest
from tinygrad.helpers import round_up
from tinygrad_vk.caps import Caps
from tinygrad_vk.windows import Window, assign, block_windows, plan_gather, reach_window, split_windows

CAPS = Caps(flags=frozenset({"share"}), align=64, range=1024)
BLOCK = NS(block=NS(size=2500))
def view(offset:int, size:int, handle="h"): return NS(offset=offset, size=size, handle=handle, root=BLOCK)
def end(i, b, start): return start + round_up(b.offset - start + b.size, 4)   # binding_end without a guard
VIEWS = [view(900, 10), view(0, 100), view(500, 530), view(70, 300)]   # slots 0..3, out of offset order

def spans(wins): return [(w.start, w.end, [i for i, _ in w.members]) for w in wins]

def test_block_windows_share_within_the_range():
  wins = block_windows(CAPS, [(b.offset, i, b) for i, b in enumerate(VIEWS)], end)
  # slot 2 ends 1032 bytes past the block's first window start: over the range, a new window from 448 that slot 0 joins
  assert spans(wins) == [(0, 372, [1, 3]), (448, 1032, [2, 0])]
  assert spans(block_windows(Caps(align=64, range=1024), [(b.offset, i, b) for i, b in enumerate(VIEWS)], end)) == \
    [(0, 100, [1]), (64, 372, [3]), (448, 1032, [2]), (896, 912, [0])]

def test_assign_element_offsets():
  wins, offsets = block_windows(CAPS, [(b.offset, i, b) for i, b in enumerate(VIEWS)], end), {}
  assert assign(wins, 4, (0, 1, 2, 3), [2, 4, 2, 2], offsets, "k") == (1, 0, 1, 0)
  assert offsets == {1: 0, 3: 35, 2: 26, 0: 226}
  with pytest.raises(RuntimeError, match="buffer 3 of k is a view at byte offset 70"): assign(wins, 4, (0, 1, 2, 3), [4] * 4, {}, "k")

def test_gather_keeps_the_largest_and_the_alignment():
  kept, out = Window("r", 0, 64, [(0, view(0, 64, "r"))], kept=True), Window("o", 0, 64, [(1, view(0, 64, "o"))])
  small, big, tiny = (Window(h, 0, n, [(i, view(off, sz, h))]) for h, n, i, off, sz in (("a", 100, 2, 70, 30), ("b", 300, 3, 0, 300),
                                                                                     ("c", 50, 4, 131, 7)))
  wins, placed, size = plan_gather(CAPS, [kept, small, out, big, tiny], 4, {1}, "k")
  # the scratch takes one descriptor: the 300-byte window stays, slots 2 and 3 are copied at their offsets modulo 64
  assert wins == [kept, out, big] and [(i, dst, lead) for i, _, dst, lead in placed] == [(2, 6, 2), (4, 67, 3)] and size == 76
  with pytest.raises(RuntimeError, match="needs 2 windows that cannot be gathered"): plan_gather(CAPS, [kept, small, out], 2, {1}, "k")

def test_split_and_reach_windows():
  scratch = NS(handle="s", offset=0)
  # 3 windows of 1 KiB from the view's start aligned down: the last starts past the block, at the scratch
  assert [(w.handle, w.start, w.end, w.binds) for w in split_windows(CAPS, (3, 1024, 5), view(1000, 1500), scratch)] == \
    [("h", 960, 1984, [5]), ("h", 1984, 2500, [6]), ("s", 0, 256, [7])]
  # workgroups 2..4 of 64 bytes each, reaching 8 bytes before and 40 past their own
  w = reach_window(CAPS, [(64, -8, 40)], 1, view(256, 400), (2, 5))
  assert (w.start, w.end, w.kept) == (320, 552, True)
