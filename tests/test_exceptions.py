"""An exception right after a Vulkan call, before the runtime's bookkeeping after it, with the SIGINT hold-back off: raised by a
SIGINT handler the user installed after the device opened, by a SIGALRM handler, or in a thread using a device it opened. Work
recorded before is submitted exactly once (an in-place accumulation shows a batch run twice or never), every later result is
right, or, where the runtime cannot know what the call did, every later use raises one clear error."""
import gc, signal
import numpy as np
import pytest
import vulkan as vk
from tinygrad import Tensor, Device, TinyJit
from tinygrad_vk.queue import DeviceLost
from util import data, run_python, HANG_S

def chain(t):
  for _ in range(3): t = (t * 2 + 1).contiguous()
  return t.realize()

pytestmark = pytest.mark.timeout(HANG_S)

class Injected(Exception): pass

def raise_injected(*_): raise Injected

# (Vulkan call, which of its calls after arming raises): every call of the runtime followed by bookkeeping, on the paths the
# workload below takes: submission and completion, a batch begun again, launches, a staged copy, a graph re-recorded and
# replayed, a free
CALLS = [("vkEndCommandBuffer", 1), ("vkQueueSubmit", 1), ("vkCmdPipelineBarrier", 1), ("vkGetFenceStatus", 1), ("vkWaitForFences", 1),
         ("vkResetCommandBuffer", 1), ("vkResetFences", 1), ("vkResetDescriptorPool", 1), ("vkBeginCommandBuffer", 1),
         ("vkBeginCommandBuffer", 2), ("vkEndCommandBuffer", 2), ("vkCmdResetQueryPool", 1), ("vkAllocateDescriptorSets", 1),
         ("vkUpdateDescriptorSets", 1), ("vkCmdBindPipeline", 1), ("vkCmdDispatch", 1), ("vkCmdCopyBuffer", 1),
         ("vkCmdExecuteCommands", 1), ("vkDestroyBuffer", 1), ("vkFreeMemory", 1)]
IDS = [f"{n}#{k}" for n, k in CALLS]
_devices = iter(range(40, 200))

