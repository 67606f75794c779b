"""Vulkan 1.1 devices: the API version in use, the extension structs and entry points, the SPIR-V version, what is refused.
On lavapipe (Vulkan 1.3) VULKAN_PROFILE lowers the version the instance and device are created with, so the validation layer
checks the Vulkan 1.1 rules for real."""
import pytest
from tinygrad import Device
from tinygrad_vk.caps import Caps, spirv_target, SPIRV_1_3
from tinygrad_vk.instance import PhysicalDevice, select_devices, PORTABILITY_SUBSET
from util import run_python

def fake_phys(vk:int, extensions=(), name="dev", type_=2, index=0) -> PhysicalDevice:
  p = object.__new__(PhysicalDevice)
  p.vk, p.api_version, p.extensions, p.name, p.type, p.index = vk, (vk // 10) << 22 | (vk % 10) << 12 | 68, set(extensions), name, type_, index
  return p

def test_vulkan10_refused_naming_its_version():
  with pytest.raises(RuntimeError, match=r"no device supports Vulkan 1.1 \(old: 1.0.68\)"): select_devices([fake_phys(10, name="old")], "")
  with pytest.raises(RuntimeError, match=r"old supports Vulkan 1.0.68; tinygrad_vk needs Vulkan 1.1"):
    select_devices([fake_phys(10, name="old")], "0")
  assert [p.name for p in select_devices([fake_phys(10, name="old"), fake_phys(11, name="new", index=1)], "")] == ["new"]

def test_extensions_enabled_on_vulkan11():
  # on Vulkan 1.1 a feature of a later core version comes with its extension; from 1.2 on with none; only what caps uses
  caps = Caps(frozenset({"s8", "i8", "s16", "bda", "nan32"}))
  exts = ["VK_KHR_8bit_storage", "VK_KHR_shader_float16_int8", "VK_KHR_buffer_device_address", "VK_KHR_shader_float_controls"]
  assert sorted(fake_phys(11, exts).device_features(caps)[1]) == sorted(exts)
  assert fake_phys(12, exts).device_features(caps)[1] == []
  assert fake_phys(11, exts).device_features(Caps(frozenset({"s16"})))[1] == []   # 16-bit storage is core in 1.1
  feats, _, keep = fake_phys(11, exts).device_features(caps)
  assert feats.features.shaderInt64 == 0 and len(keep) == 4   # 16-bit storage, 8-bit storage, float16/int8, buffer device address

def test_portability_subset_enabled_where_advertised():
  assert PORTABILITY_SUBSET in fake_phys(12, [PORTABILITY_SUBSET]).device_features(Caps())[1]
  assert PORTABILITY_SUBSET not in fake_phys(12, []).device_features(Caps())[1]

def test_info_shows_version_and_spirv():
  r = run_python("import sys; from tinygrad_vk.__main__ import main; sys.argv = ['tinygrad_vk', 'info']; sys.exit(main())",
                 {"VULKAN_PROFILE": "android2022"})
  assert r.returncode == 0 and "1.1 in use" in r.stdout and "SPIR-V 1.3 (target environment vulkan1.1)" in r.stdout, r.stdout + r.stderr

# every optional feature a Vulkan 1.1 device can have through extensions, and buffers over 4 KiB passed by device address: the
# kernels are SPIR-V 1.3 with the SPV_KHR_* extensions declared, and run under validation with no message
RICH_11 = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad_vk.instance import validation_messages
from util import data, kernel_sources
d = Device["VULKAN"]
assert d.caps.vk == 11 and d.renderer.compiler.target.version == (1, 3), d.caps
a, b = data(3001, lo=-4, hi=4), data(3001, lo=-4, hi=4)
c = data(3001, np.int8)
ta, tb, tc = Tensor(a).realize(), Tensor(b).realize(), Tensor(c).realize()
def f(x, y):
  return ((x * y).cast(dtypes.half).contiguous().cast(dtypes.float) + (x.cast(dtypes.int8) * 2).cast(dtypes.float)
          + x.cast(dtypes.double).exp2().cast(dtypes.float) + (x.cast(dtypes.int64) * 1000003).cast(dtypes.float) / 1e6
          + (x != x).where(1.0, 0.0) + tc.cast(dtypes.float))
srcs = kernel_sources(f(ta, tb))
print("\\n".join(l for s in srcs for l in s.splitlines() if "OpExtension" in l or "#extension" in l or "SPIR-V" in l))
with np.errstate(all="ignore"):
  ref = ((a * b).astype(np.float16).astype(np.float32) + (a.astype(np.int8) * 2).astype(np.float32) + np.exp2(a.astype(np.float64)).astype(np.float32)
         + (a.astype(np.int64) * 1000003).astype(np.float32) / 1e6 + c)
np.testing.assert_allclose(f(ta, tb).numpy(), ref, rtol=2e-3, atol=2e-3)
d.synchronize()
assert not validation_messages, validation_messages
print("ok")"""

@pytest.mark.parametrize("ren", ["SPIRV", "GLSL"])
def test_vulkan11_features_through_extensions(ren):
  real = Device["VULKAN"].phys.flags()
  if not {"s8", "i8", "f16", "i64", "f64", "bda"} <= real: pytest.skip("the device lacks one of 8/16-bit storage, int8, float16, int64, float64, bda")
  r = run_python(RICH_11, {"VULKAN_PROFILE": "min,f16,i8,i64,f64,bda,nan32", "VULKAN_VALIDATION": "1", "DEV": f"VULKAN:{ren}",
                           "VULKAN_MAX_STORAGE_RANGE": "4096", "VULKAN_REACH": "0"})   # the address path, whatever was measured
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
  if ren == "SPIRV":
    assert "SPIR-V 1.3" in r.stdout
    for ext in ("SPV_KHR_8bit_storage", "SPV_KHR_physical_storage_buffer", "SPV_KHR_float_controls"):
      assert f'OpExtension "{ext}"' in r.stdout, r.stdout

def test_spirv13_for_vulkan11():
  assert spirv_target(Caps(vk=11)) is SPIRV_1_3 and spirv_target(Caps(vk=13)).version == (1, 5)
  assert SPIRV_1_3.word == 0x00010300 and not SPIRV_1_3.core("SPV_KHR_8bit_storage") and SPIRV_1_3.core("SPV_KHR_16bit_storage")
