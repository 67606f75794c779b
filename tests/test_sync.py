"""Batched submission: dependent kernels share a command buffer, ordered by barriers only where ranges overlap."""
import numpy as np
from tinygrad import Tensor, Device
from util import data, run_python

CHAIN = """
import numpy as np
from tinygrad import Tensor
from tinygrad_vk.queue import CommandQueue
{patch}
a = Tensor(np.arange(1000, dtype=np.float32)).realize()
c = ((a + 1).contiguous() * 2).contiguous()
try: print("result", c.numpy()[:3].tolist())
except RuntimeError as e: print("raised", e)
"""

def test_removing_a_needed_barrier_is_caught():
  # with the barrier dropped, the Khronos synchronisation validation reports the read-after-write hazard
  r = run_python(CHAIN.format(patch="CommandQueue.barrier = lambda self, cmd: self.hazards.clear()"), {"VULKAN_VALIDATION": "1"})
  assert "SYNC-HAZARD-READ-AFTER-WRITE" in r.stdout + r.stderr, r.stdout + r.stderr
  ok = run_python(CHAIN.format(patch=""), {"VULKAN_VALIDATION": "1"})
  assert "result [2.0, 4.0, 6.0]" in ok.stdout and "SYNC-HAZARD" not in ok.stderr, ok.stdout + ok.stderr

def test_kernels_are_batched_and_barriers_only_where_needed():
  q = Device["VULKAN"].queue
  a, b = Tensor(data(4099)).realize(), Tensor(data(4099)).realize()
  def kernels(): return (x := (a * 2).contiguous()), (y := (b * 3).contiguous()), (x + y).contiguous()
  Tensor.realize(*kernels())   # build the programs first: a new pipeline's warm-up dispatch is ordered like a write
  x, y, z = kernels()          # x, y independent: no barrier between them; z reads both: one barrier
  Device["VULKAN"].synchronize()
  q.barrier(q.batch().cmd)   # start from a clean slate: earlier tests' accesses to buffers the allocator hands out again are ordered
  submitted, calls = q.next_seq, []
  orig = q.barrier
  q.barrier = lambda cmd: (calls.append(1), orig(cmd))
  try: Tensor.realize(x, y, z)
  finally: q.barrier = orig
  assert q.cur is not None and q.next_seq == submitted, "the kernels should still sit in the one open command buffer"
  assert len(calls) == 1, f"expected exactly one barrier, got {len(calls)}"
  np.testing.assert_allclose(z.numpy(), a.numpy() * 2 + b.numpy() * 3, rtol=1e-6)
