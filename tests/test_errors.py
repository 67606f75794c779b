"""Bad input gets a clear error, raised before any work is queued."""
import numpy as np
import pytest
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer, CompileError
from tinygrad_vk.compiler import GLSLCompiler
from tinygrad_vk.renderer.abi import KernelABI
from tinygrad_vk.renderer import passes
from util import data, run_python, glsl_program, kernel_programs

BAD = """#version 450
layout(local_size_x=1) in;
layout(set=0, binding=0, std430) buffer B0 { float data0[]; };
void main() {
  float x = 1.0;
  data0[0] = x + undefined_thing;
}
"""

def test_compile_error_shows_message_and_lines():
  with pytest.raises(CompileError) as e:
    GLSLCompiler().compile(BAD)
  msg = str(e.value)
  assert "undefined_thing" in msg and "undeclared identifier" in msg
  assert ">   6 |   data0[0] = x + undefined_thing;" in msg   # the culprit line, numbered and marked
  assert "   5 |   float x = 1.0;" in msg                     # with context around it

SIMPLE = BAD.replace(" + undefined_thing", "")

def test_launch_over_workgroup_count_limit():
  prg = glsl_program(SIMPLE)
  buf = Buffer("VULKAN", 4, dtypes.float).allocate()
  limit = Device["VULKAN"].caps.wgcount
  for size in ((1, limit[1] + 1, 1), (limit[0] + 5, 1, 1)):   # a kernel written without _xbase (renderer/abi.py XBASE): x is a limit too
    with pytest.raises(RuntimeError, match="over the limit"): prg(buf._buf, global_size=size, local_size=(1, 1, 1))

def test_launch_past_the_x_limit_is_split(monkeypatch):
  # tinygrad's kernels whose launch x may pass maxComputeWorkGroupCount[0] add a push constant to gl_WorkGroupID.x and are dispatched
  # at most the limit at a time. Before, vkCmdDispatchBase took bases past the limit (VUID-vkCmdDispatchBase-baseGroupX-00421,
  # reported by the 1.4 validation layer). Without the "wide" path, which would join the workgroups below the limit
  monkeypatch.setattr(passes, "SINK_PASSES", tuple(p for p in passes.SINK_PASSES if p[0] != "wide"))
  limit = Device["VULKAN"].caps.wgcount[0]
  n = next(k for k in range(limit + 2, 2 * limit) if all(k % d for d in range(2, int(k ** 0.5) + 1)))   # a prime: one invocation a workgroup
  x = data(n)
  [p] = kernel_programs(Tensor(x).abs().sqrt() + 1)
  note = next(l for l in p.src[2].arg.splitlines() if "tinygrad_vk.abi:" in l)   # the kernel's ABI (spv.KernelMeta) has _xbase
  assert p.arg.global_size[0] > limit and KernelABI.decode(note.split("tinygrad_vk.abi:")[1].split(":")).xbase is not None, note
  np.testing.assert_allclose((Tensor(x).abs().sqrt() + 1).numpy(), np.sqrt(np.abs(x)) + 1, rtol=1e-6)

def test_local_size_over_limit():
  inv = Device["VULKAN"].caps.wginv
  with pytest.raises(RuntimeError, match="over the device limits"):
    glsl_program(SIMPLE.replace("local_size_x=1", f"local_size_x={inv}, local_size_y=2"))

def test_no_driver_is_one_readable_line():
  r = run_python("from tinygrad import Tensor; Tensor([1.0]).numpy()",
                 {"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"})
  assert r.returncode != 0
  assert "RuntimeError: VULKAN: no Vulkan driver found; install one (mesa-vulkan-drivers gives lavapipe on any CPU)" in r.stderr, r.stderr
