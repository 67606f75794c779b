"""VULKAN_PROFILE: a device made to behave like a poorer one, in the capability string, at vkCreateDevice and in the runtime."""
import pytest
from tinygrad import Device
from tinygrad_vk.caps import Caps, apply_profile, profile_vk, with_requirements, spirv_target, PROFILES, ALIASES
from util import run_python

RICH = Caps(frozenset({"s8", "i8", "s16", "i16", "f16", "i64", "f64", "nan16", "nan32", "nan64", "bda", "vec"}), align=16,
            wgsize=(1024, 1024, 1024), wginv=1024, smem=65536, pc=256, bufs=32, range=1 << 32, allocs=1 << 32, vk=13)

def test_min_lowers_everything():
  c = apply_profile(RICH, "min")
  assert c.flags == {"vec"}
  assert (c.align, c.wgsize, c.wginv, c.smem, c.pc, c.bufs, c.range, c.allocs) == (256, (128, 128, 64), 128, 16384, 128, 4, 1 << 27, 4096)
  assert c.vk == 11 and spirv_target(c).version == (1, 3) and spirv_target(RICH).version == (1, 5)

def test_android2022_is_the_khronos_profile():
  # VP_ANDROID_baseline_2022.json revision 2: api-version 1.1.106, and its limits (docs/capabilities.md)
  c = apply_profile(RICH, "android2022")
  assert c.flags == {"vec"} and c.vk == 11 and profile_vk("android2022") == 11
  assert (c.align, c.wgsize, c.wginv, c.smem, c.pc, c.bufs, c.range, c.allocs) == (256, (128, 128, 64), 128, 16384, 128, 4, 1 << 27, 4096)

def test_profiles_grant_only_what_they_list():
  # a flag's requirements are listed with it, so with_requirements never turns on a feature the device class lacks
  for name, (flags, limits) in PROFILES.items():
    assert with_requirements(set(flags)) == flags, name
    assert 11 <= limits["vk"] <= 13 and apply_profile(RICH, name).flags == flags | {"vec"}, name
  assert all(a in PROFILES for a in ALIASES.values()) and apply_profile(RICH, "mobile") == apply_profile(RICH, "powervr")
  assert profile_vk("pi5,min") == 11 and profile_vk("bda") is None and profile_vk("") is None

def test_profile_never_raises_a_capability():
  poor = Caps(frozenset({"vec", "s8"}), align=512, wgsize=(64, 64, 64), wginv=64, smem=8192, pc=64, bufs=3, range=1 << 20, allocs=100)
  assert apply_profile(poor, "min") == Caps(frozenset({"vec"}), align=512, wgsize=(64, 64, 64), wginv=64, smem=8192, pc=64, bufs=3,
                                           range=1 << 20, allocs=100)
  assert "bda" not in apply_profile(poor, "mobile")

def test_second_profile_grants_features():
  assert apply_profile(RICH, "min,bda").flags == {"vec", "bda"}
  assert apply_profile(RICH, "min,i8").flags == {"vec", "i8", "s8"}   # with what it needs
  assert apply_profile(RICH, "mobile").flags == {"vec", "bda", "nan32"} and apply_profile(RICH, "mobile,min").bufs == 4
  assert apply_profile(RICH, "") == RICH
  with pytest.raises(ValueError, match="unknown profile 'tiny'"): apply_profile(RICH, "tiny")

