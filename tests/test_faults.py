"""Faults injected by wrapping the Vulkan calls (the `vk_hooks` fixture) or by real signals, forks and threads: each ends in
correct results or one clear error, never a hang, a crash or silently wrong data."""
import os, signal, sys
import numpy as np
import pytest
import vulkan as vk
from tinygrad import Tensor, Device
from tinygrad_vk.vk import ERROR_OUT_OF_POOL_MEMORY
from util import data, run_python, switched, fresh_device, glsl_program, kernel_sources, SIMPLE_GLSL, DAMAGE, damage_entry, HANG_S

pytestmark = pytest.mark.timeout(HANG_S)   # a hang fails the test instead of the suite

@pytest.fixture
def launched(monkeypatch) -> list[str]:
  """The names of the kernels built (their pipeline warm-up is recorded) and launched, in order."""
  from tinygrad_vk.program import VulkanProgram
  names, orig_init, orig_call = [], VulkanProgram.__init__, VulkanProgram.__call__
  def init(self, dev, obj):
    names.append(obj.name)
    orig_init(self, dev, obj)
  def call(self, *args, **kw):
    names.append(self.name)
    return orig_call(self, *args, **kw)
  monkeypatch.setattr(VulkanProgram, "__init__", init)
  monkeypatch.setattr(VulkanProgram, "__call__", call)
  return names

def later_uses(dev:str, t:Tensor) -> list:
  """Every kind of use of a device: reading an existing tensor, a kernel, an upload, a synchronisation."""
  return [lambda: t.numpy(), lambda: (t + 1).realize(), lambda: Tensor(data(7), device=dev).realize(), lambda: Device[dev].synchronize()]

def assert_lost(hooks, dev:str, t:Tensor, msg:str):
  """Every later use raises the same error at once: before any Vulkan call."""
  hooks.clear()
  for use in later_uses(dev, t):
    hooks.calls = []
    with pytest.raises(RuntimeError) as e: use()
    assert str(e.value) == msg and not hooks.calls, f"a later use should raise the same error, calling nothing: {e.value!r}, {hooks.calls}"
  hooks.calls = None

# ---- device lost, timeouts

def test_device_lost_on_submit(vk_hooks, launched):
  dev = fresh_device()
  x = data(1001)
  a = Tensor(x, device=dev).realize()
  vk_hooks["vkQueueSubmit"] = lambda real, *args: vk.VK_ERROR_DEVICE_LOST
  with pytest.raises(RuntimeError) as e: (a * 2 + 1).numpy()
  msg = str(e.value)
  assert dev in msg and "VK_ERROR_DEVICE_LOST" in msg and launched[-1] in msg, msg
  assert_lost(vk_hooks, dev, a, msg)

def test_device_lost_in_fence_wait(vk_hooks, launched):
  dev = fresh_device()
  a = Tensor(data(1001), device=dev).realize()
  vk_hooks["vkWaitForFences"] = lambda real, *args: vk.VK_ERROR_DEVICE_LOST
  vk_hooks["vkGetFenceStatus"] = lambda real, *args: vk.VK_NOT_READY
  with pytest.raises(RuntimeError) as e: (a * 3 - 1).numpy()
  msg = str(e.value)
  assert dev in msg and "VK_ERROR_DEVICE_LOST" in msg and launched[-1] in msg, msg
  assert_lost(vk_hooks, dev, a, msg)

def test_fence_wait_times_out(vk_hooks, monkeypatch, launched):
  # a kernel that never ends: the fence never signals; the wait gives up after VULKAN_TIMEOUT_S
  monkeypatch.setenv("VULKAN_TIMEOUT_S", "0.5")
  dev = fresh_device()
  a = Tensor(data(1001), device=dev).realize()
  waits = []
  vk_hooks["vkWaitForFences"] = lambda real, *args: (waits.append(args[4]), vk.VK_TIMEOUT)[1]
  vk_hooks["vkGetFenceStatus"] = lambda real, *args: vk.VK_NOT_READY
  with pytest.raises(RuntimeError) as e: (a * 5).numpy()
  # the wait gave up: each try waited a bounded time, and the error names the switch
  assert waits and all(0 < w < 2**63 for w in waits), waits
  msg = str(e.value)
  assert dev in msg and "VULKAN_TIMEOUT_S=0.5" in msg and launched[-1] in msg, msg
  assert_lost(vk_hooks, dev, a, msg)

# ---- objects that cannot be created