def workload(dev:str, hooks, name:str, nth:int, fire, monkeypatch):
  N = 1001   # under 4 KiB: bound by descriptors even with VULKAN_MAX_STORAGE_RANGE=4096
  x, ux, y, z = data(N), data(N), data(N), data(N)
  a, u = Tensor(x, device=dev).realize(), Tensor(ux, device=dev).realize()
  acc = Tensor(np.zeros(N, np.float32), device=dev).realize()
  jit = TinyJit(chain)   # three kernels: a graph
  # captured: the next calls replay a graph. The inputs are kept: a new one is another buffer, and the graph records again
  inputs = [Tensor(data(N), device=dev).realize() for _ in range(4)]
  for t in inputs[:3]: jit(t)
  # built: a launch now records at once
  (a * 5 - u).realize()
  (Tensor(z, device=dev) * 7).realize()
  Device[dev].synchronize()
  alloc = Device[dev].allocator
  monkeypatch.setattr(alloc, "block_limit", lambda ti: 1 << 20)   # buffers over 512 KiB get memory of their own: a free frees it
  # recorded before the fault, not yet submitted (with VULKAN_BATCH=3 partly submitted)
  acc.assign(acc + a).realize()
  b1 = (a * 3 - u).realize()
  big = Tensor(data(200_000), device=dev).realize()
  v = inputs[3]
  # count submissions of each command buffer since it was last begun: one more than one is a batch submitted twice
  submitted, fired, seen = {}, [], [0]
  def hook(call):
    def h(real, *args):
      if call == "vkBeginCommandBuffer": submitted.pop(args[0], None)
      if call == "vkQueueSubmit": submitted[args[2].pCommandBuffers[0]] = submitted.get(args[2].pCommandBuffers[0], 0) + 1
      r = real(*args)
      if call == name and not fired:
        seen[0] += 1
        if seen[0] == nth:
          fired.append(call)
          fire()
      return r
    return h
  for c in {name, "vkBeginCommandBuffer", "vkQueueSubmit"}: hooks[c] = hook(c)
  if name == "vkWaitForFences":   # not done yet when first looked at, however fast the device: a read waits
    hooks["vkGetFenceStatus"] = lambda real, *args: vk.VK_NOT_READY if not fired else real(*args)
  done, err = [], None
  def step_free():
    nonlocal big
    big = None
    gc.collect()
    alloc.free_cache()   # from tinygrad's cache of freed buffers: destroyed
    Device[dev].synchronize()
  steps = [("sync", lambda: Device[dev].synchronize()),
           ("launch", lambda: (a * 5 - u).realize()),
           ("copy", lambda: alloc._copyin(u.uop.buffer._buf, memoryview(y))),   # u is read by queued work: a staged copy
           ("graph", lambda: (jit(v) + 1).realize()),   # out of the JIT's output buffer, which its next call reuses
           ("free", step_free),
           ("read", lambda: acc.numpy())]
  try:
    for s, fn in steps: done.append((s, fn()))
  except (Injected, DeviceLost) as e: err = e
  assert fired or err is not None, f"{name} #{nth} was never called"
  fired.append("disarmed")
  if name == "vkWaitForFences": del hooks["vkGetFenceStatus"]
  try:
    w = data(N)   # first, while the batch with the interrupted replay may still be open: it must not be recorded over
    np.testing.assert_allclose(jit(Tensor(w, device=dev).realize()).numpy(), ((w * 2 + 1) * 2 + 1) * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(acc.numpy(), x)   # accumulated exactly once
    np.testing.assert_array_equal(b1.numpy(), x * 3 - ux)
    res = dict(done)
    if "launch" in res: np.testing.assert_array_equal(res["launch"].numpy(), x * 5 - ux)
    if "copy" in res: np.testing.assert_array_equal(u.numpy(), y)
    if "graph" in res: np.testing.assert_allclose(res["graph"].numpy(), ((v.numpy() * 2 + 1) * 2 + 1) * 2 + 2, rtol=1e-6)
    # later work
    np.testing.assert_array_equal((a + 1).numpy(), x + 1)
    np.testing.assert_array_equal((Tensor(z, device=dev) * 7).numpy(), z * 7)
    bx = data(200_000)   # the size freed above: a buffer freed then is not handed out again, nor freed twice
    np.testing.assert_array_equal((Tensor(bx, device=dev) + 1).numpy(), bx + 1)
    gc.collect()
    alloc.free_cache()
    Device[dev].synchronize()
  except DeviceLost as e:
    # the one step where the runtime cannot find out what the call did: the device is lost, saying why, on every later use
    assert name == "vkEndCommandBuffer" and "vkEndCommandBuffer" in str(e), str(e)
    for use in (lambda: a.numpy(), lambda: (a + 2).realize(), lambda: Device[dev].synchronize()):
      with pytest.raises(DeviceLost, match="vkEndCommandBuffer"): use()
  assert not [c for c, n in submitted.items() if n > 1], "a command buffer was submitted twice without being recorded again"

@pytest.fixture
def handler():
  """Install a Python signal handler that raises, after the device opened (replacing the SIGINT hold-back); restore it after."""
  saved = []
  def install(sig):
    saved.append((sig, signal.getsignal(sig)))
    signal.signal(sig, raise_injected)
  yield install
  for sig, h in saved: signal.signal(sig, h)

@pytest.mark.parametrize("name,nth", CALLS, ids=IDS)
def test_user_sigint_handler(vk_hooks, monkeypatch, handler, name, nth):
  Device["VULKAN"].synchronize()
  handler(signal.SIGINT)
  dev = f"VULKAN:{next(_devices)}" if name == "vkEndCommandBuffer" else "VULKAN"   # may be lost: a device of its own
  workload(dev, vk_hooks, name, nth, lambda: signal.raise_signal(signal.SIGINT), monkeypatch)

@pytest.mark.parametrize("name,nth", CALLS, ids=IDS)
def test_sigalrm_handler(vk_hooks, monkeypatch, handler, name, nth):
  handler(signal.SIGALRM)
  dev = f"VULKAN:{next(_devices)}" if name == "vkEndCommandBuffer" else "VULKAN"
  workload(dev, vk_hooks, name, nth, lambda: signal.raise_signal(signal.SIGALRM), monkeypatch)

THREAD = """
import sys, threading
sys.path.insert(0, "tests")
import pytest
from test_exceptions import CALLS, IDS, workload, raise_injected
from util import LibHooks
from tinygrad_vk import vk, queue, program, graph, memory, device
res = []
def run():
  for i, (name, nth) in enumerate(CALLS):
    mp, hooks = pytest.MonkeyPatch(), LibHooks(vk.lib)
    for m in (queue, program, graph, memory, device): mp.setattr(m, "lib", hooks)
    try:
      workload(f"VULKAN:{i + 1}" if name == "vkEndCommandBuffer" else "VULKAN", hooks, name, nth, raise_injected, mp)
      res.append(IDS[i] + " ok")
    except BaseException as e: res.append(f"{IDS[i]} {type(e).__name__}: {e}"[:2000])
    finally: mp.undo()
t = threading.Thread(target=run)
t.start()
t.join()
print("\\n".join(res))
"""

def test_in_a_thread():
  # tinygrad's disk cache belongs to the thread that first used it: a process of its own, where only that thread uses tinygrad
  # and opens the devices (no hold-back is installed off the main thread); the exception is raised in that thread
  r = run_python(THREAD, timeout=HANG_S)
  assert r.returncode == 0 and r.stdout.split("\n")[:len(IDS)] == [i + " ok" for i in IDS], r.stdout[-6000:] + r.stderr[-3000:]
