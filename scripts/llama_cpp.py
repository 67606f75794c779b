#!/usr/bin/env python3
"""llama.cpp on bench.py's language-model rows: the same LLaMA architecture (bench.py LLM) written as a GGUF file with random
weights and a synthetic vocabulary (the `gguf` package from PyPI), run by `llama-bench` on ggml-vulkan (its Vulkan backend, on the
driver the loader picks) and on ggml's CPU backend: a LLM["prompt"]-token prompt and LLM["decode"] generated tokens, tokens/s.

  python scripts/llama_cpp.py --out FILE [--quick]   # what bench.py runs where `llama-bench` is on PATH

Debian sid packages llama.cpp (../shared/design/drivers.md), so on this project's machines it runs in the sid root, on Mesa 26.2:
  scripts/sid.sh run apt-get install -y llama.cpp-tools-extra libggml0-backend-vulkan
  scripts/sid.sh run .venv/bin/pip install gguf
ggml-vulkan hides CPU-type Vulkan devices unless GGML_VK_VISIBLE_DEVICES names them: set here to device 0 (lavapipe).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import LLM

def write_gguf(path:str, f16:bool) -> None:
  import gguf
  rng = np.random.default_rng(0)
  d, h, v, layers = LLM["dim"], LLM["hidden"], LLM["vocab"], LLM["layers"]
  # a SentencePiece vocabulary: llama.cpp needs the control tokens and the 256 byte tokens, the rest are fillers
  tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
  tokens += [f"t{i}" for i in range(v - len(tokens))]
  w = gguf.GGUFWriter(path, "llama")
  for add, val in ((w.add_block_count, layers), (w.add_context_length, LLM["prompt"] + LLM["decode"] + 4), (w.add_embedding_length, d),
                   (w.add_feed_forward_length, h), (w.add_head_count, LLM["heads"]), (w.add_head_count_kv, LLM["heads"]),
                   (w.add_layer_norm_rms_eps, 1e-5), (w.add_rope_dimension_count, d // LLM["heads"]), (w.add_file_type, int(f16)),
                   (w.add_tokenizer_model, "llama"), (w.add_token_list, tokens), (w.add_token_scores, [0.0] * v),
                   (w.add_token_types, [2, 3, 3] + [6] * 256 + [1] * (v - 259)),   # unknown, control, byte, normal
                   (w.add_bos_token_id, 1), (w.add_eos_token_id, 2), (w.add_unk_token_id, 0)):
    add(val)
  shapes = {"token_embd.weight": (v, d), "output_norm.weight": (d,), "output.weight": (v, d)}
  for i in range(layers):
    shapes |= {f"blk.{i}.{n}.weight": (d, d) for n in ("attn_q", "attn_k", "attn_v", "attn_output")}
    shapes |= {f"blk.{i}.attn_norm.weight": (d,), f"blk.{i}.ffn_norm.weight": (d,), f"blk.{i}.ffn_gate.weight": (h, d),
               f"blk.{i}.ffn_up.weight": (h, d), f"blk.{i}.ffn_down.weight": (d, h)}
  for name, shape in shapes.items():   # norms in float32, as llama.cpp's converter writes them; the rest in the file's type
    w.add_tensor(name, rng.normal(1, 0.1, shape).astype(np.float32) if "norm" in name else
                 rng.normal(0, 0.02, shape).astype(np.float16 if f16 else np.float32))
  w.write_header_to_file()
  w.write_kv_data_to_file()
  w.write_tensors_to_file()
  w.close()

def llama_bench(path:str, vulkan:bool, reps:int) -> dict:
  """llama-bench's prompt and generation rates: {"prefill": samples, "decode": samples} in tokens/s."""
  dev = ["-ngl", "99", "-dev", "Vulkan0"] if vulkan else ["-ngl", "0", "-dev", "none"]
  p = subprocess.run(["llama-bench", "-m", path, "-p", str(LLM["prompt"]), "-n", str(LLM["decode"]), "-r", str(reps), "-o", "json", *dev],
                     capture_output=True, text=True, env={**os.environ, "GGML_VK_VISIBLE_DEVICES": "0"}, timeout=1200)
  if p.returncode != 0: raise RuntimeError((p.stderr.strip().splitlines() or ["?"])[-1])
  out = {}
  for r in json.loads(p.stdout):
    out["prefill" if r["n_prompt"] else "decode"] = r["samples_ts"]
  return out

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--out", required=True)
  args = ap.parse_args()
  res: dict = {}
  with tempfile.TemporaryDirectory() as tmp:
    for dt, f16 in (("half", True), ("float", False)):
      write_gguf(path := os.path.join(tmp, f"llama-{dt}.gguf"), f16)
      for col, vulkan in (("llama.cpp Vulkan", True), ("llama.cpp CPU", False)):
        try:
          for k, ts in llama_bench(path, vulkan, 2 if args.quick else 3).items():
            res.setdefault(col, {})[f"llm_{k}_{dt}"] = {"med": statistics.median(ts), "min": min(ts), "max": max(ts), "n": len(ts),
                                                        "unit": "tokens/s"}
        except Exception as e: res.setdefault(col, {})[f"llm_prefill_{dt}"] = {"error": f"{type(e).__name__}: {str(e)[:160]}"}
  with open(args.out, "w") as f: json.dump(res, f)

if __name__ == "__main__": main()
