"""TinyJit graphs: recorded once, replayed with one vkCmdExecuteCommands, re-recorded only when inputs or values change.
Every test counts the VulkanGraph replays and recordings exactly: with VULKAN_GRAPH=0 (no graph) they fail."""
import numpy as np
from tinygrad import Tensor, TinyJit, Variable
from tinygrad_vk.graph import VulkanGraph
from util import data

class GraphSpy:
  """Counts VulkanGraph replays and the replays that recorded the command buffer (again)."""
  def __init__(self, monkeypatch):
    self.replays, self.records = 0, 0
    orig_call, orig_record = VulkanGraph.__call__, VulkanGraph._record
    def call(graph, *args, **kw):
      self.replays += 1
      return orig_call(graph, *args, **kw)
    def record(graph):
      self.records += bool(graph.dirty)
      return orig_record(graph)
    monkeypatch.setattr(VulkanGraph, "__call__", call)
    monkeypatch.setattr(VulkanGraph, "_record", record)

# TinyJit runs the first call as is, captures the second and runs it through the graph, and replays the graph from then on
CALLS, REPLAYS = 6, 5

def test_jit_graph_replays_with_new_inputs(monkeypatch):
  spy = GraphSpy(monkeypatch)
  @TinyJit
  def step(a, b): return ((a + b).contiguous() * 2 - a).sum(0).realize()
  w, inputs = data((33, 17)), []
  for _ in range(CALLS):
    a = data((33, 17))
    inputs.append((ta := Tensor(a), tw := Tensor(w)))   # kept alive: every call has input buffers of its own
    np.testing.assert_allclose(step(ta, tw).numpy(), ((a + w) * 2 - a).sum(0), rtol=1e-5, atol=1e-5)
  assert (spy.replays, spy.records) == (REPLAYS, REPLAYS), "every replay with new input buffers re-binds and records the graph"

def test_unchanged_replay_is_not_rerecorded(monkeypatch):
  spy = GraphSpy(monkeypatch)
  @TinyJit
  def chain(x):
    for _ in range(10): x = (x * 1.5 + 1).contiguous()
    return x.realize()
  x0 = data(1000)
  x = Tensor(x0).realize()
  for _ in range(CALLS): y = chain(x)
  ref = x0.copy()
  for _ in range(10): ref = ref * np.float32(1.5) + np.float32(1)
  np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5)
  assert (spy.replays, spy.records) == (REPLAYS, 1), "the same input buffer replays without recording again"

def test_symbolic_jit_graph(monkeypatch):
  spy = GraphSpy(monkeypatch)
  @TinyJit
  def f(x, n): return ((x[:n] + 1).contiguous() * 3).sum().realize()
  x0 = data(100)
  x = Tensor(x0).realize()
  sizes = [5, 17, 3, 64, 64, 99]
  for i in sizes: np.testing.assert_allclose(f(x, Variable("n", 1, 100).bind(i)).item(), ((x0[:i] + 1) * 3).sum(), rtol=1e-5)
  assert (spy.replays, spy.records) == (REPLAYS, 4), "a new symbolic value records the graph again, the same one (64) does not"

def test_views_of_inputs_follow_new_inputs(monkeypatch):
  # a kernel bound to a view of a JIT input (a realized slice, at an offset that is not a whole word either): tinygrad's
  # uop_replace lists only the inputs themselves, so each replay must bind the view of that call's input, not the captured one
  spy = GraphSpy(monkeypatch)
  @TinyJit
  def f(big, y): return (((big[3:304].contiguous() + 7).contiguous() * y).contiguous() + big[5:306].contiguous()).realize()
  inputs = []
  for _ in range(CALLS):
    a, y = data(601), data(301)
    inputs.append((tb := Tensor(a).realize(), ty := Tensor(y).realize()))
    np.testing.assert_allclose(f(tb, ty).numpy(), (a[3:304] + 7) * y + a[5:306], rtol=1e-6, atol=1e-6)
  assert (spy.replays, spy.records) == (REPLAYS, REPLAYS), "every replay with new input buffers re-binds and records the graph"

def test_begin_info_points_at_live_memory(vk_hooks):
  # the secondary's VkCommandBufferInheritanceInfo was a temporary: cffi keeps no pointee of a struct field alive, so it was freed
  # before vkBeginCommandBuffer read it (the validation layer 1.4.363 crashed there now and then, deep-copying it). A freed block
  # goes to the next allocation of its size: these would overwrite it
  import vulkan as vk
  from tinygrad_vk.vk import ffi, NULL
  seen = []
  def begin(real, cmd, info):
    if info.pInheritanceInfo != NULL:
      junk = [ffi.new("VkCommandBufferInheritanceInfo*", {"sType": 12345}) for _ in range(64)]
      seen.append((info.pInheritanceInfo.sType, len(junk)))
    return real(cmd, info)
  vk_hooks["vkBeginCommandBuffer"] = begin
  @TinyJit
  def step(a): return ((a * 3).contiguous() + 1).realize()
  x = data(1001)
  t = Tensor(x).realize()
  for _ in range(4): np.testing.assert_allclose(step(t).numpy(), x * 3 + 1, rtol=1e-6)
  assert seen and all(s == vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO for s, _ in seen), seen