def test_min_profile_on_this_device():
  # a 40-input sum, scheduled before anything opened the device (tinygrad's scheduler reads the buffer limit first), then the
  # capability string, the renderer limits and tinygrad's buffer limit: 31 as on CPU, not lowered by the 4 descriptors
  r = run_python("""
import numpy as np
from tinygrad import Tensor, Device
import tinygrad.schedule.rangeify as rangeify
xs = [np.random.default_rng(i).uniform(-1, 1, 101).astype(np.float32) for i in range(40)]
t = Tensor(xs[0])
for x in xs[1:]: t = t + Tensor(x)
np.testing.assert_allclose(t.numpy(), np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
d = Device["VULKAN"]
c, real = d.caps, d.phys.real_caps()
from tinygrad_vk.caps import RENDERER_PATHS
assert c.flags == real.flags & RENDERER_PATHS and c.wginv == min(128, real.wginv), c
assert c.bufs == min(4, real.bufs) and c.align == max(256, real.align), c
ren = d.renderer
assert ren.local_max == c.wgsize and ren.shared_max == c.smem and "wginv=" + str(c.wginv) in ren.target.arch
assert rangeify.DEVICE_MAX_BUFS.get("VULKAN") == rangeify.DEVICE_MAX_BUFS["CPU"] == 31
print("ok")""", {"VULKAN_PROFILE": "min", "VULKAN_MAX_STORAGE_RANGE": ""})   # min's own range: no CI pass's 4 KiB
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_min_profile_binds_views_at_its_alignment():
  # a view is bound at the offset rounded down to minStorageBufferOffsetAlignment (256 B under the profile), the rest in _o
  r = run_python("""
import numpy as np
from tinygrad import Tensor, Device
from tinygrad_vk.program import VulkanProgram
offs, pack = [], VulkanProgram.pack
def record(self, bufs, vals, win=None):
  out = pack(self, bufs, vals, win)
  offs.extend(self.infos[i].offset for i in range(len(bufs)))
  return out
VulkanProgram.pack = record
a = np.random.default_rng(0).uniform(-1, 1, 400).astype(np.float32)
t = Tensor(a).realize()
np.testing.assert_array_equal((t[70:370].contiguous() * 2).numpy(), a[70:370] * 2)   # byte offset 280: bound at 256, _o = 6
base = t.uop.buffer._buf.offset   # a multiple of 256 (0, or past a VULKAN_GUARD guard)
assert offs and all(o % 256 == 0 for o in offs) and base + 256 in offs, (base, offs)
print("ok")""", {"VULKAN_PROFILE": "min"})
  assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr

def test_profile_features_are_not_enabled_on_the_device():
  # what the profile turns off is not enabled at vkCreateDevice: a kernel using it anyway is caught by the validation layer
  if "s8" not in Device["VULKAN"].phys.flags(): pytest.skip("the device has no storageBuffer8BitAccess to turn off")
  r = run_python("""
from tinygrad import Device, dtypes
from tinygrad.device import Buffer, TinyELF
from tinygrad.helpers import Target
import sys; sys.path.insert(0, "tests")
from util import glsl_compiler
src = '''#version 450
#extension GL_EXT_shader_8bit_storage : require
layout(local_size_x=1) in;
layout(set=0, binding=0, std430) buffer B0 { uint8_t data0[]; };
void main() { data0[0] = uint8_t(7); }'''
dev = Device["VULKAN"]
prg = dev.runtime(TinyELF(glsl_compiler().compile(src), "uses_8bit_storage", Target("VULKAN"), ((None, 0, dtypes.uint8, (4,)),)))
buf = Buffer("VULKAN", 4, dtypes.uint8).allocate()
try:
  prg(buf._buf, global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True)
  dev.check_validation()
except RuntimeError as e: print("VALIDATION", e)""", {"VULKAN_PROFILE": "min", "VULKAN_VALIDATION": "1"})
  assert "VALIDATION" in r.stdout and "storageBuffer8BitAccess" in r.stdout, r.stdout + r.stderr

def test_info_shows_the_profile():
  r = run_python("import sys; from tinygrad_vk.__main__ import main; sys.argv = ['tinygrad_vk', 'info']; sys.exit(main())", {"VULKAN_PROFILE": "min"})
  assert r.returncode == 0, r.stderr
  assert "VULKAN_PROFILE=min" in r.stdout and "turned off by the profile" in r.stdout and "dtypes packed" in r.stdout, r.stdout
  if (inv := Device["VULKAN"].phys.real_caps().wginv) > 128: assert f"maxComputeWorkGroupInvocations {inv} -> 128" in r.stdout

