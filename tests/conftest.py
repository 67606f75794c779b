"""Every test runs on DEV=VULKAN (DEV=VULKAN:GLSL for the GLSL renderer) unless it says otherwise, every SPIR-V module checked by
spirv-val; with VULKAN_VALIDATION=1 any validation message fails the test."""
import os
os.environ.setdefault("DEV", "VULKAN")
os.environ.setdefault("VULKAN_VALIDATE_SPIRV", "1")   # spirv-val checks every module the SPIR-V renderer makes
import signal
import pytest

# a shell starts a background job with SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the interrupt tests
# need it, set before the first device is opened (the queue's interrupt handling wraps the handler it finds then)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN: signal.signal(signal.SIGINT, signal.default_int_handler)

# the longest tests (pytest --durations, in every pass of scripts/test.sh) go first: under pytest -n each worker then ends on short
# ones, not one worker running a 30-second test alone at the end
FIRST = ("test_half_models.py::", "test_loops.py::test_conv_net_gradient", "test_faults.py::test_one_sigint", "test_upstream_tiny.py::",
         "test_address.py::test_gpt2_small_by_address", "test_allocation.py::test_ten_thousand", "every_dtype[dtypes.long]",
         "every_dtype[dtypes.ulong]", "test_transcendental[dtypes.half]", "test_random_program[22]", "test_int64_vars",
         "test_loops_nested_through_a_dependency", "test_past_range_both_choices", "test_in_a_thread")
def pytest_collection_modifyitems(items):
  items.sort(key=lambda item: not any(f in item.nodeid for f in FIRST))   # stable: the rest keep their order

@pytest.fixture(autouse=True)
def _seeded(request):
  from util import rng
  rng.seed(request.node.nodeid)

@pytest.fixture(autouse=True)
def _validation_silent():
  from tinygrad_vk.instance import validation_messages
  validation_messages.clear()
  yield
  from tinygrad import Device
  for d in list(Device._opened_devices):
    if d.startswith("VULKAN") and Device[d].queue.lost is None: Device[d].synchronize()
  assert not validation_messages, "Vulkan validation layer:\n" + "\n".join(validation_messages)

@pytest.fixture
def vk_hooks(monkeypatch):
  """Fault injection: hooks[name] = fn(real_function, *args) replaces that Vulkan call in every runtime module (see util.LibHooks)."""
  from tinygrad_vk import vk, queue, program, graph, memory, device
  from util import LibHooks
  hooks = LibHooks(vk.lib)
  for m in (queue, program, graph, memory, device): monkeypatch.setattr(m, "lib", hooks)
  return hooks
