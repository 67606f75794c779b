#!/usr/bin/env python3
"""Per-kernel compile time, renderer output -> SPIR-V bytes, of the SPIR-V renderer's assembler against glslang (validation off).

  python scripts/compile_time.py [DUMP_DIR ...] [--reps 3] [--json out.json]

The kernels: the bench's cold kernels (a CNN train step, GEMM, add, sum, conv2d), rendered by each renderer in a subprocess
with VULKAN_DUMP, plus every kernel in the given VULKAN_DUMP folders (e.g. of upstream test_ops.py runs, one per renderer:
`VULKAN_DUMP=/tmp/d_spirv run.sh VULKAN:SPIRV test/backend/test_ops.py`, then the same with VULKAN:GLSL). Each source is
compiled `--reps` times in this process and its fastest time kept; the table gives median, p90 and max over kernels.
"""
import argparse, glob, json, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = """
from tinygrad import Tensor, nn, Device
from tinygrad.helpers import Context
class Net:
  def __init__(self): self.c1, self.c2, self.l = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(16 * 5 * 5, 10)
  def __call__(self, x): return self.l(self.c2(self.c1(x).relu().max_pool2d()).relu().max_pool2d().flatten(1))
net = Net()
opt = nn.optim.SGD(nn.state.get_parameters(net), lr=0.01)
x, y = Tensor.randn(32, 1, 28, 28).realize(), Tensor.randint(32, high=10).realize()
with Context(TRAINING=1):
  opt.zero_grad()
  net(x).sparse_categorical_crossentropy(y).backward().realize(*opt.schedule_step())
a, b = Tensor.rand(512, 512).realize(), Tensor.rand(1 << 20).realize()
(a @ a).realize(); (b + b).realize(); b.sum().realize(); (b * 1.5 + 0.5).sqrt().realize()
Tensor.rand(2, 32, 16, 16).conv2d(Tensor.rand(64, 32, 3, 3), padding=1).realize()
Device[Device.DEFAULT].synchronize()
"""

def sources(folders:list[str]) -> dict[str, list[str]]:
  out: dict[str, list[str]] = {"SPIRV": [], "GLSL": []}
  for d in folders:
    out["GLSL"] += [open(f).read() for f in sorted(glob.glob(os.path.join(d, "*.comp")))]
    out["SPIRV"] += [s for f in sorted(glob.glob(os.path.join(d, "*.spvasm"))) if (s := open(f).read()).startswith("; tinygrad_vk SPIR-V")]
  return out

def timed(fn, src:str, reps:int) -> float:
  best = float("inf")
  for _ in range(reps):
    st = time.perf_counter()
    fn(src)
    best = min(best, time.perf_counter() - st)
  return best

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("dumps", nargs="*", help="VULKAN_DUMP folders to add")
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--json")
  args = ap.parse_args()
  os.environ["VULKAN_VALIDATE_SPIRV"] = "0"
  from tinygrad import Device
  from tinygrad_vk.compiler import SPIRVCompiler, GLSLCompiler
  caps = Device["VULKAN"].caps
  compilers = {"SPIRV": SPIRVCompiler().compile, "GLSL": GLSLCompiler(tuple(w for w in (16, 32, 64) if f"nan{w}" in caps)).compile}
  with tempfile.TemporaryDirectory() as tmp:
    for ren in compilers:
      env = {**os.environ, "DEV": f"VULKAN:{ren}", "VULKAN_DUMP": os.path.join(tmp, ren), "CACHELEVEL": "0", "PARALLEL": "0"}
      subprocess.run([sys.executable, "-c", KERNELS], env=env, check=True, capture_output=True, cwd=HERE)
    groups = {"bench cold kernels": sources([os.path.join(tmp, r) for r in compilers])}
    if args.dumps: groups["dump folders"] = sources(args.dumps)
    res: dict = {}
    print(f"{'kernels':<20} {'renderer':<8} {'n':>5} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
    for g, srcs in groups.items():
      for ren, fn in compilers.items():
        ts = sorted(timed(fn, s, args.reps) * 1e3 for s in srcs[ren])
        if not ts: continue
        res[f"{g}/{ren}"] = r = {"n": len(ts), "median_ms": statistics.median(ts), "p90_ms": ts[int(0.9 * (len(ts) - 1))], "max_ms": ts[-1]}
        print(f"{g:<20} {ren:<8} {r['n']:>5} {r['median_ms']:>10.3f} {r['p90_ms']:>8.3f} {r['max_ms']:>8.3f}")
      if f"{g}/SPIRV" in res and f"{g}/GLSL" in res:
        print(f"{g:<20} GLSL / SPIR-V median: {res[f'{g}/GLSL']['median_ms'] / res[f'{g}/SPIRV']['median_ms']:.0f}x")
  if args.json:
    with open(args.json, "w") as f: json.dump(res, f, indent=1)

if __name__ == "__main__": main()
