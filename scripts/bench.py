#!/usr/bin/env python3
"""tinygrad DEV=VULKAN beside DEV=CPU, DEV=WEBGPU, numpy and the raw Vulkan floor on the same driver, in one run.

  python scripts/bench.py [--quick] [--beam] [--json bench.json]

Each tinygrad device runs in a subprocess of its own (DEV is read at import) and writes its figures to a JSON file after every
benchmark, so a crash or timeout loses only what had not run yet. VULKAN runs with each renderer: the SPIR-V renderer (column
VULKAN, DEV=VULKAN:SPIRV) and the GLSL one (column VULKAN:GLSL: the cold rows and kernel throughput; the "paired" rows time both
renderers call by call in one process, the fair kernel-speed comparison on a shared host); the SPIR-V one again with
VULKAN_FORCE_STAGING=1 (copies), VULKAN_GRAPH=0 (TinyJit without the command-buffer graph) and LP_NUM_THREADS=0. Every figure is
the median of several timed runs after warm-up, with min and max. The floor (scripts/vkfloor.py) uses the `vulkan` package
directly, without tinygrad. The WEBGPU column is tinygrad's own WebGPU backend on Dawn, the peer GPU-style backend, when the
`dawn-python` wheel is installed (`pip install -e .[bench]`): Dawn picks its Vulkan adapter, lavapipe here.

The torchvulkan and torch CPU columns are PyTorch on the rows it shares with tinygrad (GEMM 512 and 1024, add 16M, conv2d, the CNN
and transformer training steps, each built the same way), run by scripts/bench_torch.py with a python of their own, each row in a
fresh process, torch with its default threads (OMP_NUM_THREADS passes through). torchvulkan (PyTorch's "vulkan" device, Slang
kernels) needs Vulkan 1.3, which lavapipe has. A row first runs with TORCHVULKAN_STRICT=1; one that needs an op on the CPU shows
"CPU fallback" and its figure, the op under notes. Install them once, outside the repo:

  python3.11 -m venv ~/.cache/tinygrad_vk/torch-venv
  ~/.cache/tinygrad_vk/torch-venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # CPU build first
  ~/.cache/tinygrad_vk/torch-venv/bin/pip install torchvulkan==0.2.1

(torch pinned first, or pip fetches the CUDA build; a local torch-2.13.0+cpu wheel file installs the same). bench.py finds that
venv by itself; --torch-python PATH or TORCH_PYTHON=PATH names another python. Without one the columns say "(not installed)".

The language-model rows (full mode) include the first prompt's forward pass in a fresh process with CACHELEVEL=0 and
MESA_SHADER_CACHE_DISABLE=true, compile included (VULKAN and CPU). The llama.cpp Vulkan and llama.cpp CPU columns (full mode, the
language-model rows) are llama.cpp's llama-bench on the same model
architecture, ggml-vulkan on the driver the loader picks and ggml's CPU backend, where llama-bench is on PATH
(scripts/llama_cpp.py says how to install it: Debian sid packages it, so here it runs in the sid root, on Mesa 26.2).
"""
import argparse, functools, json, os, platform, random, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
N16M, MiB64 = 16 << 20, 64 << 20
# the transformer training step's model, the same on every column: pre-LayerNorm causal decoder, tanh GELU MLP 4x wide, Adam
TF = {"vocab": 128, "dim": 64, "heads": 4, "layers": 2, "seq": 32, "batch": 8}

# issue 41's language model (LLaMA architecture: scripts/llama_check.py's model): a 64-token prompt, then decode steps under TinyJit
LLM = {"dim": 512, "heads": 8, "layers": 8, "hidden": 1376, "vocab": 32000, "prompt": 64, "decode": 16}

# (key, label, unit); the order is the table's
ROWS = [("gemm512", "GEMM fp32 512", "GFLOP/s"), ("gemm1024", "GEMM fp32 1024", "GFLOP/s"), ("gemm2048", "GEMM fp32 2048", "GFLOP/s"),
        ("gemm1024_beam2", "GEMM fp32 1024 BEAM=2", "GFLOP/s"),
        ("add16M", "add 16M f32", "GB/s"), ("sum16M", "sum 16M f32", "GB/s"),
        ("gemm1024_bda", "GEMM 1024, by device address", "GFLOP/s"), ("add16M_bda", "add 16M, by device address", "GB/s"),
        ("gemm1024_past", "GEMM 1024 past a 2 MiB range", "GFLOP/s"), ("add16M_past", "add 16M past a 16 MiB range", "GB/s"),
        ("conv2d", "conv2d b8 32->64 3x3 64x64", "GFLOP/s"),
        ("paired_gemm1024", "GEMM 1024 SPIR-V/GLSL, paired", "x"), ("paired_add16M", "add 16M SPIR-V/GLSL, paired", "x"),
        ("paired_conv2d", "conv2d SPIR-V/GLSL, paired", "x"),
        ("launch_eager", "launch eager realize()", "us"), ("launch_eager_inline", "  same, LP_NUM_THREADS=0", "us"),
        ("launch_eager_sync", "launch eager realize()+sync", "us"),
        ("launch_jit", "launch TinyJit, per kernel", "us"), ("launch_jit_nograph", "  same, VULKAN_GRAPH=0", "us"),
        ("launch_jit_inline", "  same, LP_NUM_THREADS=0", "us"),
        ("wide", "21-buffer kernel, TinyJit", "us"), ("wide_windows", "  same, min: windowed", "us"),
        ("wide_gather", "  same, min, share off: copies", "us"),
        ("compile_schedule", "cold: schedule", "ms"), ("compile_codegen", "cold: tinygrad codegen", "ms"),
        ("compile_compiler", "cold: compiler (source->SPIR-V)", "ms"), ("compile_pipeline", "cold: pipeline + 1st dispatch", "ms"),
        ("cnn_first", "cold: CNN train step, 1st call", "ms"), ("cnn_first_serial", "  same, PARALLEL=0", "ms"),
        ("cnn_first_compile", "  of it codegen+compile", "ms"),
        ("copy_h2d", "copy 64 MiB host->device", "GB/s"), ("copy_d2h", "copy 64 MiB device->host", "GB/s"),
        ("copy_h2d_staging", "copy H->D, VULKAN_FORCE_STAGING=1", "GB/s"), ("copy_d2h_staging", "copy D->H, VULKAN_FORCE_STAGING=1", "GB/s"),
        ("copy_h2d_raw", "copy H->D, allocator._copyin", "GB/s"), ("copy_d2h_raw", "copy D->H, allocator._copyout", "GB/s"),
        ("memcpy", "memcpy 64 MiB (np.copyto)", "GB/s"),
        ("cnn_train", "CNN train step (TinyJit, bs32)", "steps/s"), ("tf_train", "transformer train step (2x64, b8)", "steps/s"),
        *((f"llm_{k}_{dt}", f"LLaMA 512x8 {k} {dt}{', 64 tokens' if k == 'prefill' else ''}", "tokens/s")
          for dt in ("float", "half") for k in ("prefill", "decode")),
        ("llm_first", "cold: LLaMA 512x8 float 1st prefill", "ms")]