def test_pipeline_creation_failure_names_the_kernel_and_frees_its_module(vk_hooks):
  modules = []
  vk_hooks["vkCreateShaderModule"] = lambda real, dev, info, alloc, out: (real(dev, info, alloc, out), modules.append(out[0]))[0]
  vk_hooks["vkDestroyShaderModule"] = lambda real, dev, mod, alloc: (modules.remove(mod), real(dev, mod, alloc))[1]
  vk_hooks["vkCreateComputePipelines"] = lambda real, *args: vk.VK_ERROR_UNKNOWN
  with pytest.raises(RuntimeError) as e: glsl_program(SIMPLE_GLSL, name="E_pipeline_fault")
  assert "E_pipeline_fault" in str(e.value) and "VK_ERROR_UNKNOWN" in str(e.value), str(e.value)
  assert not modules, "the shader module of the failed program leaked"
  del vk_hooks["vkCreateComputePipelines"]
  x = data(513)
  np.testing.assert_array_equal((Tensor(x) * 7).numpy(), x * 7)   # the device is fine

def test_descriptor_pool_exhaustion_takes_a_new_pool(vk_hooks, monkeypatch):
  # VK_ERROR_OUT_OF_POOL_MEMORY is -1000069000; the `vulkan` package says +1000069000. Before: the real code raised.
  q = Device["VULKAN"].queue
  monkeypatch.setattr(q, "max_cmds", 64)
  a, b = Tensor(data(777)).realize(), Tensor(data(777)).realize()
  (a + b).realize()   # compiled, and the open batch has a pool
  taken, orig = [], q.new_desc_pool
  monkeypatch.setattr(q, "new_desc_pool", lambda: (taken.append(1), orig())[1])
  def alloc(real, *args):
    del vk_hooks["vkAllocateDescriptorSets"]
    return ERROR_OUT_OF_POOL_MEMORY   # the batch's pool is full
  vk_hooks["vkAllocateDescriptorSets"] = alloc
  c = a * b - a
  np.testing.assert_allclose(c.numpy(), a.numpy() * b.numpy() - a.numpy(), rtol=1e-6)
  assert ERROR_OUT_OF_POOL_MEMORY == -1000069000 and len(taken) == 1

def test_begin_command_buffer_failure_is_an_error_not_a_crash():
  r = run_python("""
import numpy as np, vulkan as vk
from tinygrad import Tensor, Device
from tinygrad_vk import queue
x = np.arange(1, 1002, dtype=np.float32)
a = Tensor(x).realize()
Device["VULKAN"].synchronize()
real, calls = queue.lib, []
class Lib:
  def __getattr__(self, k): return getattr(real, k)
  def vkBeginCommandBuffer(self, *args):
    calls.append(1)
    return vk.VK_ERROR_OUT_OF_HOST_MEMORY if len(calls) == 1 else real.vkBeginCommandBuffer(*args)
queue.lib = Lib()
try: (a * 2).numpy(); print("no error")
except MemoryError as e: print("error:", e)
np.testing.assert_array_equal((a * 3).numpy(), x * 3)
np.testing.assert_array_equal(a.numpy(), x)
print("ok")""", {"VULKAN_VALIDATION": "1"})   # recording into a command buffer that never began: a crash, or a validation message
  assert r.returncode == 0 and "error: vkBeginCommandBuffer failed: VK_ERROR_OUT_OF_HOST_MEMORY" in r.stdout and "ok" in r.stdout, \
    r.stdout + r.stderr[-3000:]

# ---- interrupts: a real SIGINT, taken by Python's handler wherever the interpreter checks for signals. The kernels are built
# before: an interrupt that stops tinygrad before a launch leaves that kernel's output unwritten on any device (Tensor.realize
# marks the outputs realized before it runs the schedule), which no backend can change.

def sigint(): signal.raise_signal(signal.SIGINT)

def interrupted(hooks, name:str, before:bool):
  """Hook `name` once: SIGINT just before or just after the real call."""
  def hook(real, *args):
    del hooks[name]
    if before: sigint()
    r = real(*args)
    if not before: sigint()
    return r
  hooks[name] = hook

