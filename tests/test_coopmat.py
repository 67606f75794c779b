"""Tensor cores through VK_KHR_cooperative_matrix (flag coopmat, renderer/coopmat.py). The matmuls run where the device reports
shapes (Mesa 26.2 lavapipe here), in a child process with VULKAN_COOPMAT=1 (probe.py measured the path slower than FMAs on
lavapipe, so it is off by default there); elsewhere what a device without the extension declares."""
import json, math, os, tempfile
import pytest
from tinygrad import Device, dtypes
from tinygrad_vk.caps import Caps, apply_profile, disabled_flags, env_text
from tinygrad_vk.renderer.coopmat import tensor_core, tensor_cores
from tinygrad_vk.spv import spirv_instructions
from util import run_python, switched

def device_shapes() -> tuple:
  return Device["VULKAN"].phys.coop_shapes
needs_coop = pytest.mark.skipif(not device_shapes() or "coopmat" in disabled_flags(env_text("VULKAN_DISABLE")),
                                reason="no VK_KHR_cooperative_matrix shapes on this device (Mesa 26.2 lavapipe has them), or VULKAN_DISABLE")

@pytest.mark.parametrize("shape", [(8, 8, 8, 8), (16, 16, 16, 32), (16, 8, 16, 32), (16, 16, 16, 64), (16, 16, 8, 32)])
def test_fragments_are_consecutive_tile_elements(shape):
  """Thread t of the warp holds elements t*n .. t*n+n-1 of A (row-major MxK), B (column-major KxN) and C (row-major MxN): the
  tiles the WMMA stores them in. Followed through tinygrad's own description (opts, swizzle) of which matrix bit each thread and
  element bit is."""
  M, N, K, S = shape
  tc = tensor_core(M, N, K, S, dtypes.half, dtypes.float)
  lbits, ubits = int(math.log2(S)), tc.opts.count("u0") + tc.opts.count("u1")
  dims = {}   # opt name -> (dim, bit of it)
  counts = {"0": 0, "1": 0}
  names = tc.base_shape_str()
  for name, opt in zip(names, tc.opts):
    dims[name] = (opt[1], counts[opt[1]])
    counts[opt[1]] += 1
  dims |= {f"r{i}": ("2", i) for i in range(int(math.log2(K)))}
  fwd = [f"l{i}" for i in range(lbits)] + [f"u{i}" for i in range(ubits)] + [f"r{i}" for i in range(int(math.log2(K)))]
  ups = tc.base_upcast_axes()
  for op, (rows, cols, dim_r, dim_c, n) in enumerate([(M, K, "1", "2", tc.elements_per_thread[0]), (N, K, "0", "2", tc.elements_per_thread[1])]):
    slot = dict(zip(fwd, sum(tc.swizzle[op], ())))   # hardware slot -> matrix bit it holds
    element_slots = ups[:int(math.log2(n))][::-1]     # lowest element bit first
    for t in range(S):
      for e in range(n):
        coord = {"0": 0, "1": 0, "2": 0}
        for i in range(lbits):
          d, b = dims[slot[f"l{i}"]]
          coord[d] |= (t >> i & 1) << b
        for j, s in enumerate(element_slots):
          d, b = dims[slot[s]]
          coord[d] |= (e >> j & 1) << b
        assert coord[dim_r] * cols + coord[dim_c] == t * n + e, (op, t, e, coord)
  for t in range(S):   # C: lanes and upcasts straight from the opts
    for e in range(tc.elements_per_thread[2]):
      coord = {"0": 0, "1": 0}
      for i in range(lbits): coord[dims[f"l{i}"][0]] |= (t >> i & 1) << dims[f"l{i}"][1]
      for j in range(ubits): coord[dims[f"u{j}"][0]] |= (e >> j & 1) << dims[f"u{j}"][1]
      assert coord["1"] * N + coord["0"] == t * tc.elements_per_thread[2] + e

