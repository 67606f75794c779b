#!/usr/bin/env python3
"""Wall time of a few training steps of a small ViT and BERT (tinygrad's extra/models), cold, split into compile and run.

  python scripts/train_timing.py --tg-src ~/tg-src [--models vit,bert] [--devs VULKAN:SPIRV,VULKAN:GLSL,CPU] [--steps 5]

The models come from an upstream tinygrad tree (`--tg-src`, never copied here). Each (model, device) runs in a fresh process
without tinygrad's disk cache and with PARALLEL=0, so every kernel compiles in that process and is timed: codegen (tinygrad's
rewrites, linearizer and renderer), compiler (renderer output -> binary: the SPIR-V assembler, glslang or clang) and program
creation (pipelines). Steps run under TinyJit (it captures on the second call); `run` is the rest of the step's wall time.
"""
import argparse, json, os, statistics, subprocess, sys, time

def worker(model:str, steps:int, tg_src:str):
  sys.path.insert(0, tg_src)
  import numpy as np
  from tinygrad import Tensor, TinyJit, nn, Device, dtypes
  from tinygrad.helpers import Context
  import tinygrad.codegen as cg
  dev = Device[Device.DEFAULT]
  acc = {"codegen": 0.0, "compiler": 0.0, "program": 0.0}
  def timed(key, fn):
    def wrap(*a, **kw):
      st = time.perf_counter()
      try: return fn(*a, **kw)
      finally: acc[key] += time.perf_counter() - st
    return wrap
  cg.do_to_program = timed("codegen", cg.do_to_program)
  comp = type(dev.compiler)
  comp.compile = timed("compiler", comp.compile)
  dev.runtime = timed("program", dev.runtime)
  rng = np.random.default_rng(0)
  if model == "vit":
    from extra.models.vit import ViT
    net = ViT(layers=2, embed_dim=64, num_heads=2)
    x, y = Tensor(rng.standard_normal((2, 3, 224, 224), dtype=np.float32)), Tensor(rng.integers(0, 1000, 2, dtype=np.int32))
    fwd = lambda: net.forward(x).sparse_categorical_crossentropy(y)
  else:
    from extra.models.bert import BertForPretraining
    net = BertForPretraining(hidden_size=64, intermediate_size=256, max_position_embeddings=64, num_attention_heads=2, num_hidden_layers=2,
                             vocab_size=2000)
    ids, seg = Tensor(rng.integers(0, 2000, (4, 32), dtype=np.int32)), Tensor(rng.integers(0, 2, (4, 32), dtype=np.int32))
    mask, pos = Tensor.ones(4, 32, dtype=dtypes.int32).contiguous(), Tensor(rng.integers(0, 32, (4, 5), dtype=np.int32))
    mlm_ids, nsp = Tensor(rng.integers(0, 2000, (4, 5), dtype=np.int32)), Tensor(rng.integers(0, 2, 4, dtype=np.int32))
    def fwd():
      mlm, nsp_logits = net(ids, mask, pos, seg)
      return mlm.sparse_categorical_crossentropy(mlm_ids) + nsp_logits.sparse_categorical_crossentropy(nsp)
  opt = nn.optim.Adam(nn.state.get_parameters(net), lr=1e-4)
  @TinyJit
  def step():
    with Context(TRAINING=1):
      opt.zero_grad()
      loss = fwd().backward()
      return loss.realize(*opt.schedule_step())
  Tensor.realize(*nn.state.get_parameters(net)); dev.synchronize()
  out = []
  for _ in range(steps):
    for k in acc: acc[k] = 0.0
    st = time.perf_counter()
    loss = step().item()
    wall = time.perf_counter() - st
    # codegen includes the compiler: do_to_program calls it
    out.append({"wall": wall, **acc, "run": wall - acc["codegen"] - acc["program"], "loss": loss})
  print("RESULT " + json.dumps(out))

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--tg-src", required=True, help="upstream tinygrad tree with extra/models")
  ap.add_argument("--models", default="vit,bert")
  ap.add_argument("--devs", default="VULKAN:SPIRV,VULKAN:GLSL,CPU")
  ap.add_argument("--steps", type=int, default=5)
  ap.add_argument("--json")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args.worker, args.steps, os.path.abspath(args.tg_src))
  res = {}
  print(f"{'model':<6} {'device':<12} {'1st step s':>10} {'codegen':>8} {'compiler':>8} {'program':>8} {'run':>8} | {'steady s':>9}  {'total s':>8}")
  for model in args.models.split(","):
    for dev in args.devs.split(","):
      st = time.perf_counter()
      p = subprocess.run([sys.executable, __file__, "--worker", model, "--steps", str(args.steps), "--tg-src", args.tg_src], capture_output=True,
                         text=True, env={**os.environ, "DEV": dev, "CACHELEVEL": "0", "PARALLEL": "0", "VULKAN_VALIDATE_SPIRV": "0"})
      total = time.perf_counter() - st
      line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
      if line is None:
        print(f"{model:<6} {dev:<12} failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]}")
        continue
      steps = json.loads(line[len("RESULT "):])
      f, steady = steps[0], statistics.median(s["wall"] for s in steps[3:] or steps[-1:])
      res[f"{model}/{dev}"] = {"steps": steps, "steady_s": steady, "process_s": total}
      print(f"{model:<6} {dev:<12} {f['wall']:>10.2f} {f['codegen'] - f['compiler']:>8.2f} {f['compiler']:>8.2f} {f['program']:>8.2f} "
            f"{f['run']:>8.2f} | {steady:>9.3f}  {total:>8.1f}")
  if args.json:
    with open(args.json, "w") as fh: json.dump(res, fh, indent=1)

if __name__ == "__main__": main()