COLS = ["VULKAN", "VULKAN:GLSL", "CPU", "WEBGPU", "torchvulkan", "torch CPU", "numpy", "floor", "llama.cpp Vulkan", "llama.cpp CPU"]
# the rows scripts/bench_torch.py runs; the torch peers' python: --torch-python, else $TORCH_PYTHON, else this venv's when it exists
TORCH_TASKS = ["gemm512", "gemm1024", "add16M", "conv2d", "cnn_train", "tf_train"]
TORCH_VENV = os.path.expanduser("~/.cache/tinygrad_vk/torch-venv")
TORCH_LABELS = {"gemm512": "GEMM 512", "gemm1024": "GEMM 1024", "add16M": "add 16M", "conv2d": "conv2d", "cnn_train": "CNN train steps/s",
                "tf_train": "transformer train steps/s"}
# floor figures shown on the row of the tinygrad figure they bound
FLOOR_ROWS = {"launch_jit": "batched_dispatch", "launch_eager_sync": "submit_dispatch", "add16M": "add_vec4", "gemm1024": "gemm_tiled_1024",
              "conv2d": "conv_tiled", "compile_compiler": "cold_glslang", "compile_pipeline": "cold_pipeline"}

def stat(vals:list[float], unit:str, **extra) -> dict:
  return {"med": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals), "unit": unit, **extra}

def wall_times(fn, sync, reps:int, warm:int) -> list[float]:
  """Wall seconds of fn() up to device completion (sync); the warm-up runs compile and fill the allocator's cache."""
  for _ in range(warm):
    fn()
    sync()
  out = []
  for _ in range(reps):
    st = time.perf_counter()
    fn()
    sync()
    out.append(time.perf_counter() - st)
  return out
def rate(ts, amount, unit): return stat([amount / t for t in ts], unit)

def err(e:BaseException) -> dict:
  lines = [l for l in str(e).strip().splitlines() if l.strip()]
  return {"error": f"{type(e).__name__}: {lines[0][:160] if lines else ''}"}

# ---------------------------------------------------------------- worker: one tinygrad device, in its own process

