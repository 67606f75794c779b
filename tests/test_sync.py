"""Batched submission: dependent kernels share a command buffer, ordered by barriers only where ranges overlap."""
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer
from tinygrad.uop.ops import UOp, AxisType
from util import data, run_python, run_kernel

CHAIN = """
import numpy as np
from tinygrad import Tensor
from tinygrad_vk.queue import Hazards
{patch}
a = Tensor(np.arange(1000, dtype=np.float32)).realize()
c = ((a + 1).contiguous() * 2).contiguous()
try: print("result", c.numpy()[:3].tolist())
except RuntimeError as e: print("raised", e)
"""

def test_removing_a_needed_barrier_is_caught():
  # with the barrier dropped, the Khronos synchronisation validation reports the read-after-write hazard
  # the chain's kernels must share a command buffer: a barrier is what orders them there, whatever VULKAN_BATCH the suite runs with
  r = run_python(CHAIN.format(patch="Hazards.barrier = lambda self, cmd: Hazards.__init__(self)"), {"VULKAN_VALIDATION": "1", "VULKAN_BATCH": "64"})
  assert "SYNC-HAZARD-READ-AFTER-WRITE" in r.stdout + r.stderr, r.stdout + r.stderr
  ok = run_python(CHAIN.format(patch=""), {"VULKAN_VALIDATION": "1", "VULKAN_BATCH": "64"})
  assert "result [2.0, 4.0, 6.0]" in ok.stdout and "SYNC-HAZARD" not in ok.stderr, ok.stdout + ok.stderr

def test_kernels_are_batched_and_barriers_only_where_needed(monkeypatch):
  q = Device["VULKAN"].queue
  monkeypatch.setattr(q, "max_cmds", 64)   # whatever VULKAN_BATCH the suite runs with
  a, b = Tensor(data(4099)).realize(), Tensor(data(4099)).realize()
  def kernels(): return (x := (a * 2).contiguous()), (y := (b * 3).contiguous()), (x + y).contiguous()
  Tensor.realize(*kernels())   # build the programs first: a new pipeline's warm-up dispatch is ordered like a write
  x, y, z = kernels()          # x, y independent: no barrier between them; z reads both: one barrier
  Device["VULKAN"].synchronize()
  with q: q.hazards.barrier(q.batch().cmd)   # a clean slate: earlier tests' accesses to buffers the allocator hands out again are ordered
  submitted, calls = q.next_seq, []
  orig = q.hazards.barrier
  q.hazards.barrier = lambda cmd: (calls.append(1), orig(cmd))
  try: Tensor.realize(x, y, z)
  finally: del q.hazards.barrier
  assert q.cur is not None and q.next_seq == submitted, "the kernels should still sit in the one open command buffer"
  assert len(calls) == 1, f"expected exactly one barrier, got {len(calls)}"
  np.testing.assert_allclose(z.numpy(), a.numpy() * 2 + b.numpy() * 3, rtol=1e-6)

def test_new_pipeline_variant_inside_a_launch_never_records_into_a_submitted_batch(monkeypatch):
  # A program's first launch on a misaligned view builds a pipeline variant inside the launch, and its warm-up dispatch is
  # recorded through the queue. Before the fix, with the batch full, that submitted the very command buffer the launch then
  # recorded into (VUID-vkCmdBindPipeline-commandBuffer-recording; wrong results without validation).
  from tinygrad_vk.program import VulkanProgram
  q = Device["VULKAN"].queue
  monkeypatch.setattr(q, "max_cmds", 1)
  orig, variants = VulkanProgram.record, []
  def record(self, cmd, dset, pc, pipeline, groups, x0=0):
    assert all(cmd != b.cmd for b in q.inflight), "recorded into a submitted command buffer"
    if groups != (0, 0, 0): variants.append(len(self.pipelines))
    return orig(self, cmd, dset, pc, pipeline, groups, x0)
  monkeypatch.setattr(VulkanProgram, "record", record)
  n = 4 * 61 + 1
  a = data(n + 3)
  base = Buffer("VULKAN", n + 3, dtypes.float32, initial_value=a.tobytes())
  for off in (1, 2):   # element offsets 1 and 2 inside the binding: a new pipeline variant (alignment 1, 2) each time
    out = Buffer("VULKAN", n, dtypes.float32).allocate()
    src = base.view(n, dtypes.float32, 4 * off)
    s, o = UOp.param(0, dtypes.float32, (n,)), UOp.param(1, dtypes.float32, (n,))
    r = UOp.range(n, 0, AxisType.LOOP)
    run_kernel([o.index(r).store(s.index(r) * 2.625 + 0.8125).end(r)], [src, out])
    np.testing.assert_array_equal(np.frombuffer(out.as_memoryview(), np.float32), a[off:off + n] * np.float32(2.625) + np.float32(0.8125))
  assert variants == [2, 3], f"each offset should launch through a new pipeline variant, got {variants}"
