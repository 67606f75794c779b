#!/usr/bin/env python3
"""Big buffers and many allocations on DEV=VULKAN, checked against numpy: too big or too slow for the test suite on lavapipe.

  python scripts/big_check.py [--skip-soak] [--cycles 10000]

- alloc/free cycles of random sizes through tinygrad's LRU cache, every byte checked: RSS and live VkDeviceMemory stay within
  the heap budget (before the budget: RSS 184 -> 2014 MiB on lavapipe's 2 GiB heap);
- GPT-2 small shapes: the token embedding (50257 x 768 float32, 154 MB, past lavapipe's 128 MiB maxStorageBufferRange): an
  embedding lookup and the logits x @ wte.T;
- the sum of 300M random float32 (1.2 GB), Tensor.ones(300_000_000).sum() and the same over a materialized 1.2 GB buffer.
Under VULKAN_PROFILE=min (no buffer device address, 128 MiB range, 4 descriptors) the big buffers go in pieces of workgroups or
split into windows (renderer/abi.py); elsewhere by buffer device address.
Prints one line per check and exits non-zero on any mismatch.
"""
import argparse, sys, time
import numpy as np
from tinygrad import Tensor, Device, dtypes
from tinygrad.device import Buffer

def rss_mib() -> float:
  with open("/proc/self/status") as f: return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

def check(name:str, ok:bool, detail:str, st:float) -> bool:
  print(f"{'ok  ' if ok else 'FAIL'} {name:44s} {detail} ({time.perf_counter() - st:.1f} s)", flush=True)
  return ok

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--skip-soak", action="store_true")
  ap.add_argument("--cycles", type=int, default=10_000)
  args = ap.parse_args()
  dev, rng, ok = Device["VULKAN"], np.random.default_rng(0), True
  print(f"{dev.phys.name}: maxStorageBufferRange {dev.caps.range >> 20} MiB, heap {dev.phys.heaps[0][0] >> 20} MiB, bda {'bda' in dev.caps}")

  if not args.skip_soak:
    st, rss0, peak_rss, alloc = time.perf_counter(), rss_mib(), 0.0, dev.allocator
    peak_mem = 0
    for i in range(args.cycles):
      n = int(np.exp(rng.uniform(np.log(1 << 10), np.log(16 << 20))))
      data = rng.integers(0, 256, n, dtype=np.uint8)
      b = Buffer("VULKAN", n, dtypes.uint8, initial_value=data.tobytes())
      if bytes(b.as_memoryview()) != data.tobytes(): ok = check(f"alloc/free cycle {i}", False, "data mismatch", st)
      del b
      peak_mem = max(peak_mem, sum(alloc.heap_used))
      if i % 100 == 0: peak_rss = max(peak_rss, rss_mib())
    budget = int(dev.phys.heaps[0][0] * 0.8) >> 20
    ok &= check(f"{args.cycles} alloc/free cycles, 1 KiB-16 MiB", peak_mem >> 20 <= budget,
                f"RSS {rss0:.0f} -> peak {peak_rss:.0f} MiB, VkDeviceMemory peak {peak_mem >> 20} MiB (budget {budget} MiB), "
                f"{alloc.count} allocations live", st)
  st = time.perf_counter()
  wte = rng.normal(0, 0.02, (50257, 768)).astype(np.float32)
  tw, toks = Tensor(wte, device="VULKAN").realize(), np.array([[50256, 0, 31337, 464, 50000]], dtype=np.int32)
  emb = tw[Tensor(toks, device="VULKAN")].numpy()   # tinygrad's gather: a one-hot reduction over the vocabulary
  ok &= check("embedding lookup 50257x768", np.array_equal(emb, wte[toks]), f"max err {np.abs(emb - wte[toks]).max():.1e}", st)
  st = time.perf_counter()
  x = rng.normal(0, 1, (5, 768)).astype(np.float32)
  logits, ref = (Tensor(x, device="VULKAN") @ tw.T).numpy(), x @ wte.T
  ok &= check("logits x @ wte.T (5x768 @ 768x50257)", np.allclose(logits, ref, rtol=1e-4, atol=1e-4), f"max err {np.abs(logits - ref).max():.1e}", st)
  del tw

  st = time.perf_counter()
  a = rng.uniform(-1, 1, 300_000_000).astype(np.float32)
  s, ref = Tensor(a, device="VULKAN").sum().item(), a.astype(np.float64).sum()
  ok &= check("sum of 300M float32 (1.2 GB)", abs(s - ref) < 1e-5 * np.abs(a).sum(), f"{s:.6g} vs {ref:.6g} (|diff| {abs(s - ref):.1e})", st)
  del a
  st = time.perf_counter()
  ok &= check("Tensor.ones(300_000_000).sum()", (s := Tensor.ones(300_000_000, device="VULKAN").sum().item()) == 3e8, f"{s:.0f}", st)
  st = time.perf_counter()
  s = Tensor.ones(300_000_000, device="VULKAN").contiguous().sum().item()
  ok &= check("  same over a 1.2 GB buffer (.contiguous())", s == 3e8, f"{s:.0f}", st)

  print("all match" if ok else "MISMATCH")
  return 0 if ok else 1

if __name__ == "__main__": sys.exit(main())