def worker(tasks:list[str], quick:bool, out_path:str):
  import numpy as np
  from tinygrad import Tensor, Device, TinyJit, nn
  from tinygrad.helpers import Context, GlobalCounters
  from tinygrad.engine.realize import compile_linear, run_linear
  res: dict = {}
  def save():
    with open(out_path, "w") as f: json.dump(res, f)
  try:
    dev = Device[Device.DEFAULT]
    res["device"] = Device.DEFAULT
    if hasattr(dev, "phys"): res["info"] = {"name": dev.phys.name, "driver": dev.phys.driver}
  except Exception as e:
    res["error"] = err(e)["error"]
    save()
    return
  R, WARM = (3, 1) if quick else (7, 2)
  Tensor.manual_seed(0)   # bench_torch.py seeds torch with 0 as well

  def times(fn, reps=R, warm=WARM) -> list[float]: return wall_times(fn, dev.synchronize, reps, warm)

  def gemm(n, reps=R, warm=WARM):
    a, b = Tensor.rand(n, n).realize(), Tensor.rand(n, n).realize()
    return rate(times(lambda: (a @ b).realize(), reps, warm), 2 * n**3 / 1e9, "GFLOP/s")

  def gemm_beam():
    with Context(BEAM=2): return gemm(1024, reps=3)

  def add():
    x, y = Tensor.rand(N16M).realize(), Tensor.rand(N16M).realize()
    return rate(times(lambda: (x + y).realize()), 3 * 4 * N16M / 1e9, "GB/s")

  def sum_():
    x = Tensor.rand(N16M).realize()
    return rate(times(lambda: x.sum().realize()), 4 * N16M / 1e9, "GB/s")

  def conv():
    x, w = Tensor.rand(8, 32, 64, 64).realize(), Tensor.rand(64, 32, 3, 3).realize()
    return rate(times(lambda: x.conv2d(w, padding=1).realize()), 2 * 8 * 64 * 64 * 64 * 32 * 9 / 1e9, "GFLOP/s")

  def paired():
    # the renderers side by side in one process (Context(DEV=VULKAN:<renderer>) picks one per call), alternating call by call:
    # separate processes minutes apart differ by +-30% on a loaded host, a pair of consecutive calls shares its load
    n, out = (5 if quick else 15), {}
    a, b = Tensor.rand(1024, 1024).realize(), Tensor.rand(1024, 1024).realize()
    x, y = Tensor.rand(N16M).realize(), Tensor.rand(N16M).realize()
    cx, cw = Tensor.rand(8, 32, 64, 64).realize(), Tensor.rand(64, 32, 3, 3).realize()
    for key, fn in (("gemm1024", lambda: (a @ b).realize()), ("add16M", lambda: (x + y).realize()),
                    ("conv2d", lambda: cx.conv2d(cw, padding=1).realize())):
      t: dict[str, list[float]] = {"SPIRV": [], "GLSL": []}
      for i in range(n + WARM):
        for r in (("SPIRV", "GLSL") if i % 2 else ("GLSL", "SPIRV")):
          with Context(DEV=f"{Device.DEFAULT}:{r}"):
            st = time.perf_counter()
            fn()
            dev.synchronize()
            if i >= WARM: t[r].append(time.perf_counter() - st)
      out[f"paired_{key}"] = stat([g / s for s, g in zip(t["SPIRV"], t["GLSL"])], "x")   # GLSL time / SPIR-V time = speed ratio
    return out

  def eager(sync:bool):
    n, a = (100 if quick else 500), [Tensor.zeros(1).contiguous().realize()]
    def loop():
      for _ in range(n):
        a[0] = (a[0] + 1).realize()
        if sync: dev.synchronize()
    return stat([t / n * 1e6 for t in times(loop)], "us")

  def jit():
    @TinyJit
    def chain(x):
      for _ in range(100): x = (x * 1.0001 + 1).contiguous()   # contiguous: each step its own dependent kernel
      return x
    x, k = Tensor.rand(16).realize(), 10
    for _ in range(3): chain(x)   # the JIT captures on the second call
    k0 = GlobalCounters.kernel_count
    chain(x)
    dev.synchronize()
    def loop():
      for _ in range(k): chain(x)
    return stat([t / (100 * k) * 1e6 for t in times(loop)], "us", kernels_per_call=GlobalCounters.kernel_count - k0)

  def wide():
    # one output and 20 inputs: under VULKAN_PROFILE=min (4 descriptors) a windowed kernel (renderer/abi.py), its buffers in one
    # memory block (no copy) or, with VULKAN_DISABLE=share, 18 of them gathered into a scratch window by copies first
    xs = [Tensor.rand(1 << 16).realize() for _ in range(20)]
    @TinyJit
    def f(*a): return functools.reduce(lambda p, q: p + q, a).realize()
    for _ in range(3): f(*xs)
    def loop():
      f(*xs)
      dev.synchronize()
    return stat([t * 1e6 for t in times(loop)], "us")

  def compile_cost():
    # a fresh constant makes a kernel no cache has seen; CACHELEVEL=0 also keeps the disk cache out of it
    comp_cls, acc, base = type(dev.compiler), {"compile": 0.0, "runtime": 0.0}, dev.runtime
    orig = comp_cls.compile
    def timed(name, fn):
      def wrap(*a, **kw):
        st = time.perf_counter()
        try: return fn(*a, **kw)
        finally: acc[name] += time.perf_counter() - st
      return wrap
    comp_cls.compile, dev.runtime = timed("compile", orig), timed("runtime", base)
    x, rows = Tensor.rand(1024).realize(), {k: [] for k in ("schedule", "codegen", "compiler", "pipeline", "pipeline_create")}
    try:
      for _ in range(R + 1):
        acc.update(compile=0.0, runtime=0.0)
        with Context(CACHELEVEL=0):
          t0 = time.perf_counter()
          linear, var_vals = (x * random.uniform(1, 2) + random.uniform(0, 1)).sqrt().linear_with_vars()
          t1 = time.perf_counter()
          compile_linear(linear)   # codegen + compiler; run_linear below finds the result in the to_program cache
          t2 = time.perf_counter()
          run_linear(linear, var_vals)
          dev.synchronize()
          t3 = time.perf_counter()
        if acc["compile"] == 0: raise RuntimeError("the compiler was not called: the kernel came from a cache")
        for k, v in (("schedule", t1 - t0), ("codegen", t2 - t1 - acc["compile"]), ("compiler", acc["compile"]),
                     ("pipeline", t3 - t2), ("pipeline_create", acc["runtime"])): rows[k].append(v * 1e3)
    finally: comp_cls.compile, dev.runtime = orig, base
    rows = {k: v[1:] for k, v in rows.items()}   # the first kernel also pays one-time imports and device set-up
    return {f"compile_{k}": stat(v, "ms") for k, v in rows.items() if k != "pipeline_create"} | \
           {"compile_pipeline": stat(rows["pipeline"], "ms", pipeline_create_ms=statistics.median(rows["pipeline_create"]))}

  def copies():
    arr = np.random.rand(N16M).astype(np.float32)
    t, mv = Tensor(arr).realize(), memoryview(bytearray(MiB64))
    buf, alloc = t.uop.buffer._buf, dev.allocator
    # Tensor copies, then the allocator's own copyin/copyout with no Tensor, no allocation (.numpy() builds a fresh bytearray)
    return {"copy_h2d": rate(times(lambda: Tensor(arr).realize()), MiB64 / 1e9, "GB/s"),
            "copy_d2h": rate(times(lambda: t.numpy()), MiB64 / 1e9, "GB/s"),
            "copy_h2d_raw": rate(times(lambda: alloc._copyin(buf, memoryview(arr).cast("B"))), MiB64 / 1e9, "GB/s"),
            "copy_d2h_raw": rate(times(lambda: alloc._copyout(mv, buf)), MiB64 / 1e9, "GB/s")}

  def cnn_step():
    class Net:
      def __init__(self): self.c1, self.c2, self.l = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(16 * 5 * 5, 10)
      def __call__(self, x):
        x = self.c1(x).relu().max_pool2d()
        return self.l(self.c2(x).relu().max_pool2d().flatten(1))
    net = Net()
    opt = nn.optim.SGD(nn.state.get_parameters(net), lr=0.01)
    @TinyJit
    def step(x, y):
      with Context(TRAINING=1):
        opt.zero_grad()
        loss = net(x).sparse_categorical_crossentropy(y).backward()
        return loss.realize(*opt.schedule_step())
    x, y = Tensor.randn(32, 1, 28, 28).realize(), Tensor.randint(32, high=10).realize()
    dev.synchronize()
    return step, x, y

  def train(step, x, y):
    for _ in range(3): step(x, y)
    return rate(times(lambda: step(x, y), reps=R * 2), 1.0, "steps/s")

  def tf_step():
    # TF's transformer (scripts/bench_torch.py builds the same in torch): token + position embeddings, L pre-LayerNorm blocks, head
    V, D, H, L, T, B = (TF[k] for k in ("vocab", "dim", "heads", "layers", "seq", "batch"))
    class Block:
      def __init__(self):
        self.ln1, self.qkv, self.o = nn.LayerNorm(D), nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.ln2, self.fc, self.proj = nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
      def __call__(self, x):
        q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in self.qkv(self.ln1(x)).chunk(3, dim=2))
        x = x + self.o(q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(B, T, D))
        return x + self.proj(self.fc(self.ln2(x)).gelu())   # tinygrad's gelu is the tanh one
    class Transformer:
      def __init__(self):
        self.tok, self.pos, self.blocks, self.ln, self.head = nn.Embedding(V, D), nn.Embedding(T, D), [Block() for _ in range(L)], \
          nn.LayerNorm(D), nn.Linear(D, V)
      def __call__(self, idx): return self.head(self.ln((self.tok(idx) + self.pos(Tensor.arange(T))).sequential(self.blocks)))
    net = Transformer()
    opt = nn.optim.Adam(nn.state.get_parameters(net), lr=1e-3)
    @TinyJit
    def step(x, y):
      with Context(TRAINING=1):
        opt.zero_grad()
        loss = net(x).reshape(B * T, V).sparse_categorical_crossentropy(y.reshape(B * T)).backward()
        return loss.realize(*opt.schedule_step())
    return step, Tensor.randint(B, T, high=V).realize(), Tensor.randint(B, T, high=V).realize()

  def llm_model(dt, rng):
    # LLM's model (scripts/llama_check.py) with random weights in dtype dt, and a prompt
    sys.path.insert(0, HERE)
    import llama_check as L
    from tinygrad.nn.state import get_state_dict
    L.MAX_CONTEXT = LLM["prompt"] + LLM["decode"] + 4
    model = L.Llama(LLM["dim"], LLM["heads"], LLM["heads"], LLM["layers"], LLM["vocab"], LLM["hidden"])
    for k, t in get_state_dict(model).items():
      t.replace(Tensor((rng.normal(1, 0.1, t.shape) if "norm" in k else rng.normal(0, 0.02, t.shape)).astype(np.float32)).cast(dt).realize())
    return L, model, rng.integers(0, LLM["vocab"], LLM["prompt"]).tolist()

  def llm():
    # the prompt's forward pass timed after one warm-up, then greedy decode steps under TinyJit (the KV cache at a symbolic
    # position), the first 3 not timed; in float and in half
    from tinygrad import Variable, dtypes
    out, rng = {}, np.random.default_rng(0)
    for name, dt in (("float", dtypes.float), ("half", dtypes.half)):
      L, model, prompt = llm_model(dt, rng)
      ts = wall_times(lambda: model(Tensor([prompt]), 0), dev.synchronize, 2 if quick else 3, 1)
      step = TinyJit(lambda tok, pos: model(tok, pos).argmax(-1).realize())
      tok, steps = int(model(Tensor([prompt]), 0).argmax().item()), []
      for i in range(LLM["decode"]):
        st = time.perf_counter()
        tok = int(step(Tensor([[tok]]), Variable("start_pos", 1, L.MAX_CONTEXT - 1).bind(LLM["prompt"] + i)).item())
        steps.append(time.perf_counter() - st)
      out |= {f"llm_prefill_{name}": rate(ts, LLM["prompt"], "tokens/s"), f"llm_decode_{name}": rate(steps[3:], 1, "tokens/s")}
    return out

  def llm_first():
    # a fresh process without tinygrad's disk cache or Mesa's (see main): the prompt's first forward pass in float, compile included
    from tinygrad import dtypes
    _, model, prompt = llm_model(dtypes.float, np.random.default_rng(0))
    dev.synchronize()
    st = time.perf_counter()
    model(Tensor([prompt]), 0).realize()
    dev.synchronize()
    return {"llm_first": stat([(time.perf_counter() - st) * 1e3], "ms")}

  def cnn_first():
    # a fresh process without tinygrad's disk cache (see main): schedule + codegen + compile + pipelines + run of a first step
    import tinygrad.codegen as cg
    step, x, y = cnn_step()
    acc, orig = [0.0], cg.do_to_program
    def timed(*a, **kw):
      st = time.perf_counter()
      try: return orig(*a, **kw)
      finally: acc[0] += time.perf_counter() - st
    cg.do_to_program = timed   # sees every kernel only when they compile in this process (PARALLEL=0)
    st = time.perf_counter()
    step(x, y)
    dev.synchronize()
    t = (time.perf_counter() - st) * 1e3
    return {"cnn_first": stat([t], "ms"), "cnn_first_compile": stat([acc[0] * 1e3], "ms")} if acc[0] else {"cnn_first": stat([t], "ms")}

  benches = {"gemm512": lambda: gemm(512), "gemm1024": lambda: gemm(1024, reps=2 if quick else R),
             "gemm2048": lambda: gemm(2048, reps=3, warm=1), "gemm1024_beam2": gemm_beam, "add16M": add, "sum16M": sum_, "conv2d": conv,
             "launch_eager": lambda: eager(False), "launch_eager_sync": lambda: eager(True), "launch_jit": jit, "wide": wide,
             "paired": paired,
             "compile": compile_cost, "copy": copies, "cnn_train": lambda: train(*cnn_step()), "tf_train": lambda: train(*tf_step()),
             "cnn_first": cnn_first, "llm": llm, "llm_first": llm_first}
  for name in tasks:
    try:
      r = benches[name]()
      res.update(r if "med" not in r else {name: r})
    except Exception as e:
      res[name] = err(e)
    save()