@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_interrupt_around_submit_loses_nothing(vk_hooks, before):
  q = Device["VULKAN"].queue
  x = data(40009)
  a = Tensor(x).realize()
  (Tensor(data(40009)) * 2 + 1).contiguous().realize()   # built first: the interrupt comes around a launch's submit, whatever the batch size
  c = (a * 2 + 1).contiguous()
  seq = []
  interrupted(vk_hooks, "vkQueueSubmit", before)
  orig = vk_hooks["vkQueueSubmit"]
  vk_hooks["vkQueueSubmit"] = lambda real, *args: (seq.append(q.next_seq - 1), orig(real, *args))[1]
  with pytest.raises(KeyboardInterrupt): c.numpy()
  vk_hooks.clear()
  # the batch was submitted and is tracked (a read waits for it), or is still open and goes with the next submission
  assert q.done_seq >= seq[0] or any(b.seq == seq[0] for b in q.inflight) or (q.cur is not None and q.cur.seq == seq[0])
  np.testing.assert_array_equal(c.numpy(), ref := x * 2 + 1)
  np.testing.assert_array_equal((c - a).numpy(), ref - x)

def test_exception_before_submit_resubmits(vk_hooks):
  # an exception out of the submit call (the call never ran): the batch stays open and goes with the next submission
  x = data(40009)
  a = Tensor(x).realize()
  (Tensor(data(40009)) * 4 - 3).contiguous().realize()   # built first (see above)
  c = (a * 4 - 3).contiguous()
  def fail(real, *args):
    del vk_hooks["vkQueueSubmit"]
    raise KeyboardInterrupt
  vk_hooks["vkQueueSubmit"] = fail
  with pytest.raises(KeyboardInterrupt): c.numpy()
  np.testing.assert_array_equal(c.numpy(), x * 4 - 3)

def test_interrupt_during_wait(vk_hooks):
  x = data(40009)
  a = Tensor(x).realize()
  c = (a * 0.5 + 2).contiguous()
  vk_hooks["vkGetFenceStatus"] = lambda real, *args: vk.VK_NOT_READY   # not done yet, whatever the batch size: the read waits
  def wait(real, *args):
    vk_hooks.clear()
    sigint()
    return real(*args)
  vk_hooks["vkWaitForFences"] = wait
  with pytest.raises(KeyboardInterrupt): c.numpy()
  assert not vk_hooks, "the read should have waited"
  np.testing.assert_array_equal(c.numpy(), x * np.float32(0.5) + np.float32(2))
  np.testing.assert_array_equal((a + 1).numpy(), x + 1)

def test_interrupt_while_recording(vk_hooks):
  # SIGINT inside a launch: taken once the launch is recorded, and the work goes out with the next submission
  x = data(40009)
  a = Tensor(x).realize()
  (a * 9).realize()
  c = (a * 9).contiguous()
  interrupted(vk_hooks, "vkCmdDispatch", before=True)
  with pytest.raises(KeyboardInterrupt): c.realize()
  vk_hooks.clear()
  np.testing.assert_array_equal((a + 2).numpy(), x + 2)
  assert Device["VULKAN"].queue.held == 0

BUSY = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)   # a shell starts background jobs with SIGINT ignored
import numpy as np
from tinygrad import Tensor
x = np.random.default_rng(0).uniform(-1, 1, 100003).astype(np.float32)
t = Tensor(x).realize()
for _ in range(2): t = (t * 1.0001 + 0.5).contiguous().realize()   # every kernel built before "ready"
print("ready", flush=True)
while True:
  for _ in range(3): t = (t * 1.0001 + 0.5).contiguous().realize()
  t.numpy()
"""

def interrupt_once(delay:float) -> str:
  """'' if one SIGINT `delay` seconds into the loop of launches and read-backs ends the process by KeyboardInterrupt within 5 s."""
  import subprocess, time
  p = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "DEV": "VULKAN"})
  assert p.stdout.readline().strip() == "ready", p.communicate()
  time.sleep(delay)
  p.send_signal(signal.SIGINT)
  try: _, err = p.communicate(timeout=5)
  except subprocess.TimeoutExpired:
    p.kill()
    return f"after {delay:.3f} s: still running 5 s after one SIGINT: {p.communicate()[1][-1500:]}"
  # an unhandled KeyboardInterrupt ends Python by SIGINT itself (returncode -2), after the traceback
  return "" if p.returncode == -signal.SIGINT and err.rstrip().endswith("KeyboardInterrupt") else f"after {delay:.3f} s: {p.returncode} {err[-1500:]}"

# the handler is Python's, the same on every driver and renderer: 30 processes once, in the default pass
@pytest.mark.skipif(bool(switched()) or "VK_ICD_FILENAMES" in os.environ, reason="30 processes: runs in the default pass of scripts/test.sh")
def test_one_sigint_stops_a_busy_process():
  # Python prints a KeyboardInterrupt raised inside a finalizer as "Exception ignored" and carries on: tinygrad's UOp and Buffer
  # finalizers run all through this loop, and a press landing in one was lost
  from concurrent.futures import ThreadPoolExecutor
  from util import rng
  with ThreadPoolExecutor(3) as ex: failures = [f for f in ex.map(interrupt_once, rng.uniform(0, 0.4, 30)) if f]
  assert not failures, f"{len(failures)} of 30:\n" + "\n".join(failures)

FINALIZER = """
import gc, signal, time, weakref
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
from tinygrad import Tensor
from tinygrad.helpers import suppress_finalizing
def interrupt():
  signal.raise_signal(signal.SIGINT)
  sum(range(10000))   # Python runs the handler here, inside the finalizer
