"""GPU timings: DEBUG=2 kernel times, PROFILE=1 device ranges on tinygrad's timeline, and BEAM search with timed kernels."""
import re
import pytest
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

def test_first_timed_launch_excludes_lazy_pipeline_compile():
  # lavapipe compiles a pipeline at its first dispatch; an empty dispatch recorded when the Program is built takes that cost out
  # of the first timed launch, which BEAM uses to rank candidates. Before: the first GPU time included ~20 ms of LLVM compile.
  # a leaked compile adds ~20 ms to every fresh process, a loaded host may stretch one run: the fastest of up to 3 runs counts
  for _ in range(3):
    r = run_python(FIRST_LAUNCH, {"MESA_SHADER_CACHE_DISABLE": "true"})
    assert r.returncode == 0, r.stderr
    if "llvmpipe" not in r.stdout: pytest.skip("only llvmpipe compiles pipelines lazily here")
    if (first_ms := float(r.stdout.split("first_ms")[1].split()[0])) < 5: break
  assert first_ms < 5, f"first launch took {first_ms} ms of GPU time: the pipeline compile leaked into it"

FIRST_LAUNCH = """
import random
from tinygrad import Tensor, Device, dtypes
from tinygrad.uop.ops import Ops
from tinygrad.codegen import to_program
from tinygrad.device import Buffer
dev = Device["VULKAN"]
t = (Tensor.empty(4097) * random.uniform(1, 2) + Tensor.empty(4097).exp()).contiguous()
prg = to_program(next(c for c in t.schedule_linear().src if c.src[0].op is Ops.SINK).src[0], dev.renderer)
bufs = [Buffer("VULKAN", 4097, dtypes.float).allocate()._buf for _ in range(3)]
gs, ls = prg.arg.launch_dims({})
r = dev.runtime(prg.to_elf())
print("first_ms", r(*bufs, global_size=gs, local_size=ls, wait=True) * 1e3, "driver", dev.phys.driver)"""