# ---------------------------------------------------------------- the parent: subprocesses, numpy, table, ratios

def run_sub(argv:list[str], env:dict, timeout:float, python:str=sys.executable) -> dict:
  """Run a worker or the floor; whatever it saved survives a crash, the error is kept."""
  with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f: path = f.name
  res, msg = {}, None
  try:
    p = subprocess.run([python] + argv + ["--out", path], env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0: msg = f"exit {p.returncode}: " + (p.stderr.strip().splitlines() or ["?"])[-1][:160]
  except subprocess.TimeoutExpired: msg = f"timed out after {timeout:.0f}s"
  try:
    with open(path) as f: res = json.load(f)
  except (OSError, ValueError): pass
  os.unlink(path)
  if msg: res["error"] = (res.get("error", "") + " " + msg).strip()
  return res

def numpy_bench(quick:bool) -> dict:
  import numpy as np
  R = 3 if quick else 7
  def times(fn, reps=R):
    fn()
    out = []
    for _ in range(reps):
      st = time.perf_counter()
      fn()
      out.append(time.perf_counter() - st)
    return out
  res = {}
  for n in (512, 1024) + (() if quick else (2048,)):
    a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
    res[f"gemm{n}"] = stat([2 * n**3 / t / 1e9 for t in times(lambda: a @ b)], "GFLOP/s")
  x, y, z = (np.random.rand(N16M).astype(np.float32) for _ in range(3))
  res["add16M"] = stat([3 * 4 * N16M / t / 1e9 for t in times(lambda: np.add(x, y, out=z))], "GB/s")
  res["sum16M"] = stat([4 * N16M / t / 1e9 for t in times(lambda: x.sum())], "GB/s")
  # the copy floor: a plain memcpy of 64 MiB between buffers that exist already
  res["memcpy"] = stat([MiB64 / t / 1e9 for t in times(lambda: np.copyto(z, x))], "GB/s")
  return res

def dawn_library() -> str|None:
  """libwebgpu_dawn from the dawn-python wheel (tinygrad loads it from WEBGPU_PATH), or None when it is not installed."""
  import importlib.util, glob
  if (spec := importlib.util.find_spec("pydawn")) is None or not spec.submodule_search_locations: return None
  libs = glob.glob(os.path.join(spec.submodule_search_locations[0], "lib", f"libwebgpu_dawn*{platform.machine()}*.so"))
  return libs[0] if libs else None

def torch_column(python:str, device:str, quick:bool, timeout:float) -> dict:
  """A torch peer, each row in a fresh process of its own (torch CPU's CNN step ran 30x slower after the conv2d row in the same
  process). On torchvulkan a row runs under TORCHVULKAN_STRICT=1 first (an op without a Vulkan kernel raises instead of running on
  the CPU); one that fails there and runs without it keeps its figure, marked as a CPU fallback with the op strict mode named."""
  res: dict = {}
  for t in TORCH_TASKS:
    argv = [os.path.join(HERE, "bench_torch.py"), "--device", device, "--tasks", t] + (["--quick"] if quick else [])
    r = run_sub(argv, {"TORCHVULKAN_STRICT": "1"} if device == "vulkan" else {}, timeout, python)
    if device == "vulkan" and "med" not in r.get(t, {}) and "info" in r:
      r2 = run_sub(argv, {"TORCHVULKAN_STRICT": "0"}, timeout, python)
      if "med" in r2.get(t, {}): r2[t]["fallback"] = r.get(t, {}).get("error") or r.get("error", "?")
      r = r2
    if "info" not in r:   # torch or torchvulkan did not start: no row will
      return {**res, "error": r.get("error", "no result")}
    res["info"] = r["info"]
    res[t] = r.get(t, {"error": r.get("error", "missing")})
  return res

def machine() -> dict:
  cpu = platform.processor()
  try: cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
  except (OSError, StopIteration): pass
  import numpy, importlib.metadata as md
  return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": numpy.__version__,
          "tinygrad": md.version("tinygrad"), "LP_NUM_THREADS": os.environ.get("LP_NUM_THREADS", "(unset)"),
          "dawn-python": md.version("dawn-python") if dawn_library() else "(not installed)"}

