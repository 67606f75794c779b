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
