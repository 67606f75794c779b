#!/usr/bin/env python3
"""beautiful_mnist's model on DEV=VULKAN against DEV=CPU, with random data and a fixed seed (nothing is downloaded).

The model is tinygrad's examples/beautiful_mnist.py: 4 convolutions, 2 batch norms, 2 max pools, a linear layer. One forward and
backward pass on a batch (the loss read first, then the gradients, as a user would), then Adam training steps (TinyJit, as the
example trains). VULKAN computes in float32 and is checked against CPU computing the same in float64: every loss must match to
1e-4 (relative) and every gradient to 1e-3 (relative to the tensor's largest entry). CPU in float32 is printed beside it: its long
float32 sums are further from the float64 result than VULKAN's (a reduction spread over lanes adds partial sums). The trained
weights are printed, not checked: Adam's first steps move a weight by about the learning rate whatever its gradient's size, so a
near-zero gradient that rounds to the other sign moves it the other way. Exits non-zero on a mismatch.

  python scripts/check_mnist.py [--batch 32] [--steps 3] [--budget N]

--budget N sets VULKAN_MAX_LOOP_ITERATIONS=N, so that the model's reductions run over llvmpipe's loop budget and are spread over
the workgroup (renderer/passes/loops.py); at lavapipe's own budget (65535) tinygrad's kernels for this model already fit.
"""
import argparse, os, sys, time
import numpy as np

class Model:
  def __init__(self):
    from tinygrad import Tensor, nn
    self.layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
                   nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
                   lambda x: x.flatten(1), nn.Linear(576, 10)]
  def __call__(self, x): return x.sequential(self.layers)

def err(got:np.ndarray, ref:np.ndarray) -> float:
  """The largest difference, relative to the reference's largest entry."""
  return float(np.abs(got.astype(np.float64) - ref).max()) / max(float(np.abs(ref).max()), 1e-30)

def close(name:str, got:np.ndarray, ref:np.ndarray, rtol:float) -> bool:
  if (e := err(got, ref)) > rtol: print(f"MISMATCH {name}: max error {e:.2e} of the largest entry (limit {rtol:g})")
  return e <= rtol

def run(device:str, state:dict, X:np.ndarray, Y:np.ndarray, steps:int, dtype=np.float32) -> tuple[list[float], dict, dict]:
  from tinygrad import Context
  with Context(DEFAULT_FLOAT="float64" if dtype == np.float64 else "float32"): return _run(device, state, X.astype(dtype), Y, steps, dtype)

def _run(device:str, state:dict, X:np.ndarray, Y:np.ndarray, steps:int, dtype) -> tuple[list[float], dict, dict]:
  from tinygrad import Tensor, TinyJit, nn, Context
  Tensor.manual_seed(0)
  m = Model()
  sd = nn.state.get_state_dict(m)
  for k, v in sd.items(): v.replace(Tensor(state[k].astype(dtype) if state[k].dtype == np.float32 else state[k], device=device))
  params = nn.state.get_parameters(m)
  with Context(TRAINING=1):
    loss = m(Tensor(X[0], device=device)).sparse_categorical_crossentropy(Tensor(Y[0], device=device)).backward()
    losses, grads = [loss.item()], {k: v.grad.numpy() for k, v in sd.items() if v.grad is not None}
  opt = nn.optim.Adam(params)
  @TinyJit
  @Context(TRAINING=1)
  def step(x, y):
    opt.zero_grad()
    loss = m(x).sparse_categorical_crossentropy(y).backward()
    return loss.realize(*opt.schedule_step())
  for i in range(steps): losses.append(step(Tensor(X[i], device=device), Tensor(Y[i], device=device)).item())
  return losses, grads, {k: v.numpy() for k, v in sd.items()}

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--batch", type=int, default=32)
  ap.add_argument("--steps", type=int, default=3)
  ap.add_argument("--budget", type=int, default=0, help="VULKAN_MAX_LOOP_ITERATIONS (0: the driver's)")
  args = ap.parse_args()
  if args.budget: os.environ["VULKAN_MAX_LOOP_ITERATIONS"] = str(args.budget)
  from tinygrad import Tensor, nn
  rng = np.random.default_rng(0)
  X = rng.standard_normal((max(args.steps, 1), args.batch, 1, 28, 28)).astype(np.float32)
  Y = rng.integers(0, 10, (max(args.steps, 1), args.batch)).astype(np.int32)
  Tensor.manual_seed(0)
  state = {k: v.to("CPU").numpy() for k, v in nn.state.get_state_dict(Model()).items()}
  res = {}
  for run_name, dev, dt in (("VULKAN", "VULKAN", np.float32), ("CPU float64", "CPU", np.float64), ("CPU", "CPU", np.float32)):
    st = time.perf_counter()
    res[run_name] = run(dev, state, X, Y, args.steps, dt)
    print(f"{run_name}: losses {' '.join(f'{l:.6f}' for l in res[run_name][0])} ({time.perf_counter() - st:.1f} s)")
  ref = res["CPU float64"]
  for run_name, ref_name in (("CPU", "CPU float64"), ("VULKAN", "CPU float64"), ("VULKAN", "CPU")):
    (l, g, w), (lr, gr, wr) = res[run_name], res[ref_name]
    wg = max(((k, err(g[k], gr[k])) for k in gr), key=lambda e: e[1])
    ww = max(((k, err(w[k], wr[k])) for k in wr), key=lambda e: e[1])
    print(f"{run_name} against {ref_name}: loss {max(abs(a - b) / abs(b) for a, b in zip(l, lr)):.1e}, worst gradient {wg[0]} {wg[1]:.1e}, "
          f"worst trained weight {ww[0]} {ww[1]:.1e}")
  (lv, gv, _), (lr, gr, _) = res["VULKAN"], ref
  ok = all(abs(a - b) <= 1e-4 * abs(b) or (print(f"MISMATCH loss {i}: {a} vs {b}") and False) for i, (a, b) in enumerate(zip(lv, lr)))
  ok &= all([close(f"gradient {k}", gv[k], gr[k], 1e-3) for k in gr])
  print(f"{'OK' if ok else 'FAILED'}: VULKAN against CPU float64, batch {args.batch}, {len(lv)} losses, {len(gr)} gradients"
        + (f", loop budget {args.budget}" if args.budget else ""))
  return 0 if ok else 1

if __name__ == "__main__": sys.exit(main())