class InDel:
  def __del__(self): interrupt(); interrupt()   # two presses while held back: one interrupt
class InWrapped:   # tinygrad's finalizers are wrapped so: a signal taken in the wrapper itself has no __del__ frame (as here)
  __del__ = suppress_finalizing(lambda self: interrupt())
class Cycle: pass
def in_del(): InDel()
def in_wrapped(): InWrapped()
def in_finalize(): weakref.finalize(Cycle(), interrupt)
def in_callback():   # a weakref's callback when the last reference goes: no frame says so (sys.unraisablehook does)
  c = Cycle()
  r = weakref.ref(c, lambda _: interrupt())
  del c
refs = []
def in_collection():   # a weakref's callback, called by the collector (the weakref outlives the cycle, or it is not called)
  c = Cycle()
  c.me = c
  refs.append(weakref.ref(c, lambda _: interrupt()))
  del c
  gc.collect()
x = np.random.default_rng(1).uniform(-1, 1, 4099).astype(np.float32)
t = Tensor(x).realize()
for how in (in_del, in_wrapped, in_finalize, in_callback, in_collection):
  start = time.monotonic()
  try:
    how()
    while time.monotonic() - start < 3: t = (t + 1).contiguous().realize()
    print(how.__name__, "not interrupted", flush=True)
  except KeyboardInterrupt: print(how.__name__, "interrupted", flush=True)
  try:   # one press is one KeyboardInterrupt: none more while the work goes on, 30x the 10 ms a held-back one waits
    start = time.monotonic()
    while time.monotonic() - start < 0.3: t = (t + 1).contiguous().realize()
  except KeyboardInterrupt: print(how.__name__, "a second KeyboardInterrupt", flush=True)
d = t.numpy() - x
assert np.allclose(d, np.round(d[0])), d   # every launch before an interrupt kept, none half done
print("done", flush=True)
"""

def test_sigint_inside_a_finalizer_is_delivered():
  r = run_python(FINALIZER, timeout=HANG_S)
  want = [f"{how} interrupted" for how in ("in_del", "in_wrapped", "in_finalize", "in_callback", "in_collection")] + ["done"]
  assert r.returncode == 0 and r.stdout.split("\n")[:6] == want and "Exception ignored" not in r.stderr, r.stdout + r.stderr[-3000:]

HANDLERS = """
import os, signal
signal.signal(signal.SIGINT, signal.default_int_handler)   # Python's own (a shell starts background jobs with SIGINT ignored)
from tinygrad import Tensor
own = lambda *a: None
if os.environ["HANDLER"] == "own": signal.signal(signal.SIGINT, own)
want = own if os.environ["HANDLER"] == "own" else signal.default_int_handler
assert (Tensor([1.0], device="CPU") + 1).tolist() == [2.0]
print(signal.getsignal(signal.SIGINT) is want)
assert (Tensor([1.0], device="VULKAN") * 2).tolist() == [2.0]
print(signal.getsignal(signal.SIGINT) is want)
"""

@pytest.mark.parametrize("handler", ["python", "own"])
def test_sigint_handler_left_alone(handler):
  # a program that never uses VULKAN keeps Python's handler (VULKAN's holds it back once a device is open); one that installed its own keeps it
  r = run_python(HANDLERS, {"DEV": "CPU", "HANDLER": handler})
  assert r.returncode == 0 and r.stdout.split() == ["True", "False" if handler == "python" else "True"], r.stdout + r.stderr[-3000:]

# ---- processes and threads

FORK = """
import os, numpy as np
from tinygrad import Tensor
x = np.arange(1, 1002, dtype=np.float32)
t = Tensor(x).realize()
np.testing.assert_array_equal((t * 2).numpy(), x * 2)
pid = os.fork()
if pid == 0:
  try: print("child", "correct" if np.array_equal((t * 3 + 1).numpy(), x * 3 + 1) else "WRONG", flush=True)
  except RuntimeError as e: print("child error:", e, flush=True)
  os._exit(0)
