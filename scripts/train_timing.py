#!/usr/bin/env python3
"""Training steps of a small ViT and of mlperf's BERT tiny per device: cold first step split into compile and run, steady-state
seconds per step, kernel time per step and the kernels that take it.

  python scripts/train_timing.py --tg-src ~/tg-src [--models vit,bert] [--devs VULKAN:SPIRV,VULKAN:GLSL,CPU] [--steps 5] [--top 5]

The models come from an upstream tinygrad tree (`--tg-src`, never copied here): ViT (extra/models/vit.py, 2 layers, 192 wide,
3 heads, 197 tokens, batch 2, Adam) and BERT as examples/mlperf trains it (BERT_SIZE=tiny: 128 hidden, 2 layers, vocab 30522;
LAMB with and without weight decay, gradients clipped at global norm 1; batch 2 x 128 tokens, 20 masked). Parameters start
from the same numpy draw on every device. Each (model, device) runs in a fresh process without tinygrad's disk cache or Mesa's, with
PARALLEL=0, so every kernel compiles in that process and is timed, split as COLUMNS below says. Steps run under TinyJit (it
captures on the second call); `steady` is the median wall time of the steps after the third. `kernel s` is the device time of
one more step run as a fresh TinyJit's first call (not replayed), each kernel waited for (as DEBUG=2 times them): the top kernels
of each device are listed by their share of it.
"""
import argparse, json, os, statistics, subprocess, sys, time

def worker(model:str, steps:int, tg_src:str, split_driver:bool):
  sys.path.append(tg_src)   # the models from there; tinygrad itself is the installed one
  import contextlib, io, re
  import numpy as np
  from tinygrad import Tensor, TinyJit, nn, Device, dtypes
  from tinygrad.helpers import Context
  import tinygrad.codegen as cg
  dev = Device[Device.DEFAULT]
  acc: dict[str, float] = {}
  stack: list[float] = []   # per open timer: seconds its nested timers took, so that every key counts its own time only
  def timed(key, fn):
    def wrap(*a, **kw):
      stack.append(0.0)
      st = time.perf_counter()
      try: return fn(*a, **kw)
      finally:
        dt, inner, k = time.perf_counter() - st, stack.pop(), key() if callable(key) else key
        acc[k] = acc.get(k, 0.0) + dt - inner
        if stack: stack[-1] += dt
    return wrap
  cg.do_to_program = timed("codegen", cg.do_to_program)
  ren = type(dev.renderer)
  ren.render = timed("render", ren.render)
  comp = type(dev.compiler)
  comp.compile = timed("compiler", comp.compile)
  prg = dev.runtime_t
  dev.runtime_t = timed("program", prg)
  prg.__call__ = timed("launch", prg.__call__)
  if dev.device.startswith("VULKAN"):
    import tinygrad_vk.renderer.passes as passes
    from tinygrad_vk.queue import CommandQueue
    passes.SINK_PASSES = tuple((flag, timed(f"pass {f.__name__}", f)) for flag, f in passes.SINK_PASSES)
    driver = [False]
    CommandQueue._wait_fence = timed(lambda: "driver" if driver[0] else "wait", CommandQueue._wait_fence)
    if split_driver:   # lavapipe compiles a pipeline at its first dispatch, on its queue thread: wait for the warm-up dispatch alone
      warm = prg._warm
      def warm_alone(self, pipeline):
        if not (q := self.dev.queue).held: q.synchronize()
        warm(self, pipeline)
        if not q.held:
          driver[0] = True
          try: q.synchronize()
          finally: driver[0] = False
      prg._warm = warm_alone
  rng = np.random.default_rng(0)
  if model == "vit":
    from extra.models.vit import ViT
    net = ViT(layers=2, embed_dim=192, num_heads=3)
    x, y = Tensor(rng.standard_normal((2, 3, 224, 224), dtype=np.float32)), Tensor(rng.integers(0, 1000, 2, dtype=np.int32))
    params = nn.state.get_parameters(net)
    opts = [nn.optim.Adam(params, lr=1e-4)]
    def loss_fn(): return net.forward(x).sparse_categorical_crossentropy(y)
  else:
    os.environ["BERT_SIZE"] = "tiny"
    from examples.mlperf.helpers import get_mlperf_bert_model
    from tinygrad.nn.optim import LAMB
    net = get_mlperf_bert_model()
    B, S, M = 2, 128, 20
    ids, seg = Tensor(rng.integers(0, 30522, (B, S), dtype=np.int32)), Tensor(rng.integers(0, 2, (B, S), dtype=np.int32))
    mask, pos = Tensor.ones(B, S, dtype=dtypes.int32).contiguous(), Tensor(rng.integers(0, S, (B, M), dtype=np.int32))
    mlm_ids, mlm_w = Tensor(rng.integers(0, 30522, (B, M), dtype=np.int32)), Tensor.ones(B, M).contiguous()
    nsp = Tensor(rng.integers(0, 2, (B, 1), dtype=np.int32))
    sd = nn.state.get_state_dict(net)
    no_wd = [v for k, v in sd.items() if "bias" in k or "LayerNorm" in k]
    params = nn.state.get_parameters(net)
    opts = [LAMB([p for p in params if p not in set(no_wd)], lr=1e-4, weight_decay=0.01, adam=False), LAMB(no_wd, lr=1e-4, adam=False)]
    def loss_fn():
      loss = net.loss(*net(ids, mask, pos, seg), mlm_ids, mlm_w, nsp)
      loss.backward()
      gnorm = sum((p.grad.square().sum() for p in params), Tensor(0.0)).sqrt().contiguous()
      for p in params: p.grad = (gnorm > 1.0).where(p.grad / gnorm, p.grad)
      return loss
  for p in params: p.replace(Tensor((rng.standard_normal(p.shape) * 0.02).astype(np.float32)))
  def step_fn():
    with Context(TRAINING=1):
      for o in opts: o.zero_grad()
      loss = loss_fn()
      if model == "vit": loss.backward()
      return loss.realize(*[t for o in opts for t in o.schedule_step()])
  step = TinyJit(step_fn)
  Tensor.realize(*params)
  dev.synchronize()
  out = []
  for _ in range(steps):
    acc.clear()
    st = time.perf_counter()
    loss = step().item()
    wall = time.perf_counter() - st
    out.append({"wall": wall, **acc, "rest": wall - sum(acc.values()), "loss": loss})
  # one more step as the first call of a fresh TinyJit, which runs it as it is (not replayed): every kernel waited for and timed (the
  # DEBUG=2 lines: "*** DEV n name ... tm 1.23ms/..."), compiled as the JIT's own (VULKAN tiles more inside TinyJit calls)
  with contextlib.redirect_stdout(io.StringIO()) as f, Context(DEBUG=2): TinyJit(step_fn)().item()
  kernels: dict[str, list] = {}   # name -> [seconds, calls]
  unit = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
  for line in re.sub(r"\x1b\[[0-9;]*m", "", f.getvalue()).splitlines():
    if (m := re.match(r"\*\*\* \S+\s+\d+ (.+?)\s+arg.* tm\s+([\d.]+)(us|ms|s)/", line)) and not m[1].startswith("copy"):
      k = kernels.setdefault(m[1].strip(), [0.0, 0])
      k[0], k[1] = k[0] + float(m[2]) * unit[m[3]], k[1] + 1
  print("RESULT " + json.dumps({"steps": out, "kernels": kernels}))