def test_declared_only_with_the_flag():
  shapes = (8, 8, 8, 0, 1, 8, 8, 8, 3, 5, 8, 8, 8, 7, 9)   # f16+f32, s8+s32, u8+u32 (VkComponentTypeKHR)
  caps = Caps(frozenset({"coopmat", "vmm", "f16", "i16", "s16", "i8", "s8"}), sg=8, coop=shapes)
  assert [(tc.dtype_in, tc.dtype_out) for tc in tensor_cores(caps)] == [(dtypes.half, dtypes.float), (dtypes.char, dtypes.int),
                                                                         (dtypes.uchar, dtypes.uint)]
  assert tensor_cores(Caps(caps.flags - {"coopmat"}, sg=8, coop=shapes)) == []
  assert [tc.dtype_in for tc in tensor_cores(Caps(caps.flags - {"f16"}, sg=8, coop=shapes))] == [dtypes.char, dtypes.uchar]   # types native only
  # every profile leaves tensor cores off: no profiled device class has them
  assert all("coopmat" not in apply_profile(caps, p).flags for p in ("min", "moltenvk", "intel-arc", "swiftshader"))
  assert Caps.decode(caps.encode()) == caps and "coop=" not in Caps().encode()
  # devices used together render alike (Caps.meet): tensor cores only where both have the same ones on the same subgroup size
  assert caps.meet(caps).coop == shapes and caps.meet(Caps(caps.flags, sg=16, coop=shapes)).coop == ()
  assert caps.meet(Caps(caps.flags, sg=8, coop=shapes[:5])).coop == () and "coopmat" not in caps.meet(Caps(sg=8, coop=shapes)).flags

def test_devices_without_shapes_declare_none():
  if device_shapes() and "coopmat" in Device["VULKAN"].caps: pytest.skip("this device has tensor cores on")
  assert Device["VULKAN"].renderer.tensor_cores == []

# every matmul's kernels, each with or without the MulAdd instruction (opcode 4459) in its module, and its largest error
MATMULS = """
import json, numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.helpers import Context
from tinygrad_vk.spv import spirv_instructions
from util import kernel_programs
rng, out = np.random.default_rng(42), {}
def run(name, a, b, acc, ref, tc_opt=0, bound=None):
  with Context(TC_OPT=tc_opt):   # kernel_programs consumes its tensor: the same matmul again for the result
    progs = kernel_programs(Tensor(a).matmul(Tensor(b), dtype=acc))
    got = Tensor(a).matmul(Tensor(b), dtype=acc).numpy()
  coop = [any(op == 4459 for _, op, _ in spirv_instructions(p.src[3].arg)[1]) for p in progs]
  err = float((np.abs(got.astype(np.float64) - ref) / bound).max()) if acc != dtypes.int32 else int((got != ref).sum())
  out[name] = (any(coop), err)
def half(*shape): return rng.uniform(-2, 2, shape).astype(np.float16)
def ref(a, b): return a.astype(np.float64) @ b.astype(np.float64)
# fp16 tolerance: each product may be rounded to half (tinygrad multiplies half in half without a tensor core), 2^-11 of it, the
# float sum adds little; a half accumulator rounds each of the K partial sums too. Twice that, element by element
def bound(a, b, acc):
  return 2.0**-10 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) * (a.shape[-1] if acc == dtypes.half else 1) + 1e-30
for name, (a, b), acc, tc_opt in (("square1024", (half(1024, 1024), half(1024, 1024)), dtypes.float, 0),
                                  ("odd300x77x130", (half(300, 77), half(77, 130)), dtypes.float, 2),   # padded to the shape
                                  ("batched3x40x56x24", (half(3, 40, 56), half(3, 56, 24)), dtypes.float, 2),
                                  ("half_acc64x48x72", (half(64, 48), half(48, 72)), dtypes.half, 0)):
  run(name, a, b, acc, ref(a, b), tc_opt, bound(a, b, acc))
for name, hi in (("int8_small", 11), ("int8_overflow", 127)):   # products within int8, and ones past it
  a, b = rng.integers(-hi, hi + 1, (64, 80)).astype(np.int8), rng.integers(-hi, hi + 1, (80, 40)).astype(np.int8)
  run(name, a, b, dtypes.int32, a.astype(np.int32) @ b.astype(np.int32))
print("RESULT", json.dumps(out))
"""

def matmuls(env:dict) -> dict:
  r = run_python("import sys; sys.path.insert(0, 'tests')\n" + MATMULS, {"VULKAN_VALIDATION": "1", "VULKAN_VALIDATE_SPIRV": "1", **env})
  assert r.returncode == 0 and "RESULT" in r.stdout and "VULKAN validation" not in r.stderr, r.stdout[-3000:] + r.stderr[-3000:]
  return json.loads(r.stdout.split("RESULT", 1)[1])

@needs_coop
@pytest.mark.parametrize("renderer", ["", "GLSL"])
@pytest.mark.parametrize("coopmat", ["on", "disabled"])
def test_matmuls_take_the_path_and_match(renderer, coopmat):
  """Half matmuls (square, odd sizes padded by TC_OPT=2, batched, a half accumulator) and int8 ones with int32 sums, under the
  hand-coded optimizer: every one has the MulAdd in its module with the flag on and none under VULKAN_DISABLE=coopmat, and
  matches numpy element by element. int8 products are full products through a tensor core, as tinygrad's own int8 tensor cores
  (AMD's WMMA) make them; without one tinygrad multiplies in int8 (products past it wrap), so int8_overflow matches only with it."""
  res = matmuls({"DEV": f"VULKAN:{renderer}" if renderer else "VULKAN", "VULKAN_COOPMAT": "1",
                 "VULKAN_DISABLE": "coopmat" if coopmat == "disabled" else ""})
  for name, (coop, err) in res.items():
    assert coop == (coopmat == "on"), (name, res)
    if name.startswith("int8"): assert err == 0 or (coopmat == "disabled" and name == "int8_overflow"), (name, res)
    else: assert err <= 1, (name, res)

