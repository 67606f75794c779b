#!/usr/bin/env python3
"""Soak: long runs must not grow. Three phases on DEV=VULKAN, each checking its data:
  jit      TinyJit calls of a small graph (replays, no re-record)
  alloc    alloc/free cycles of buffers of random sizes, each written and read back
  kernels  distinct kernels compiled, launched and released (tinygrad's runtime caches are cleared every 100)
Live Vulkan objects are counted by wrapping their create/destroy calls (the command buffers, fences and query pools of the queue's
batches are kept for reuse and bounded by queue.MAX_INFLIGHT: they are shown apart); RSS is read from /proc. After each phase's warm-up and at
its end the pending frees are run (synchronize, tinygrad's buffer cache emptied, gc, malloc_trim) and the figures taken: any object count
that grew, or RSS grown by more than --rss-slack MiB, fails the run (exit status 1).

  python scripts/soak.py                      # the full soak: 100,000 JIT calls, 10,000 alloc/free cycles, 2,000 kernels
  python scripts/soak.py --jit 2000 --alloc 500 --kernels 100   # a quick one
"""
import argparse, collections, ctypes, gc, os, sys, tempfile, time
os.environ.setdefault("DEV", "VULKAN")
os.environ.setdefault("CACHEDB", os.path.join(tempfile.mkdtemp(prefix="tinygrad_vk_soak_"), "cache.db"))   # 2,000 kernels of its own
import numpy as np

# create/destroy pairs: the object counted
PAIRS = {"memory": ("vkAllocateMemory", "vkFreeMemory"), "buffers": ("vkCreateBuffer", "vkDestroyBuffer"),
         "descriptor pools": ("vkCreateDescriptorPool", "vkDestroyDescriptorPool"), "pipelines": ("vkCreateComputePipelines", "vkDestroyPipeline"),
         "shader modules": ("vkCreateShaderModule", "vkDestroyShaderModule"), "query pools": ("vkCreateQueryPool", "vkDestroyQueryPool"),
         "command buffers": ("vkAllocateCommandBuffers", "vkFreeCommandBuffers"), "fences": ("vkCreateFence", "vkDestroyFence")}

class CountingLib:
  """Stands in for the `vulkan` cffi lib in the runtime modules and counts live objects (a create that succeeded, minus destroys)."""
  def __init__(self, real):
    self._real, self.live = real, collections.Counter()
    for kind, (create, destroy) in PAIRS.items():
      setattr(self, create, self._counted(getattr(real, create), kind, +1))
      setattr(self, destroy, self._counted(getattr(real, destroy), kind, -1))
  def _counted(self, fn, kind:str, step:int):
    def call(*args):
      res = fn(*args)
      if step < 0 or res == 0: self.live[kind] += step
      return res
    return call
  def __getattr__(self, name:str):   # every other function: straight through, looked up once
    setattr(self, name, fn := getattr(self._real, name))
    return fn

def malloc_trim():
  """Hand freed heap memory back to the OS (glibc keeps it in its arenas), so RSS shows what is held, not what was held."""
  try: ctypes.CDLL(None).malloc_trim(0)
  except (OSError, AttributeError): pass