os.waitpid(pid, 0)
np.testing.assert_array_equal((t * 5).numpy(), x * 5)
print("parent ok", flush=True)
"""

def test_fork_after_use():
  r = run_python(FORK, timeout=HANG_S)
  assert r.returncode == 0 and "parent ok" in r.stdout, r.stdout + r.stderr[-3000:]
  # the child refuses the parent's device (lavapipe, a CPU driver, might well compute right in a child: the guard says no)
  assert "child error: VULKAN" in r.stdout and "os.fork()" in r.stdout, r.stdout + r.stderr[-3000:]

POOL = """
import multiprocessing as mp, sys, numpy as np
from tinygrad import Tensor
def work(i):
  try: return "ok" if (Tensor(np.arange(100, dtype=np.float32)) * i).sum().item() == 4950 * i else "WRONG"
  except RuntimeError as e: return "error: " + str(e)
if __name__ == "__main__":
  assert (Tensor([1.0, 2.0]) * 2).tolist() == [2.0, 4.0]   # the parent used VULKAN
  with mp.get_context(sys.argv[1]).Pool(2) as p: res = p.map_async(work, range(1, 5)).get(240)
  print(res)
  # spawned workers open the device themselves; forked ones inherit the parent's, which they must refuse
  assert all(r == "ok" for r in res) if sys.argv[1] == "spawn" else all(r.startswith("error: VULKAN") and "os.fork()" in r for r in res), res
  assert (Tensor([1.0, 2.0]) * 3).tolist() == [3.0, 6.0]
  print("pool ok")
"""

@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_pool(tmp_path, method):
  import subprocess
  (script := tmp_path / "pool.py").write_text(POOL)
  r = subprocess.run([sys.executable, str(script), method], capture_output=True, text=True, timeout=HANG_S, env={**os.environ, "DEV": "VULKAN"})
  assert r.returncode == 0 and "pool ok" in r.stdout, r.stdout + r.stderr[-3000:]

THREADS = """
import threading, numpy as np
from tinygrad import Tensor, Device
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program
dev, N = Device["VULKAN"], 4099
t = (Tensor.empty(N) * 1.5 + Tensor.empty(N)).contiguous()
prg = to_program(next(c for c in t.schedule_linear().src if c.src[0].op is Ops.SINK).src[0], dev.renderer)
kernel, (gs, ls) = dev.runtime(prg.to_elf()), prg.arg.launch_dims({})
alloc, results = dev.allocator, {}
def work(k):
  # the backend's surface, as tinygrad drives it: allocate, upload, launch, read back, free
  try:
    x, y = (np.random.default_rng(k).uniform(-1, 1, N).astype(np.float32) for _ in range(2))
    a, b, out = (alloc.alloc(4 * N) for _ in range(3))
    alloc._copyin(a, memoryview(x)); alloc._copyin(b, memoryview(y))
    for i in range(40):
      kernel(out, a, b, global_size=gs, local_size=ls)
      x = x * np.float32(1.5) + y
      if i % 4 == 3:
        got = np.empty(N, np.float32)
        alloc._copyout(memoryview(got), out)
        np.testing.assert_array_equal(got, x)
      a, out = out, a
    for buf in (a, b, out): alloc.free(buf, 4 * N)
    results[k] = "ok"
  except Exception as e: results[k] = repr(e)