def fmt(r:dict|None) -> str:
  if r is None: return "-"
  if "med" not in r: return "n/a"
  def g(v): return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
  return f"CPU fallback {g(r['med'])}" if "fallback" in r else f"{g(r['med'])} [{g(r['min'])}-{g(r['max'])}]"

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--quick", action="store_true", help="smaller set, fewer repeats: a few minutes on 2 cores")
  ap.add_argument("--beam", action="store_true", help="also GEMM 1024 with BEAM=2 on VULKAN (slow)")
  ap.add_argument("--json", default="bench.json")
  ap.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON", os.path.join(TORCH_VENV, "bin", "python")),
                  help="python of a venv with torch and torchvulkan, for the torchvulkan and torch CPU columns (env TORCH_PYTHON; "
                       "default ~/.cache/tinygrad_vk/torch-venv)")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  ap.add_argument("--out", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(args.worker.split(","), args.quick, args.out)

  t_start, q = time.perf_counter(), ["--quick"] if args.quick else []
  tasks = ["gemm512", "gemm1024"] + ([] if args.quick else ["gemm2048"]) + \
          ["add16M", "sum16M", "conv2d", "paired", "launch_eager", "launch_eager_sync", "launch_jit", "wide", "compile", "copy", "cnn_train",
           "tf_train"] + ([] if args.quick else ["llm"])
  me, limit = os.path.abspath(__file__), 300 if args.quick else 1200
  info = machine()
  groups = {"compile": [f"compile_{k}" for k in ("schedule", "codegen", "compiler", "pipeline")],
            "copy": ["copy_h2d", "copy_d2h", "copy_h2d_raw", "copy_d2h_raw"], "paired": ["paired_gemm1024", "paired_add16M", "paired_conv2d"],
            "llm": [f"llm_{k}_{dt}" for dt in ("float", "half") for k in ("prefill", "decode")]}
  keys = [k for t in tasks for k in groups.get(t, [t])]
  cpu_tasks = [t for t in tasks if t != "paired"]   # the renderer pairing is VULKAN's own
  expected = {"VULKAN": keys, "CPU": [k for t in cpu_tasks for k in groups.get(t, [t])]}
  absent: dict[str, list[str]] = {}   # the rows of an optional column whose peer is not installed
  results = {"VULKAN": run_sub([me, "--worker", ",".join(tasks)] + q, {"DEV": "VULKAN:SPIRV"}, limit)}
  # the GLSL renderer: cold rows and kernel throughput
  glsl_tasks = ["gemm512", "gemm1024", "add16M", "conv2d", "compile", "cnn_train", "tf_train"]
  results["VULKAN:GLSL"] = run_sub([me, "--worker", ",".join(glsl_tasks)] + q, {"DEV": "VULKAN:GLSL"}, limit)
  expected["VULKAN:GLSL"] = [k for t in glsl_tasks for k in groups.get(t, [t])]
  # a first CNN step in a fresh process, without the disk cache: with compile workers (tinygrad's default), then in-process
  for col, dev in (("VULKAN", "VULKAN:SPIRV"), ("VULKAN:GLSL", "VULKAN:GLSL"), ("CPU", "CPU")):
    r = run_sub([me, "--worker", "cnn_first"] + q, {"DEV": dev, "CACHELEVEL": "0"}, 300)
    r0 = run_sub([me, "--worker", "cnn_first"] + q, {"DEV": dev, "CACHELEVEL": "0", "PARALLEL": "0"}, 300)
    results.setdefault(col, {}).update({"cnn_first": r.get("cnn_first", {"error": r.get("error", "missing")}),
                                        "cnn_first_serial": r0.get("cnn_first", {"error": r0.get("error", "missing")}),
                                        "cnn_first_compile": r0.get("cnn_first_compile", {"error": r0.get("error", "missing")})})
  # the language model's first prompt in a fresh process, without tinygrad's disk cache or Mesa's shader cache (issue 41)
  for col, dev in (("VULKAN", "VULKAN:SPIRV"), ("CPU", "CPU")) if "llm" in tasks else ():
    r = run_sub([me, "--worker", "llm_first"] + q, {"DEV": dev, "CACHELEVEL": "0", "MESA_SHADER_CACHE_DISABLE": "true"}, 600)
    results.setdefault(col, {})["llm_first"] = r.get("llm_first", {"error": r.get("error", "missing")})
  # VULKAN again with one switch flipped, for the rows that switch affects: (env, tasks, {worker key: row key}, timeout)
  extra = [({"VULKAN_FORCE_STAGING": "1"}, "copy", {"copy_h2d": "copy_h2d_staging", "copy_d2h": "copy_d2h_staging"}, 60),
           ({"VULKAN_GRAPH": "0"}, "launch_jit", {"launch_jit": "launch_jit_nograph"}, 60),
           ({"VULKAN_PROFILE": "min"}, "wide", {"wide": "wide_windows"}, 60),
           ({"VULKAN_PROFILE": "min", "VULKAN_DISABLE": "share"}, "wide", {"wide": "wide_gather"}, 60),
           # every buffer passed by buffer device address instead of a descriptor (a path of buffers past maxStorageBufferRange)
           ({"VULKAN_MAX_STORAGE_RANGE": "0", "VULKAN_REACH": "0"}, "gemm1024,add16M", {"gemm1024": "gemm1024_bda", "add16M": "add16M_bda"}, 90),
           # buffers past a lowered range, on the path the device takes there (by address, or windows and pieces where loads by address
           # were measured slow, caps.FLAGS "reach"): GEMM's B is read whole by each workgroup (split in 3 windows), add's in pieces
           ({"VULKAN_MAX_STORAGE_RANGE": str(2 << 20)}, "gemm1024", {"gemm1024": "gemm1024_past"}, 90),
           ({"VULKAN_MAX_STORAGE_RANGE": str(16 << 20)}, "add16M", {"add16M": "add16M_past"}, 90),
           # lavapipe's worker threads make a tiny dispatch cost mostly thread wake-ups; inline, the launch path itself shows
           ({"LP_NUM_THREADS": "0"}, "launch_jit,launch_eager", {"launch_jit": "launch_jit_inline", "launch_eager": "launch_eager_inline"}, 90)]
  # PARALLEL=0: on a CPU driver, compile workers running beside a timed candidate distort BEAM's ranking
  if args.beam: extra.append(({"PARALLEL": "0"}, "gemm1024_beam2", {"gemm1024_beam2": "gemm1024_beam2"}, 3600))
  for env, task, rows, timeout in extra:
    r = run_sub([me, "--worker", task] + q, {"DEV": "VULKAN:SPIRV", **env}, timeout)
    results["VULKAN"] |= {row: r.get(k, {"error": r.get("error", "missing")}) for k, row in rows.items()}
  results["CPU"] |= run_sub([me, "--worker", ",".join(cpu_tasks)] + q, {"DEV": "CPU"}, limit)
  webgpu_tasks = [t for t in cpu_tasks if t not in ("compile", "copy", "llm")]   # throughput, launches and the training steps
  if (dawn := dawn_library()) is not None:
    results["WEBGPU"] = run_sub([me, "--worker", ",".join(webgpu_tasks)] + q, {"DEV": "WEBGPU", "WEBGPU_PATH": dawn}, limit)
    expected["WEBGPU"] = webgpu_tasks
  else: results["WEBGPU"], absent["WEBGPU"] = {}, webgpu_tasks
  torch_py = args.torch_python if os.path.isfile(args.torch_python) else None
  for col, device in (("torchvulkan", "vulkan"), ("torch CPU", "cpu")):
    results[col] = torch_column(torch_py, device, args.quick, 300 if args.quick else 1200) if torch_py else {}
    if torch_py: expected[col] = TORCH_TASKS
    else: absent[col] = TORCH_TASKS
  # llama.cpp (ggml-vulkan and ggml's CPU backend) on the language-model rows, where llama-bench is installed (scripts/llama_cpp.py)
  llama_cols, llm_keys = ("llama.cpp Vulkan", "llama.cpp CPU"), groups["llm"] if "llm" in tasks else []
  lc = run_sub([os.path.join(HERE, "llama_cpp.py")] + q, {}, 2400) if llm_keys and shutil.which("llama-bench") else None
  for col in llama_cols:
    if lc is None: results[col], absent[col] = {}, llm_keys
    else: results[col], expected[col] = lc.get(col, {"error": lc.get("error", "missing")}), llm_keys
  try: results["numpy"] = numpy_bench(args.quick)
  except Exception as e: results["numpy"] = err(e)
  floor = run_sub([os.path.join(HERE, "vkfloor.py")] + q, {}, 120)
  results["floor"] = {row: floor.get(k, {"error": floor.get("error", "missing")}) for row, k in FLOOR_ROWS.items()}
  floor_inline = run_sub([os.path.join(HERE, "vkfloor.py"), "--dispatch-only"] + q, {"LP_NUM_THREADS": "0"}, 120)
  results["floor"]["launch_jit_inline"] = floor_inline.get("batched_dispatch", {"error": floor_inline.get("error", "missing")})

  vk = results["VULKAN"].get("info", {})
  print(f"machine: {info['cpu']}, {info['cores']} cores | python {info['python']}, tinygrad {info['tinygrad']}, numpy {info['numpy']} "
        f"| LP_NUM_THREADS={info['LP_NUM_THREADS']}")
  print(f"vulkan:  {vk.get('name', 'n/a')} | driver {vk.get('driver', 'n/a')} | floor on: {floor.get('device', 'n/a')}")
  tv, tc = results["torchvulkan"].get("info", {}), results["torch CPU"].get("info", {})
  info["torch"] = (f"torch {tc.get('torch', tv.get('torch', '?'))} ({tc.get('threads', '?')} threads), torchvulkan {tv.get('torchvulkan', 'n/a')} "
                   f"on {tv.get('name', 'n/a')} (Vulkan {tv.get('api', '?')}), {args.torch_python}") if torch_py else \
                  f"(not installed: no {args.torch_python}; see the docstring)"
  print(f"peers:   WEBGPU: dawn-python {info['dawn-python']} | torchvulkan, torch CPU: {info['torch']}")
  print(f"mode: {'--quick' if args.quick else 'full'}; cells: median [min-max]; floor column = raw Vulkan via cffi on the same driver\n")
  widths = [34, 8] + [20] * len(COLS)
  def line(cells): return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
  print(line(["benchmark", "unit"] + COLS))
  print("-" * (sum(widths) + 2 * (len(widths) - 1)))
  errors = [f"[{c}] process: {results[c]['error']}" for c in COLS if isinstance(results[c].get("error"), str)]
  fallbacks: list[str] = []
  for key, label, unit in ROWS:
    cells = []
    for col in COLS:
      r = results[col].get(key)
      if r is None and key in expected.get(col, ()) and "error" in results[col]: r = {"error": "process failed, see above"}
      elif r is not None and "error" in r: errors.append(f"[{col}] {key}: {r['error']}")
      elif r is not None and "fallback" in r: fallbacks.append(f"[{col}] {key}: CPU fallback: {r['fallback']}")
      cells.append("(not installed)" if r is None and key in absent.get(col, ()) else fmt(r))
    if any(c != "-" for c in cells): print(line([label, unit] + cells))
  notes = fallbacks
  if "record_us" in (fl := floor.get("batched_dispatch", {})):
    notes.append(f"floor batched dispatch {fl['gpu_us']:.3g} us/dispatch by timestamps; "
                 f"recording it through cffi costs {fl['record_us']:.3g} us (host)")
  if "pipeline_create_ms" in (cp := results["VULKAN"].get("compile_pipeline", {})):
    notes.append(f"VULKAN cold pipeline + 1st dispatch: {cp['pipeline_create_ms']:.3g} ms of it is VulkanProgram() (shader module + pipeline)")
  if notes: print("\nnotes:\n  " + "\n  ".join(notes))

  def ratio(a, b): return round(a["med"] / b["med"], 3) if a and b and "med" in a and "med" in b and b["med"] else None
  V, G, C, W, TV, TC, N, F, LV, LC = (results[c] for c in COLS)
  ratios = {
    "TinyJit per-kernel launch / raw batched dispatch floor": ratio(V.get("launch_jit"), F.get("launch_jit")),
    "TinyJit per-kernel, VULKAN_GRAPH=0 / raw batched floor": ratio(V.get("launch_jit_nograph"), F.get("launch_jit")),
    "TinyJit per-kernel / raw batched floor, LP_NUM_THREADS=0": ratio(V.get("launch_jit_inline"), F.get("launch_jit_inline")),
    "eager launch+sync VULKAN / 1 dispatch per submit floor": ratio(V.get("launch_eager_sync"), F.get("launch_eager_sync")),
    "eager launch VULKAN / CPU": ratio(V.get("launch_eager"), C.get("launch_eager")),
    "eager launch VULKAN / CPU, LP_NUM_THREADS=0": ratio(V.get("launch_eager_inline"), C.get("launch_eager")),
    "add 16M VULKAN / vec4 add floor": ratio(V.get("add16M"), F.get("add16M")),
    "GEMM 1024 VULKAN / hand-tiled GEMM floor": ratio(V.get("gemm1024"), F.get("gemm1024")),
    "conv2d VULKAN / hand-tiled conv floor": ratio(V.get("conv2d"), F.get("conv2d")),
    "copy H->D VULKAN / memcpy": ratio(V.get("copy_h2d"), N.get("memcpy")),
    "copy D->H VULKAN / memcpy": ratio(V.get("copy_d2h"), N.get("memcpy")),
    "copy H->D VULKAN staging / memcpy": ratio(V.get("copy_h2d_staging"), N.get("memcpy")),
    "copy D->H VULKAN staging / memcpy": ratio(V.get("copy_d2h_staging"), N.get("memcpy")),
    "GEMM 512 VULKAN / CPU": ratio(V.get("gemm512"), C.get("gemm512")),
    "GEMM 1024 VULKAN / CPU": ratio(V.get("gemm1024"), C.get("gemm1024")),
    "GEMM 512 VULKAN / WEBGPU": ratio(V.get("gemm512"), W.get("gemm512")),
    "GEMM 1024 VULKAN / WEBGPU": ratio(V.get("gemm1024"), W.get("gemm1024")),
    "add 16M VULKAN / WEBGPU": ratio(V.get("add16M"), W.get("add16M")),
    "CNN train steps/s VULKAN / WEBGPU": ratio(V.get("cnn_train"), W.get("cnn_train")),
    "GEMM 1024 by device address / by descriptor": ratio(V.get("gemm1024_bda"), V.get("gemm1024")),
    "add 16M by device address / by descriptor": ratio(V.get("add16M_bda"), V.get("add16M")),
    "GEMM 1024 past the range / by descriptor": ratio(V.get("gemm1024_past"), V.get("gemm1024")),
    "add 16M past the range / by descriptor": ratio(V.get("add16M_past"), V.get("add16M")),
    "CNN train steps/s VULKAN / CPU": ratio(V.get("cnn_train"), C.get("cnn_train")),
    "transformer train steps/s VULKAN / CPU": ratio(V.get("tf_train"), C.get("tf_train")),
    **{f"LLaMA 512x8 {k} {dt} tokens/s VULKAN / {peer}": ratio(V.get(f"llm_{k}_{dt}"), col.get(f"llm_{k}_{dt}"))
       for peer, col in (("CPU", C), ("llama.cpp Vulkan", LV), ("llama.cpp CPU", LC)) for dt in ("float", "half") for k in ("prefill", "decode")},
    **{f"{lbl} VULKAN / torchvulkan": ratio(V.get(k), TV.get(k)) for k, lbl in TORCH_LABELS.items()},
    **{f"{lbl} VULKAN / torch CPU": ratio(V.get(k), TC.get(k)) for k, lbl in TORCH_LABELS.items()},
    "cold compiler GLSL / SPIR-V (per kernel)": ratio(G.get("compile_compiler"), V.get("compile_compiler")),
    "cold CNN step 1st call VULKAN / CPU": ratio(V.get("cnn_first"), C.get("cnn_first")),
    "cold CNN step 1st call VULKAN / CPU, PARALLEL=0": ratio(V.get("cnn_first_serial"), C.get("cnn_first_serial")),
    "cold CNN step 1st call GLSL / SPIR-V": ratio(G.get("cnn_first"), V.get("cnn_first")),
    "cold LLaMA 1st prefill VULKAN / CPU": ratio(V.get("llm_first"), C.get("llm_first")),
    "GEMM 1024 SPIR-V / GLSL (separate processes)": ratio(V.get("gemm1024"), G.get("gemm1024")),
    "add 16M SPIR-V / GLSL (separate processes)": ratio(V.get("add16M"), G.get("add16M")),
    "conv2d SPIR-V / GLSL (separate processes)": ratio(V.get("conv2d"), G.get("conv2d")),
    **{f"{lbl} SPIR-V / GLSL, paired in one process": V.get(f"paired_{k}", {}).get("med")
       for k, lbl in (("gemm1024", "GEMM 1024"), ("add16M", "add 16M"), ("conv2d", "conv2d"))},
    "CNN train steps/s SPIR-V / GLSL": ratio(V.get("cnn_train"), G.get("cnn_train")),
  }
  print("\nratios (median / median; launch: lower is better, throughput: higher is better)")
  for k, v in ratios.items(): print(f"  {k:<56} {'n/a' if v is None else f'{v:.3g}x'}")
  if errors: print("\nerrors:\n  " + "\n  ".join(errors))
  elapsed = time.perf_counter() - t_start
  with open(args.json, "w") as f:
    json.dump({"machine": info, "vulkan": vk, "mode": "quick" if args.quick else "full", "elapsed_s": round(elapsed, 1),
               "results": results, "floor_raw": floor, "floor_inline_raw": floor_inline, "ratios": ratios}, f, indent=1)
  print(f"\nwrote {args.json} ({elapsed:.0f}s)")

if __name__ == "__main__": main()