def rss_mib() -> float:
  with open("/proc/self/status") as f: return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--jit", type=int, default=100_000)
  ap.add_argument("--alloc", type=int, default=10_000)
  ap.add_argument("--kernels", type=int, default=2_000)
  ap.add_argument("--rss-slack", type=float, default=16.0, help="MiB of RSS growth tolerated (allocator and interpreter noise)")
  args = ap.parse_args()

  from tinygrad_vk import vk, queue, program, graph, memory, device
  MAX_BATCHES = queue.MAX_INFLIGHT + 1
  lib = CountingLib(vk.lib)
  for m in (queue, program, graph, memory, device): m.lib = lib
  from tinygrad import Tensor, TinyJit, Device, dtypes
  from tinygrad.device import Buffer
  import tinygrad.engine.realize as realize, tinygrad.schedule as schedule, tinygrad.codegen as codegen
  dev = Device["VULKAN"]
  rng = np.random.default_rng(0)
  failed = False

  def settle():
    """Run every pending free: tinygrad's caches of programs and buffers let go, the queue drains, the deferred frees run."""
    realize.runtime_cache.clear()
    codegen.to_program_cache.clear()
    schedule.schedule_cache.clear()
    gc.collect()
    dev.synchronize()
    dev.allocator.free_cache()
    gc.collect()
    dev.synchronize()
    malloc_trim()

  def figures() -> dict:
    # what tinygrad's LRU buffer cache holds before it is emptied (freed buffers kept for reuse, by size): shown, not judged
    cached = sum(size * len(bufs) for (size, _), bufs in dev.allocator.cache.items()) / 2**20
    settle()
    live = dict(lib.live)
    # a batch (command buffer, fence, query pool) is kept for reuse; there are at most MAX_INFLIGHT + 1, the rest are graphs'
    nb = live.pop("fences", 0)
    live["command buffers"], live["query pools"] = live.get("command buffers", 0) - nb, live.get("query pools", 0) - nb
    return {"RSS MiB": round(rss_mib(), 1), **{k: live.get(k, 0) for k in PAIRS if k != "fences"}, f"batches (<= {MAX_BATCHES})": nb,
            "LRU cache MiB": round(cached, 1)}

  def phase(name:str, n:int, warm:int, step):
    nonlocal failed
    st = time.perf_counter()
    for i in range(warm): step(i)
    before = figures()
    for i in range(warm, n): step(i)
    after = figures()
    grew = [k for k in before if k not in ("RSS MiB", f"batches (<= {MAX_BATCHES})", "LRU cache MiB") and after[k] > before[k]]
    grew += ["RSS MiB"] if after["RSS MiB"] > before["RSS MiB"] + args.rss_slack else []
    grew += [k for k in after if k.startswith("batches") and after[k] > MAX_BATCHES]
    failed |= bool(grew)
    print(f"{name}: {n} in {time.perf_counter() - st:.1f} s; after warm-up ({warm}) -> end:")
    for k in before: print(f"  {k:18s} {before[k]:>10} -> {after[k]:<10}{'  GREW' if k in grew else ''}")

  # ---- TinyJit: a three-kernel graph replayed on the same buffers
  x0 = rng.uniform(-1, 1, 4099).astype(np.float32)
  x, w = Tensor(x0).realize(), Tensor(rng.uniform(-1, 1, 4099).astype(np.float32)).realize()
  @TinyJit
  def step_jit(a, b): return ((a * b).contiguous() + a * 0.5).contiguous().sum().realize()
  ref = float((x0 * w.numpy() + x0 * np.float32(0.5)).sum())
  def jit(i):
    out = step_jit(x, w)
    if i % 10_000 == 0 or i == args.jit - 1: assert abs(out.item() - ref) < 1e-3 * max(1, abs(ref)), (i, out.item(), ref)
  phase("jit calls", args.jit, max(1000, args.jit // 100), jit)   # warm-up: the host runs up to MAX_INFLIGHT batches ahead

  # ---- alloc/free of random sizes, written and read back
  def alloc(i):
    n = int(rng.integers(1, 1 << 18))
    data = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    b = Buffer("VULKAN", n, dtypes.int32, initial_value=data.tobytes())
    if not np.array_equal(np.frombuffer(b.as_memoryview(), np.int32), data): raise AssertionError(f"cycle {i}: read back differs")
    del b
  phase("alloc/free cycles", args.alloc, max(1, args.alloc // 20), alloc)

  # ---- distinct kernels: each a constant of its own, compiled, launched, checked, then released
  k0 = rng.uniform(-2, 2, 1031).astype(np.float32)
  kt = Tensor(k0).realize()
  def kernel(i):
    c = 1 + i / 4096
    out = (kt * c + i).numpy()
    if not np.allclose(out, k0 * np.float32(c) + np.float32(i), rtol=1e-6, atol=1e-5): raise AssertionError(f"kernel {i}: wrong result")
    if i % 100 == 99: settle()
  phase("distinct kernels", args.kernels, max(100, args.kernels // 10), kernel)

  print("soak:", "FAILED (see GREW)" if failed else "ok, nothing grew")
  return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
