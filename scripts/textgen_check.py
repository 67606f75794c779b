#!/usr/bin/env python3
"""Text generation on VULKAN against CPU: greedy tokens from GPT-2 and LLaMA-style models at small dims, in float and in half, each
for 32 steps after a 5-token prompt (scripts/gpt2_check.py, scripts/llama_check.py; random weights, KV cache at a symbolic position).
Every token must match CPU's; exits non-zero on any mismatch.

  python scripts/textgen_check.py [--device VULKAN] [--tokens 32] [--seeds 2]

Each run is a process of its own: DEFAULT_FLOAT is read when tinygrad is imported.
"""
import argparse, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"gpt2_check": ["--layers", "2", "--dim", "64", "--heads", "4", "--vocab", "300"],
          "llama_check": ["--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2", "--vocab", "300"]}

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--device", default="VULKAN")
  ap.add_argument("--tokens", type=int, default=32)
  ap.add_argument("--seeds", type=int, default=2)
  args = ap.parse_args()
  bad = 0
  for script, dims in MODELS.items():
    for dtype in ("float", "half"):
      for seed in range(args.seeds):
        cmd = [sys.executable, os.path.join(HERE, f"{script}.py"), *dims, "--tokens", str(args.tokens), "--seed", str(seed), "--device", args.device]
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "DEFAULT_FLOAT": dtype})
        ok = r.returncode == 0 and r.stdout.rstrip().endswith("match")
        bad += not ok
        print(f"{script:12s} {dtype:5s} seed {seed}: {'match' if ok else 'MISMATCH'}", flush=True)
        if not ok: print(r.stdout + r.stderr[-2000:], flush=True)
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main())
