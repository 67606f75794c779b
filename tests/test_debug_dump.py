"""VULKAN_DUMP=<dir> writes each kernel's GLSL, SPIR-V and disassembly."""
import glob, os
from util import run_python

def test_dump(tmp_path):
  r = run_python("from tinygrad import Tensor; import numpy as np; print((Tensor(np.arange(37, dtype=np.float32)) * 3).sum().numpy())",
                 {"VULKAN_DUMP": str(tmp_path)})
  assert r.returncode == 0, r.stderr
  comps = glob.glob(os.path.join(tmp_path, "*.comp"))
  assert comps, "no GLSL dumped"
  for c in comps:
    base = c[:-len(".comp")]
    assert open(c).read().startswith("#version 450")
    assert open(base + ".spv", "rb").read()[:4] == b"\x03\x02\x23\x07"      # SPIR-V magic
    assert "OpEntryPoint GLCompute" in open(base + ".spvasm").read()
