"""VULKAN_DUMP=<dir> writes each kernel's source, SPIR-V and readable SPIR-V, with either renderer."""
import glob, os, shutil
import pytest
from util import run_python

@pytest.mark.parametrize("ren", ["SPIRV", "GLSL"])
def test_dump(tmp_path, ren):
  if ren == "GLSL" and shutil.which("glslangValidator") is None: pytest.skip("the GLSL renderer needs glslang-tools")
  r = run_python("from tinygrad import Tensor; import numpy as np; print((Tensor(np.arange(37, dtype=np.float32)) * 3).sum().numpy())",
                 {"VULKAN_DUMP": str(tmp_path), "DEV": f"VULKAN:{ren}"})
  assert r.returncode == 0, r.stderr
  spvs = glob.glob(os.path.join(tmp_path, "*.spv"))
  assert spvs, "nothing dumped"
  for spv in spvs:
    base = spv[:-len(".spv")]
    assert open(spv, "rb").read()[:4] == b"\x03\x02\x23\x07"      # SPIR-V magic
    assert "OpEntryPoint GLCompute" in open(base + ".spvasm").read()
    # the GLSL renderer's source is GLSL; the SPIR-V renderer's is the .spvasm itself
    assert os.path.exists(base + ".comp") == (ren == "GLSL")
    if ren == "GLSL": assert open(base + ".comp").read().startswith("#version 450")
