"""Flag "early" (tinygrad_vk/__init__.py, device.py `compiled`): each kernel's pipeline is made, and its warm-up submitted, as soon as
tinygrad has compiled it, before the rest of its schedule compiles, where tinygrad's compile workers leave a core free (here
PARALLEL=0). Every element is checked against numpy; the order checks fail under VULKAN_DISABLE=early."""
import traceback
import numpy as np
import pytest
import util
from tinygrad import Tensor
from tinygrad.helpers import Context
from tinygrad_vk.program import VulkanProgram

def program(*xs):
  """Several kernels in one schedule: a matmul, reductions of its output, an elementwise op."""
  a, b = xs
  t = (a @ b.T).relu().contiguous() if isinstance(a, Tensor) else np.maximum(a @ b.T, 0)
  return t.sum(axis=1) + (a.exp() if isinstance(a, Tensor) else np.exp(a)).sum() + t.max()

@pytest.fixture
def made(monkeypatch):
  """Per VulkanProgram made: whether tinygrad was still compiling its schedule (lower_and_compile on the stack)."""
  out: list[bool] = []
  init = VulkanProgram.__init__
  def record(self, *a, **kw):
    out.append(any(f.name == "lower_and_compile" for f in traceback.extract_stack()))
    init(self, *a, **kw)
  monkeypatch.setattr(VulkanProgram, "__init__", record)
  return out

@pytest.mark.parametrize("shape", [(37, 53), (5, 300)])
def test_pipelines_made_while_compiling(made, shape):
  xs = [util.data((2, *shape))[i] for i in range(2)]
  with Context(PARALLEL=0): out = program(*[Tensor(x) for x in xs]).numpy()
  np.testing.assert_allclose(out, program(*xs), rtol=1e-4)
  assert len(made) >= 2 and all(made), made   # every one while compiling (at its first launch without the flag)

def test_failed_early_pipeline_raises_and_loses_nothing(made, monkeypatch):
  # a pipeline that fails while tinygrad compiles raises out of the realize() that would have launched it; the next one runs right
  init, fails = VulkanProgram.__init__, []
  def first_fails(self, *a, **kw):
    if not fails:
      fails.append(traceback.extract_stack())
      raise RuntimeError("injected: vkCreateComputePipelines failed")
    init(self, *a, **kw)
  monkeypatch.setattr(VulkanProgram, "__init__", first_fails)
  xs = [util.data((2, 29, 41))[i] for i in range(2)]
  with Context(PARALLEL=0):
    with pytest.raises(RuntimeError, match="injected"): program(*[Tensor(x) for x in xs]).realize()
    out = program(*[Tensor(x) for x in xs]).numpy()
  np.testing.assert_allclose(out, program(*xs), rtol=1e-4)
  assert any(f.name == "lower_and_compile" for f in fails[0])   # it failed while compiling

def test_kernel_compiled_outside_a_schedule_makes_no_pipeline(made):
  # to_program called to look at a kernel (tests, tools) compiles it only: no pipeline for a kernel that may never launch, nor for one
  # compiled for another renderer's capabilities
  from tinygrad import Device
  from tinygrad.codegen import to_program
  ast = (Tensor(util.data((3, 71))).exp() * 2).schedule_linear().src[-1].src[0]
  with Context(PARALLEL=0): prg = to_program(ast, Device["VULKAN"].renderer)
  assert prg.src[-1].arg and made == []
