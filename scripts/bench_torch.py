#!/usr/bin/env python3
"""The torch peers of scripts/bench.py: one column in this process, torchvulkan's "vulkan" device or torch's CPU, on the rows they
share with tinygrad, with the sizes, seed, warm-up and medians of bench.py's tinygrad worker; figures written to --out after every
benchmark in bench.py's format. bench.py runs it with the python of a venv that holds torch and torchvulkan (see bench.py):

  TORCH_PYTHON scripts/bench_torch.py --device vulkan|cpu --tasks gemm512,gemm1024,add16M,conv2d,cnn_train,tf_train [--quick] --out F
"""
import argparse, json, os, sys, warnings
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import N16M, TF, wall_times, rate, err   # bench.py imports only the standard library at its top

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--device", choices=["vulkan", "cpu"], required=True)
  ap.add_argument("--tasks", required=True)
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--out", required=True)
  args = ap.parse_args()
  res: dict = {}
  def save():
    with open(args.out, "w") as f: json.dump(res, f)
  try:
    import torch, torch.nn as nn, torch.nn.functional as F
    res["info"] = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if args.device == "vulkan":
      import torchvulkan
      if not torchvulkan.is_available(): raise RuntimeError("torchvulkan finds no Vulkan device (it needs Vulkan 1.3)")
      p = torchvulkan.get_device_properties()
      res["info"] |= {"name": p.name, "api": p.api_version, "torchvulkan": torchvulkan.__version__,
                      "strict": os.environ.get("TORCHVULKAN_STRICT", "0")}
      sync = torchvulkan.synchronize
    else: sync = lambda: None   # noqa: E731
  except Exception as e:
    res["error"] = err(e)["error"]
    save()
    return
  dev, (R, WARM) = torch.device(args.device), ((3, 1) if args.quick else (7, 2))
  torch.manual_seed(0)

  def times(fn, reps=R, warm=WARM) -> list[float]: return wall_times(fn, sync, reps, warm)
  def rand(*shape): return torch.rand(*shape, device=dev)

  def gemm(n, reps=R):
    a, b = rand(n, n), rand(n, n)
    return rate(times(lambda: a @ b, reps), 2 * n**3 / 1e9, "GFLOP/s")
  def add():
    x, y = rand(N16M), rand(N16M)
    return rate(times(lambda: x + y), 3 * 4 * N16M / 1e9, "GB/s")
  def conv():
    x, w = rand(8, 32, 64, 64), rand(64, 32, 3, 3)
    return rate(times(lambda: F.conv2d(x, w, padding=1)), 2 * 8 * 64 * 64 * 64 * 32 * 9 / 1e9, "GFLOP/s")

  def train(net, opt, x, y):
    net.to(dev)
    opt = opt(net.parameters())
    x, y = x.to(dev), y.to(dev)
    def step():
      opt.zero_grad()
      out = net(x)
      F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1)).backward()
      opt.step()
    for _ in range(3): step()
    return rate(times(step, reps=R * 2), 1.0, "steps/s")

  class CNN(nn.Module):   # bench.py's cnn_step
    def __init__(self):
      super().__init__()
      self.c1, self.c2, self.l = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(16 * 5 * 5, 10)
    def forward(self, x): return self.l(F.max_pool2d(self.c2(F.max_pool2d(self.c1(x).relu(), 2)).relu(), 2).flatten(1))
  def cnn():
    # the parameters and the data are made on the CPU and moved: the same draws on both columns
    return train(CNN(), lambda p: torch.optim.SGD(p, lr=0.01), torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,)))

  V, D, H, L, T, B = (TF[k] for k in ("vocab", "dim", "heads", "layers", "seq", "batch"))
  class Block(nn.Module):   # bench.py's tf_step
    def __init__(self):
      super().__init__()
      self.ln1, self.qkv, self.o = nn.LayerNorm(D), nn.Linear(D, 3 * D), nn.Linear(D, D)
      self.ln2, self.fc, self.proj = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
    def forward(self, x):
      q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in self.qkv(self.ln1(x)).chunk(3, dim=2))
      x = x + self.o(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D))
      return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
  class Transformer(nn.Module):
    def __init__(self):
      super().__init__()
      self.tok, self.pos, self.blocks = nn.Embedding(V, D), nn.Embedding(T, D), nn.Sequential(*[Block() for _ in range(L)])
      self.ln, self.head = nn.LayerNorm(D), nn.Linear(D, V)
    def forward(self, idx): return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(torch.arange(T, device=idx.device)))))
  def tf():
    return train(Transformer(), lambda p: torch.optim.Adam(p, lr=1e-3), torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T)))

  benches = {"gemm512": lambda: gemm(512), "gemm1024": lambda: gemm(1024, reps=2 if args.quick else R), "add16M": add, "conv2d": conv,
             "cnn_train": cnn, "tf_train": tf}
  torch.set_warn_always(True)   # torchvulkan warns once per op it runs on the CPU for a shape it lacks, which TORCHVULKAN_STRICT misses
  for name in args.tasks.split(","):
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      try: res[name] = benches[name]()
      except Exception as e: res[name] = err(e)
    if (fb := [str(w.message) for w in caught if "Falling back to CPU" in str(w.message)]) and "med" in res[name]: res[name]["fallback"] = fb[0][:160]
    save()

if __name__ == "__main__": main()
