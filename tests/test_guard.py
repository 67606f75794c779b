"""VULKAN_GUARD=1: poisoned guards after every buffer, bound in range, checked at every synchronisation and free. Hand-written
kernels store and read one element past their buffer; without the switch nothing changes."""
import numpy as np
from util import run_python

SCRIPT = """
import sys, numpy as np
sys.path.insert(0, "tests")
from tinygrad import Device
from tinygrad.device import BufferSpec
from util import glsl_program, data
HEAD = "#version 450\\nlayout(local_size_x=1) in;\\nlayout(set=0, binding=0, std430) buffer B0 { float data0[]; };\\n"
STORE = HEAD + "void main() { data0[1001] = 42.0; }"
READ = HEAD + "layout(set=0, binding=1, std430) buffer B1 { float data1[]; };\\nvoid main() { data1[0] = data0[1001]; }"
dev = Device["VULKAN"]
alloc = dev.allocator
x, y = data(1001), data(64)
a, nb, out = alloc.alloc(4 * 1001), alloc.alloc(4 * 64), alloc.alloc(16)
alloc._copyin(a, memoryview(x)); alloc._copyin(nb, memoryview(y))
store, read = glsl_program(STORE, 1, name="E_store_past_end"), glsl_program(READ, 2, name="E_read_past_end")
read(a, out, global_size=(1, 1, 1))
r = np.empty(4, np.float32); alloc._copyout(memoryview(r), out)
print("read:", "nan" if np.isnan(r[0]) else r[0])
store(a, global_size=(1, 1, 1))
try: dev.synchronize(); print("store: no error")
except RuntimeError as e: print("store:", e)
got, gy = np.empty(1001, np.float32), np.empty(64, np.float32)
alloc._copyout(memoryview(got), a); alloc._copyout(memoryview(gy), nb)
print("data intact:", np.array_equal(got, x) and np.array_equal(gy, y))
store(a, global_size=(1, 1, 1))
alloc.free(a, 4 * 1001, BufferSpec(nolru=True))   # freed before the next synchronisation: its guard is checked then
try: dev.synchronize(); print("freed: no error")
except RuntimeError as e: print("freed:", e)
dev.synchronize(); print("reported once")
"""

def run(guard:str) -> dict[str, str]:
  r = run_python(SCRIPT, {"VULKAN_GUARD": guard})
  assert r.returncode == 0, r.stdout + r.stderr[-3000:]
  return dict(line.split(": ", 1) for line in r.stdout.strip().splitlines() if ": " in line) | {"out": r.stdout}

def test_store_and_read_past_the_end_guarded():
  out = run("1")
  # the store past the end changed the guard: reported at the synchronisation, naming the kernel, then once more when freed
  assert out["store"].startswith("VULKAN_GUARD: memory outside a buffer was written") and "E_store_past_end" in out["store"] \
    and "0..3 bytes past its end" in out["store"], out["out"]
  assert "found when it was freed" in out["freed"] and "E_store_past_end" in out["freed"], out["out"]
  assert "reported once" in out["out"]
  assert out["read"] == "nan", out["out"]        # the read past the end gets the poison
  assert out["data intact"] == "True", out["out"]   # the buffers themselves: as written

def test_without_the_switch_nothing_changes():
  out = run("")
  assert out["store"] == "no error" and out["freed"] == "no error" and out["data intact"] == "True", out["out"]
  assert out["read"] != "nan", out["out"]

def test_poison_is_invalid_for_every_dtype():
  from tinygrad_vk.memory import POISON, GUARD
  assert len(POISON) >= 2 * GUARD
  for dt in (np.float16, np.float32, np.float64):
    for off in range(0, 8, np.dtype(dt).itemsize):   # any aligned element of the pattern
      assert np.isnan(np.frombuffer(POISON[off:off + 64], dt)).all(), (dt, off)
  bf16 = np.frombuffer(POISON[:64], np.uint16)
  assert ((bf16 & 0x7f80) == 0x7f80).all() and (bf16 & 0x7f).all()   # bfloat16 NaN: exponent all ones, mantissa not zero
  assert set(POISON) <= {0x7f, 0xff}                                  # no byte is a bool (0/1); fp8 e4m3/e5m2: 0x7f, 0xff are NaN
  assert np.frombuffer(POISON[:8], np.int32)[0] == np.iinfo(np.int32).max
