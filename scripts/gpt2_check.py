#!/usr/bin/env python3
"""GPT-2 on VULKAN against CPU: one forward pass over a prompt, then greedy tokens, with the same random weights on both.

  python scripts/gpt2_check.py [--layers 2] [--dim 768] [--heads 12] [--vocab 50257] [--tokens 8]

The defaults are GPT-2 small's shapes with 2 layers and the full vocabulary: the token embedding (50257 x 768 float32, 154 MB)
is past lavapipe's maxStorageBufferRange (128 MiB), so the embedding lookup and the logits (x @ wte.T, the tied head) read it by
buffer device address. The model is a compact copy of tinygrad's examples/gpt2.py (the pip package does not ship it): KV cache,
symbolic start_pos, tied embeddings. Exits non-zero when the logits or the tokens differ. tests/test_address.py runs it small.
"""
import argparse, sys, time
import numpy as np
from tinygrad import Tensor, Variable
from tinygrad.helpers import Context
import tinygrad.engine.realize as realize
from tinygrad.nn import Embedding, Linear, LayerNorm
from tinygrad.nn.state import get_state_dict

MAX_CONTEXT = 64

class Attention:
  def __init__(self, dim:int, n_heads:int):
    self.c_attn, self.c_proj, self.n_heads, self.dim, self.head_dim = Linear(dim, 3*dim), Linear(dim, dim), n_heads, dim, dim // n_heads
  def __call__(self, x:Tensor, start_pos, mask:Tensor|None) -> Tensor:
    xq, xk, xv = [t[:, :, 0] for t in self.c_attn(x).reshape(None, None, 3, self.n_heads, self.head_dim).split(1, dim=2)]
    bsz, seqlen = xq.shape[0], xq.shape[1]
    if not hasattr(self, "cache_kv"): self.cache_kv = Tensor.zeros(2, bsz, MAX_CONTEXT, self.n_heads, self.head_dim).contiguous().realize()
    self.cache_kv[:, :, start_pos:start_pos+seqlen].assign(Tensor.stack(xk, xv)).realize()
    keys, values = self.cache_kv[0][:, :start_pos+seqlen], self.cache_kv[1][:, :start_pos+seqlen]
    xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
    return self.c_proj(xq.scaled_dot_product_attention(keys, values, mask).transpose(1, 2).reshape(bsz, seqlen, self.dim))

class Block:
  def __init__(self, dim:int, n_heads:int):
    self.attn, self.ln_1, self.ln_2 = Attention(dim, n_heads), LayerNorm(dim, 1e-5), LayerNorm(dim, 1e-5)
    self.c_fc, self.c_proj = Linear(dim, 4*dim), Linear(4*dim, dim)
  def __call__(self, x:Tensor, start_pos, mask:Tensor|None) -> Tensor:
    h = x + self.attn(self.ln_1(x), start_pos, mask)
    return (h + self.c_proj(self.c_fc(self.ln_2(h)).gelu())).contiguous()

class GPT2:
  def __init__(self, dim:int, n_heads:int, n_layers:int, vocab:int):
    self.wte, self.wpe = Embedding(vocab, dim), Embedding(MAX_CONTEXT, dim)
    self.h, self.ln_f = [Block(dim, n_heads) for _ in range(n_layers)], LayerNorm(dim, 1e-5)
  def __call__(self, tokens:Tensor, start_pos) -> Tensor:
    """Logits of the last position."""
    seqlen = tokens.shape[1]
    h = self.wte(tokens) + self.wpe(Tensor.arange(MAX_CONTEXT).reshape(1, -1).shrink((None, (start_pos, start_pos+seqlen))))
    mask = Tensor.full((1, 1, seqlen, start_pos+seqlen), float("-inf")).triu(start_pos+1) if seqlen > 1 else None
    for blk in self.h: h = blk(h, start_pos, mask)
    return (self.ln_f(h)[:, -1, :] @ self.wte.weight.T).realize()   # the head is tied to the token embedding

def on(device:str) -> Context:
  """Everything tinygrad creates inside goes to `device` (the model, its caches and the aranges of each step)."""
  return Context(DEV=device)

def random_weights(model:GPT2, seed:int) -> dict[str, np.ndarray]:
  rng = np.random.default_rng(seed)
  def init(name:str, shape) -> np.ndarray:
    if name.endswith("bias"): return rng.normal(0, 0.02, shape).astype(np.float32)
    if ".ln_" in name or name.startswith("ln_f"): return rng.normal(1, 0.1, shape).astype(np.float32)
    # layers strong against the tied embedding: with GPT-2's own init the head mostly repeats the last token
    return rng.normal(0, 0.02 if name.startswith("wte") else 0.2, shape).astype(np.float32)
  return {k: init(k, v.shape) for k, v in get_state_dict(model).items()}

def build(device:str, args, weights:dict|None=None) -> tuple[GPT2, dict]:
  with on(device):
    model = GPT2(args.dim, args.heads, args.layers, args.vocab)
    weights = weights or random_weights(model, args.seed)
    for k, t in get_state_dict(model).items(): t.replace(Tensor(weights[k]).cast(t.dtype).realize())
  return model, weights

def generate(model:GPT2, device:str, prompt:list[int], n:int) -> tuple[np.ndarray, list[int], float]:
  """Logits after the prompt, then n greedy tokens (each fed back through the KV cache at a symbolic position)."""
  with on(device):
    st = time.perf_counter()
    logits = model(Tensor([prompt]), 0).numpy()[0]
    first, toks, pos = logits, [int(logits.argmax())], len(prompt)
    while len(toks) < n:
      logits = model(Tensor([[toks[-1]]]), Variable("start_pos", 1, MAX_CONTEXT - 1).bind(pos)).numpy()[0]
      toks.append(int(logits.argmax()))
      pos += 1
    return first, toks, time.perf_counter() - st

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--layers", type=int, default=2)
  ap.add_argument("--dim", type=int, default=768)
  ap.add_argument("--heads", type=int, default=12)
  ap.add_argument("--vocab", type=int, default=50257)
  ap.add_argument("--tokens", type=int, default=8)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--device", default="VULKAN", help="a DEV value: VULKAN, VULKAN:1, VULKAN:GLSL (the GLSL renderer)")
  args = ap.parse_args(argv)
  prompt = [int(x) for x in np.random.default_rng(args.seed + 1).integers(0, args.vocab, 5)]
  ref_model, weights = build("CPU", args)
  model, _ = build(args.device, args, weights)
  ref_logits, ref_toks, ref_t = generate(ref_model, "CPU", prompt, args.tokens)
  logits, toks, t = generate(model, args.device, prompt, args.tokens)
  err = float(np.abs(logits - ref_logits).max())
  print(f"GPT-2 {args.layers} layers, dim {args.dim}, {args.heads} heads, vocab {args.vocab}: prompt {prompt}")
  print(f"  CPU    {ref_toks} ({ref_t:.1f} s)\n  {args.device:6s} {toks} ({t:.1f} s)\n  max |logit difference| {err:.2e}")
  if args.device.startswith("VULKAN"):   # the path the big buffers took (renderer/abi.py)
    progs = [p for (_, d), p in realize.runtime_cache.items() if d.startswith("VULKAN")]
    print(f"  {sum(any(a is not None for a in p.abi.address) for p in progs)} of {len(progs)} kernels pass a buffer by device address")
  ok = toks == ref_toks and np.allclose(logits, ref_logits, rtol=1e-3, atol=1e-3)
  print("match" if ok else "MISMATCH")
  return 0 if ok else 1

if __name__ == "__main__": sys.exit(main())
