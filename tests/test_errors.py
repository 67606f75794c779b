"""Bad input gets a clear error, raised before any work is queued."""
import pytest
from tinygrad import Device, dtypes
from tinygrad.device import Buffer, CompileError
from tinygrad_vk.compiler import GLSLCompiler
from util import run_python, glsl_program

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
  with pytest.raises(RuntimeError, match="over the limit"):
    prg(buf._buf, global_size=(1, limit[1] + 1, 1), local_size=(1, 1, 1))
  prg(buf._buf, global_size=(limit[0] + 5, 1, 1), local_size=(1, 1, 1), wait=True)   # x past the limit is split, not refused

def test_local_size_over_limit():
  inv = Device["VULKAN"].caps.wginv
  with pytest.raises(RuntimeError, match="over the device limits"):
    glsl_program(SIMPLE.replace("local_size_x=1", f"local_size_x={inv}, local_size_y=2"))

def test_no_driver_is_one_readable_line():
  r = run_python("from tinygrad import Tensor; Tensor([1.0]).numpy()", {"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"})
  assert r.returncode != 0
  assert "RuntimeError: VULKAN: no Vulkan driver found; install one (mesa-vulkan-drivers gives lavapipe on any CPU)" in r.stderr, r.stderr
