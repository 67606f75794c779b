"""TinyJit graphs: recorded once, replayed with one vkCmdExecuteCommands, re-recorded only when inputs or values change."""
import numpy as np
from tinygrad import Tensor, TinyJit, Variable
from tinygrad_vk.graph import VulkanGraph
from util import data

def count_records(monkeypatch) -> list:
  calls = []
  orig = VulkanGraph._record
  monkeypatch.setattr(VulkanGraph, "_record", lambda self: (calls.append(bool(self.dirty)), orig(self))[1])
  return calls

def test_jit_graph_replays_with_new_inputs(monkeypatch):
  records = count_records(monkeypatch)
  @TinyJit
  def step(a, b): return ((a + b).contiguous() * 2 - a).sum(0).realize()
  w = data((33, 17))
  for i in range(6):
    a = data((33, 17))
    out = step(Tensor(a), Tensor(w)).numpy()
    np.testing.assert_allclose(out, ((a + w) * 2 - a).sum(0), rtol=1e-5, atol=1e-5)
  assert step.captured is not None and any(isinstance(r, VulkanGraph) for r in _graphs())
  assert sum(records) >= 1                       # new input buffers re-bind the graph's descriptor sets

def test_unchanged_replay_is_not_rerecorded(monkeypatch):
  records = count_records(monkeypatch)
  @TinyJit
  def chain(x):
    for _ in range(10): x = (x * 1.5 + 1).contiguous()
    return x.realize()
  x0 = data(1000)
  x = Tensor(x0).realize()
  for _ in range(6): y = chain(x)
  ref = x0.copy()
  for _ in range(10): ref = ref * np.float32(1.5) + np.float32(1)
  np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5)
  assert records.count(True) <= 2, f"the same input buffer should replay without re-recording, got {records}"

def test_symbolic_jit_graph():
  @TinyJit
  def f(x, n): return ((x[:n] + 1).contiguous() * 3).sum().realize()
  x0 = data(100)
  x = Tensor(x0).realize()
  for i in [5, 17, 3, 64, 99, 17]:
    np.testing.assert_allclose(f(x, Variable("n", 1, 100).bind(i)).item(), ((x0[:i] + 1) * 3).sum(), rtol=1e-5)

def _graphs():
  from tinygrad.engine.realize import graph_cache
  return list(graph_cache.values())