BEAM = """
import os, numpy as np
from tinygrad import Tensor, dtypes
from tinygrad_vk.spv import spirv_instructions
rng = np.random.default_rng(1)
a, b = rng.uniform(-2, 2, (32, 48)).astype(np.float16), rng.uniform(-2, 2, (48, 40)).astype(np.float16)
err = np.abs(Tensor(a).matmul(Tensor(b), dtype=dtypes.float).numpy() - a.astype(np.float64) @ b.astype(np.float64)).max()
i, j = rng.integers(-127, 128, (24, 32)).astype(np.int8), rng.integers(-127, 128, (32, 16)).astype(np.int8)
wrong = (Tensor(i).matmul(Tensor(j), dtype=dtypes.int32).numpy() != i.astype(np.int32) @ j.astype(np.int32)).sum()
dump = os.environ["VULKAN_DUMP"]
mods = [open(os.path.join(dump, f), "rb").read() for f in os.listdir(dump) if f.endswith(".spv")]
built = sum(any(op == 4459 for _, op, _ in spirv_instructions(m)[1]) for m in mods)
print("RESULT", err, wrong, built)
"""

@needs_coop
def test_beam_search_builds_and_runs_tensor_core_candidates():
  """BEAM=2 times the TC candidates beside the others (each built, validated and run: the search keeps the fastest, on lavapipe
  not a tensor core one), and the result matches whichever it keeps (int8 exactly only if it kept a tensor core: else wrapped)."""
  with tempfile.TemporaryDirectory() as dump:
    r = run_python(BEAM, {"VULKAN_COOPMAT": "1", "BEAM": "2", "VULKAN_VALIDATE_SPIRV": "1", "VULKAN_DUMP": dump, "IGNORE_BEAM_CACHE": "1",
                          "PARALLEL": "0"})
  assert r.returncode == 0 and "RESULT" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
  err, _, built = r.stdout.split("RESULT")[1].split()
  assert float(err) <= 0.01 and int(built) > 0, r.stdout[-2000:]

@pytest.mark.skipif(bool(switched()), reason="the default pass reads the probe's choice; this run switches VULKAN_* variables")
def test_on_by_default_only_where_measured_faster():
  r = run_python("""
from tinygrad import Device
from tinygrad_vk.probe import measure, COOP_FAST
dev = Device["VULKAN"]
speedup = measure(dev.phys).coop_speedup
print("RESULT", speedup, "coopmat" in dev.caps, bool(dev.phys.coop_shapes), dev.phys.type)
""", {"VULKAN_COOPMAT": ""})
  assert r.returncode == 0 and "RESULT" in r.stdout, r.stdout + r.stderr
  speedup, on, shapes, _ = r.stdout.split("RESULT")[1].split()
  assert on == str(shapes == "True" and float(speedup) > 2.0), r.stdout

@needs_coop
@pytest.mark.parametrize("script", ["llama_check", "gpt2_check"])
def test_text_generation_through_tensor_cores(script):
  """Real model code: 32 greedy tokens of scripts/llama_check.py and gpt2_check.py in half equal CPU's with tensor cores on
  (TC_OPT=2: their projections' rows, 5 prompt tokens, are padded to the shape), and some of their kernels do take them."""
  with tempfile.TemporaryDirectory() as dump:
    r = run_python(f"import runpy, sys; sys.argv = ['{script}', '--layers', '2', '--dim', '64', '--heads', '4', '--vocab', '300', "
                   f"'--tokens', '32']; runpy.run_path('scripts/{script}.py', run_name='__main__')",
                   {"VULKAN_COOPMAT": "1", "TC_OPT": "2", "DEFAULT_FLOAT": "half", "VULKAN_DUMP": dump, "VULKAN_VALIDATION": "1"})
    mods = [os.path.join(dump, f) for f in os.listdir(dump) if f.endswith(".spv")]
    coop = sum(any(op == 4459 for _, op, _ in spirv_instructions(open(m, "rb").read())[1]) for m in mods)
  assert r.returncode == 0 and r.stdout.rstrip().endswith("match") and "VULKAN validation" not in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
  assert coop > 0, f"no kernel of {len(mods)} took the tensor cores"