# the first step's seconds, each counted once (a timer nested in another is taken out of it): tinygrad's codegen (its rewrites and
# linearizer, without what follows), our UOp passes (VULKAN), the renderer (source text), the compiler (SPIR-V assembler, glslang
# or clang), program creation (shader module and pipelines, or loading the ELF), the driver's compile at a pipeline's first
# dispatch (lavapipe, on its queue thread: timed by waiting for each new pipeline's warm-up dispatch alone, unless --overlap),
# host-side launch work, waiting for the device, and the rest (scheduling, copies, Python)
COLUMNS = ("codegen", "passes", "render", "compiler", "program", "driver", "launch", "wait", "rest")

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--tg-src", required=True, help="upstream tinygrad tree with extra/models and examples/mlperf")
  ap.add_argument("--models", default="vit,bert")
  ap.add_argument("--devs", default="VULKAN:SPIRV,VULKAN:GLSL,CPU")
  ap.add_argument("--steps", type=int, default=5)
  ap.add_argument("--top", type=int, default=5, help="kernels listed per (model, device)")
  ap.add_argument("--json")
  ap.add_argument("--overlap", action="store_true", help="leave the driver's first-dispatch compile overlapped with the host (no driver column)")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args.worker, args.steps, os.path.abspath(args.tg_src), not args.overlap)
  res = {}
  print(f"{'model':<6} {'device':<12} {'1st step s':>10} " + " ".join(f"{c:>8}" for c in COLUMNS) +
        f" | {'steady s':>9} {'kernel s':>9}  {'total s':>8}")
  for model in args.models.split(","):
    for dev in args.devs.split(","):
      st = time.perf_counter()
      p = subprocess.run([sys.executable, __file__, "--worker", model, "--steps", str(args.steps), "--tg-src", args.tg_src] +
                         ["--overlap"] * args.overlap, capture_output=True, text=True,
                         env={**os.environ, "DEV": dev, "CACHELEVEL": "0", "MESA_SHADER_CACHE_DISABLE": "true", "PARALLEL": "0",
                              "VULKAN_VALIDATE_SPIRV": "0"})
      total = time.perf_counter() - st
      line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
      if line is None:
        print(f"{model:<6} {dev:<12} failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]}")
        continue
      r = json.loads(line[len("RESULT "):])
      steps = r["steps"]
      f, steady, ktime = steps[0], statistics.median(s["wall"] for s in steps[3:] or steps[-1:]), sum(t for t, _ in r["kernels"].values())
      res[f"{model}/{dev}"] = {"steps": steps, "steady_s": steady, "kernel_s": ktime, "kernels": r["kernels"], "process_s": total}
      f["passes"] = sum(v for k, v in f.items() if k.startswith("pass "))
      print(f"{model:<6} {dev:<12} {f['wall']:>10.2f} " + " ".join(f"{f[c]:>8.2f}" if c in f else f"{'-':>8}" for c in COLUMNS) +
            f" | {steady:>9.3f} {ktime:>9.3f}  {total:>8.1f}")
      if (ps := {k[5:]: v for k, v in f.items() if k.startswith("pass ")}):
        print(" " * 20 + "passes: " + ", ".join(f"{k} {v:.2f}" for k, v in ps.items()))
  for key, r in res.items():
    print(f"\n{key}: top kernels of {r['kernel_s'] * 1e3:.1f} ms")
    for name, (t, n) in sorted(r["kernels"].items(), key=lambda kv: -kv[1][0])[:args.top]:
      print(f"  {t * 1e3:9.2f} ms  {t / r['kernel_s']:5.1%}  {n:3d} calls  {name}")
  if args.json:
    with open(args.json, "w") as fh: json.dump(res, fh, indent=1)

if __name__ == "__main__": main()