def test_info_prints_each_item_whole():
  # items whose own text has a ';' (spread's, the one without bda) were split over two lines; reach off is a choice (by address,
  # the faster way there), not a missing capability
  from tinygrad_vk.caps import FLAGS
  r = run_python("import sys; from tinygrad_vk.__main__ import main; sys.argv = ['tinygrad_vk', 'info']; sys.exit(main())",
                 {"VULKAN_PROFILE": "min", "VULKAN_DISABLE": "spread"})
  assert r.returncode == 0, r.stderr
  lines = [line.strip() for line in r.stdout.splitlines()]
  assert f"no {FLAGS['spread']} (VULKAN_DISABLE)" in lines, r.stdout
  assert [line for line in lines if "goes in pieces of workgroups" in line and line.endswith("more than 4 descriptors")], r.stdout
  assert "no " + FLAGS["reach"] not in r.stdout, r.stdout

# ---- more buffers than maxPerStageDescriptorStorageBuffers (4 under the profiles): the kernel stays whole and is windowed, its
# buffers reached through windows over the memory blocks they lie in (renderer/abi.py); tests/test_windows.py runs it.

def test_abi_past_the_descriptor_limit():
  from tinygrad import dtypes
  from tinygrad_vk.renderer.abi import kernel_abi, max_kernel_bufs
  mobile, poor = apply_profile(RICH, "mobile"), apply_profile(RICH, "min")
  for c in (mobile, poor):   # with or without bda: windows, a word of _off per slot, then the scalars
    abi = kernel_abi(c, [(4, 100)] * 6, [dtypes.int])
    assert abi.windowed and abi.binding == (0, 1, 2, 3, 4, 5) and abi.address == (None,) * 6 and abi.ndesc == 4, abi
    assert abi.vars == ((24, dtypes.int),) and abi.nwords == 6 and abi.off_word(5) == (5, 0, None)
  narrow = kernel_abi(poor, [(4, 100)] * 4, [])
  assert not narrow.windowed and narrow.nwords == 1 and narrow.off_word(3) == (0, 24, 255)
  # a buffer past maxStorageBufferRange goes by address with bda, beside the windows
  big = kernel_abi(mobile, [(4, 100)] * 5 + [(4, 1 << 26)], [])
  assert big.windowed is True and big.binding == (0, 1, 2, 3, 4, None) and big.address == (None,) * 5 + (24,)
  # 128 bytes of push constants hold 32 view offsets as words: tinygrad's default of 31 plus the output, on every device
  assert max_kernel_bufs(mobile, 32) == max_kernel_bufs(poor, 32) == max_kernel_bufs(RICH, 32) == 32

MANY_BUFS = """
import sys; sys.path.insert(0, "tests")
import numpy as np
from tinygrad import Tensor, Device
import tinygrad.schedule.rangeify as rangeify
from tinygrad_vk.instance import validation_messages
from tinygrad_vk.renderer.abi import max_kernel_bufs
from util import data, kernel_sources, shows
xs = [data(1003, lo=-2, hi=2) for _ in range(7)]
ts = [Tensor(x).realize() for x in xs]
f = lambda a: a[0] * a[1] + a[2] - a[3] * a[4] + a[5] / (a[6] * a[6] + 1)   # 7 inputs and the output: 8 buffers
caps = Device["VULKAN"].caps
srcs = kernel_sources(f(ts))
print("kernels", len(srcs), "address", sum(shows(s, "address") for s in srcs))
assert rangeify.DEVICE_MAX_BUFS.get("VULKAN") == max_kernel_bufs(caps, 32) - 1
try: out = f(ts).numpy()
except RuntimeError as e: print("refused", e); raise SystemExit
np.testing.assert_allclose(out, f(xs), rtol=1e-6, atol=1e-6)
assert not validation_messages, validation_messages
print("ok")"""

@pytest.mark.parametrize("env", [{"VULKAN_PROFILE": "min"}, {"VULKAN_PROFILE": "mobile"}, {"VULKAN_PROFILE": "mobile", "VULKAN_DISABLE": "bda"}])
@pytest.mark.parametrize("ren", ["GLSL", "SPIRV"])
def test_kernel_past_the_descriptor_limit(ren, env):
  # 4 descriptors: one kernel of 8 buffers, windowed, none by address
  r = run_python(MANY_BUFS, {**env, "DEV": f"VULKAN:{ren}", "VULKAN_VALIDATION": "1", "VULKAN_MAX_STORAGE_RANGE": ""})
  assert r.returncode == 0 and "kernels 1 address 0" in r.stdout and "ok" in r.stdout, r.stdout + r.stderr
