"""Every test runs on DEV=VULKAN (DEV=VULKAN:GLSL for the GLSL renderer) unless it says otherwise, every SPIR-V module checked by
spirv-val; with VULKAN_VALIDATION=1 any validation message fails the test."""
import os
os.environ.setdefault("DEV", "VULKAN")
os.environ.setdefault("VULKAN_VALIDATE_SPIRV", "1")   # spirv-val checks every module the SPIR-V renderer makes
import pytest

@pytest.fixture(autouse=True)
def _validation_silent():
  from tinygrad_vk.instance import validation_messages
  validation_messages.clear()
  yield
  from tinygrad import Device
  for d in list(Device._opened_devices):
    if d.startswith("VULKAN"): Device[d].synchronize()
  assert not validation_messages, "Vulkan validation layer:\n" + "\n".join(validation_messages)