ts = [threading.Thread(target=work, args=(k,), daemon=True) for k in (1, 2, 3)]
for t in ts: t.start()
for t in ts: t.join(200)
print("hung" if any(t.is_alive() for t in ts) else sorted(results.items()), flush=True)
"""

def test_threads_launch_at_once():
  # tinygrad itself is not thread-safe above the backend (its disk cache connection belongs to the thread that opened it, and a
  # Context set by one thread is seen by all), so the threads drive the runtime directly
  r = run_python(THREADS, timeout=HANG_S)
  assert r.returncode == 0 and r.stdout.strip() == "[(1, 'ok'), (2, 'ok'), (3, 'ok')]", r.stdout + r.stderr[-3000:]

# ---- the SPIR-V disk cache

@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_spirv_cache_entry_is_recompiled(how):
  comp = Device["VULKAN"].compiler
  k = float(np.random.default_rng().integers(1, 1 << 20)) + 0.5   # a kernel of its own: no other test reads its cache entry
  src = kernel_sources(Tensor(data(1031)) * k + 1)[0]             # compiles it: now in the disk cache
  damage_entry(comp.cachekey, src, how)
  assert comp.compile_cached(src) == comp.compile(src), "the damaged entry should have been compiled again"
  assert comp.compile_cached(src) == comp.compile(src), "and replaced"

CACHED_RUN = """
import os, sys, numpy as np
sys.path.insert(0, "tests")
from tinygrad import Tensor, Device
from util import kernel_sources, DAMAGE, damage_entry
x = np.linspace(-3, 3, 1031, dtype=np.float32)
for i, how in enumerate(DAMAGE):   # a kernel per kind of damage, in a disk cache of its own
  if os.environ["STEP"] == "damage": damage_entry(Device["VULKAN"].compiler.cachekey, kernel_sources(Tensor(x) * (i + 1.25) + 1)[0], how)
  else: print(how, np.array_equal((Tensor(x) * (i + 1.25) + 1).numpy(), x * np.float32(i + 1.25) + 1), flush=True)
"""

def test_damaged_cache_entries_in_a_new_process(tmp_path):
  # a new process reads the damaged entries (this one would use the programs it already built): correct results, no hang or crash
  env = {"CACHEDB": str(tmp_path / "cache.db")}
  r = run_python(CACHED_RUN, {**env, "STEP": "damage"})
  assert r.returncode == 0, r.stdout + r.stderr[-3000:]
  r = run_python(CACHED_RUN, {**env, "STEP": "run"})
  assert r.returncode == 0 and r.stdout.split() == [w for how in DAMAGE for w in (how, "True")], r.stdout + r.stderr[-3000:]

# ---- setup errors

def test_missing_tools_are_one_readable_line(tmp_path):
  # the GLSL renderer needs glslang and spirv-val; spirv-val is needed wherever VULKAN_VALIDATE_SPIRV=1 asks for it
  import shutil
  (bin_ := tmp_path / "bin").mkdir()
  (bin_ / "glslangValidator").symlink_to(shutil.which("glslangValidator"))
  code = "from tinygrad import Tensor; print((Tensor([1.0, 2.0]) * 3).tolist())"
  for path, dev, line in ((bin_, "VULKAN:GLSL", "RuntimeError: VULKAN: spirv-val not found on PATH; install spirv-tools"),
                          (tmp_path / "nothing", "VULKAN:GLSL", "RuntimeError: VULKAN: glslangValidator not found on PATH; install glslang-tools"),
                          (tmp_path / "nothing", "VULKAN:SPIRV", "RuntimeError: VULKAN: spirv-val not found on PATH; install spirv-tools")):
    r = run_python(code, {"PATH": str(path), "CACHELEVEL": "0", "DEV": dev, "VULKAN_VALIDATE_SPIRV": "1"})
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1] == line, (dev, r.stderr[-2000:])

@pytest.mark.parametrize("name", ["VULKAN:abc", "VULKAN:-1", "VULKAN:1.5"])
def test_bad_device_name(name):
  with pytest.raises(RuntimeError, match=f"{name}.*VULKAN:<n>"): Device[name]

@pytest.mark.parametrize("var,value", [("VULKAN_BATCH", "abc"), ("VULKAN_BATCH", "0"), ("VULKAN_TIMEOUT_S", "soon"), ("VULKAN_TIMEOUT_S", "-1"),
                                       ("VULKAN_DISABLE", "f16,bogus")])
def test_bad_switch_names_the_variable(monkeypatch, var, value):
  monkeypatch.setenv(var, value)
  with pytest.raises((RuntimeError, ValueError), match=var) as e: Device["VULKAN:15"]
  assert repr(value) in str(e.value) or value.split(",")[-1] in str(e.value)

def test_bad_device_list():
  r = run_python("from tinygrad import Tensor; Tensor([1.0]).numpy()", {"VULKAN_DEVICES": "-1"})
  assert r.returncode != 0 and "VULKAN_DEVICES='-1'" in r.stderr.strip().splitlines()[-1], r.stderr[-2000:]
