"""GPU timings: DEBUG=2 kernel times, PROFILE=1 device ranges on tinygrad's timeline, and BEAM search with timed kernels."""
import re
from tinygrad.helpers import ansistrip
from util import run_python, glsl_program, SIMPLE_GLSL

def test_debug2_prints_gpu_times():
  r = run_python("from tinygrad import Tensor; import numpy as np; print((Tensor(np.arange(999, dtype=np.float32)) * 2).sum().item())",
                 {"DEBUG": "2"})
  assert r.returncode == 0, r.stderr
  lines = [ansistrip(l) for l in r.stdout.splitlines() if "VULKAN" in l and " tm " in l and "copy" not in l]
  assert lines and all(re.search(r" tm +[0-9.]+(us|ms)/", l) for l in lines), r.stdout

def test_profile_events():
  r = run_python("""
import numpy as np
from tinygrad import Tensor, TinyJit, Device
from tinygrad.device import Compiled, ProfileDeviceEvent, ProfileGraphEvent
from tinygrad.helpers import ProfileRangeEvent
@TinyJit
def f(a): return ((a + 1).contiguous() * 2).sum().realize()
a = Tensor(np.arange(1000, dtype=np.float32)).realize()
(a * 3).realize()
for _ in range(4): f(a)
Device["VULKAN"].synchronize()
ev = Compiled.profile_events
assert any(isinstance(e, ProfileDeviceEvent) and e.device == "VULKAN" for e in ev)
ranges = [e for e in ev if isinstance(e, ProfileRangeEvent) and e.device == "VULKAN"]
assert ranges and all(e.en >= e.st for e in ranges)
graphs = [e for e in ev if isinstance(e, ProfileGraphEvent)]
assert graphs and all(len(g.sigs) == 2 * len(g.ents) and all(b >= a for a, b in zip(g.sigs, g.sigs[1:])) for g in graphs)
print("ok", len(ranges), len(graphs))""", {"PROFILE": "1", "VIZ": "0"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_beam_search_runs():
  r = run_python("""
import numpy as np
from tinygrad import Tensor
a, b = np.random.default_rng(0).random((37, 29), dtype=np.float32), np.random.default_rng(1).random((29, 23), dtype=np.float32)
np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-5)
print("ok")""", {"BEAM": "1", "IGNORE_BEAM_CACHE": "1"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_wait_without_timestamps_returns_wall_time():
  # some queues (MoltenVK on some Macs) have no timestamps: wait=True then times the fence wait instead of raising
  from tinygrad import Device, dtypes
  from tinygrad.device import Buffer
  prg, buf, q = glsl_program(SIMPLE_GLSL), Buffer("VULKAN", 4, dtypes.float).allocate(), Device["VULKAN"].queue
  bits, q.timestamp_bits = q.timestamp_bits, 0
  try: t = prg(buf._buf, global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True)
  finally: q.timestamp_bits = bits
  assert isinstance(t, float) and t > 0

def test_first_timed_launch_excludes_lazy_pipeline_compile(vk_hooks):
  # lavapipe compiles a pipeline at its first dispatch: an empty dispatch recorded when the Program is built runs that compile before
  # the first timed launch, which BEAM and DEBUG=2 time. What happened, in command order: the new pipeline was bound and dispatched
  # with no workgroups before the timestamp that opens its first launch (without the warm-up that launch's range held ~20 ms of
  # LLVM compile).
  from tinygrad import Tensor, Device, dtypes
  from tinygrad.uop.ops import Ops
  from tinygrad.codegen import to_program
  from tinygrad.device import Buffer
  dev, log = Device["VULKAN"], []
  for name in ("vkCmdBindPipeline", "vkCmdDispatch", "vkCmdWriteTimestamp"):
    vk_hooks[name] = lambda real, *args, name=name: (log.append((name, args)), real(*args))[1]
  t = (Tensor.empty(4097) * 1.37 + Tensor.empty(4097).exp()).contiguous()
  prg = to_program(next(c for c in t.schedule_linear().src if c.src[0].op is Ops.SINK).src[0], dev.renderer)
  bufs = [Buffer("VULKAN", 4097, dtypes.float).allocate()._buf for _ in range(3)]
  gs, ls = prg.arg.launch_dims({})
  r = dev.runtime(prg.to_elf())
  assert r(*bufs, global_size=gs, local_size=ls, wait=True) > 0
  pipe = r.pipelines[r.aligned]
  binds = [i for i, (n, a) in enumerate(log) if n == "vkCmdBindPipeline" and a[2] == pipe]
  assert len(binds) == 2 and log[binds[0] + 1] == ("vkCmdDispatch", (log[binds[0]][1][0], 0, 0, 0)), log
  stamps = [i for i, (n, _) in enumerate(log) if n == "vkCmdWriteTimestamp"]
  assert stamps and binds[0] < stamps[0] < binds[1] < stamps[1], log
