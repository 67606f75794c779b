#!/usr/bin/env python3
"""A LLaMA-style transformer on VULKAN against CPU: RMSNorm, rotary embeddings, grouped-query attention with a KV cache at a
symbolic position, SwiGLU; one forward pass over a prompt, then greedy tokens, the same random weights on both. In the model's
dtype (DEFAULT_FLOAT=half runs it in half: on a device without shaderFloat16, half in 16-bit words, renderer/passes/half.py).

  python scripts/llama_check.py [--layers 1] [--dim 64] [--heads 4] [--kv-heads 2] [--vocab 300] [--tokens 4]

A compact copy of the structure of tinygrad's examples/llama.py (the pip package does not ship it). Exits non-zero when the logits
or the tokens differ.
"""
import argparse, sys
import numpy as np
from tinygrad import Tensor, Variable, dtypes
from tinygrad.helpers import Context
from tinygrad.nn import Embedding, Linear
from tinygrad.nn.state import get_state_dict

MAX_CONTEXT = 64

class RMSNorm:
  def __init__(self, dim:int, eps=1e-5): self.eps, self.weight = eps, Tensor.ones(dim)
  def __call__(self, x:Tensor) -> Tensor: return (x * (x.float().square().mean(-1, keepdim=True) + self.eps).rsqrt().cast(x.dtype)) * self.weight

def rotary(dim:int, theta=10000.0) -> Tensor:
  freqs = 1.0 / (theta ** (Tensor.arange(0, dim, 2)[:(dim // 2)] / dim))
  f = Tensor.arange(MAX_CONTEXT).unsqueeze(1) * freqs.unsqueeze(0)
  return Tensor.stack(f.cos(), f.sin(), dim=-1).reshape(1, MAX_CONTEXT, 1, dim // 2, 2)

def apply_rotary(x:Tensor, fc:Tensor) -> Tensor:
  x = x.reshape(*x.shape[:-1], -1, 2)
  a, b, c, d = x[..., 0:1], x[..., 1:2], fc[..., 0:1], fc[..., 1:2]
  return (a * c - b * d).cat(a * d + b * c, dim=-1).flatten(3)

class Attention:
  def __init__(self, dim:int, n_heads:int, n_kv:int):
    self.n_heads, self.n_kv, self.hd = n_heads, n_kv, dim // n_heads
    self.wq, self.wk = Linear(dim, dim, bias=False), Linear(dim, n_kv*self.hd, bias=False)
    self.wv, self.wo = Linear(dim, n_kv*self.hd, bias=False), Linear(dim, dim, bias=False)
  def __call__(self, x:Tensor, start_pos, fc:Tensor, mask:Tensor|None) -> Tensor:
    bsz, seqlen, _ = x.shape
    xq, xk, xv = self.wq(x).reshape(bsz, seqlen, self.n_heads, self.hd), self.wk(x).reshape(bsz, seqlen, self.n_kv, self.hd), \
      self.wv(x).reshape(bsz, seqlen, self.n_kv, self.hd)
    xq, xk = apply_rotary(xq, fc), apply_rotary(xk, fc)
    if not hasattr(self, "cache_kv"): self.cache_kv = Tensor.zeros(2, bsz, MAX_CONTEXT, self.n_kv, self.hd, dtype=x.dtype).contiguous().realize()
    self.cache_kv[:, :, start_pos:start_pos+seqlen].assign(Tensor.stack(xk, xv)).realize()
    keys, values = self.cache_kv[0][:, :start_pos+seqlen], self.cache_kv[1][:, :start_pos+seqlen]
    rep = self.n_heads // self.n_kv
    keys, values = keys.repeat_interleave(rep, dim=2), values.repeat_interleave(rep, dim=2)
    out = xq.transpose(1, 2).scaled_dot_product_attention(keys.transpose(1, 2), values.transpose(1, 2), mask)
    return self.wo(out.transpose(1, 2).reshape(bsz, seqlen, -1))

class Block:
  def __init__(self, dim:int, n_heads:int, n_kv:int, hidden:int):
    self.attention, self.attention_norm, self.ffn_norm = Attention(dim, n_heads, n_kv), RMSNorm(dim), RMSNorm(dim)
    self.w1, self.w2, self.w3 = Linear(dim, hidden, bias=False), Linear(hidden, dim, bias=False), Linear(dim, hidden, bias=False)
  def __call__(self, x:Tensor, start_pos, fc:Tensor, mask:Tensor|None) -> Tensor:
    h = x + self.attention(self.attention_norm(x), start_pos, fc, mask)
    return (h + self.w2(self.w1(self.ffn_norm(h)).silu() * self.w3(self.ffn_norm(h)))).contiguous()

class Llama:
  def __init__(self, dim:int, n_heads:int, n_kv:int, n_layers:int, vocab:int, hidden:int|None=None):
    self.tok_embeddings, self.norm, self.output = Embedding(vocab, dim), RMSNorm(dim), Linear(dim, vocab, bias=False)
    self.layers, self.fc = [Block(dim, n_heads, n_kv, hidden or 4 * dim) for _ in range(n_layers)], rotary(dim // n_heads)
  def __call__(self, tokens:Tensor, start_pos) -> Tensor:
    seqlen = tokens.shape[1]
    h, fc = self.tok_embeddings(tokens), self.fc.shrink((None, (start_pos, start_pos+seqlen), None, None, None)).cast(self.norm.weight.dtype)
    mask = Tensor.full((1, 1, seqlen, start_pos+seqlen), float("-inf"), dtype=h.dtype).triu(start_pos+1) if seqlen > 1 else None
    for layer in self.layers: h = layer(h, start_pos, fc, mask)
    return self.output(self.norm(h))[:, -1, :].float().realize()

def build(device:str, args, weights:dict|None=None) -> tuple[Llama, dict]:
  with Context(DEV=device):
    model = Llama(args.dim, args.heads, args.kv_heads, args.layers, args.vocab)
    rng = np.random.default_rng(args.seed)
    weights = weights or {k: (rng.normal(1, 0.1, v.shape) if "norm" in k else rng.normal(0, 0.3, v.shape)).astype(np.float32)
                          for k, v in get_state_dict(model).items()}
    for k, t in get_state_dict(model).items(): t.replace(Tensor(weights[k]).cast(t.dtype).realize())
  return model, weights

def generate(model:Llama, device:str, prompt:list[int], n:int) -> tuple[np.ndarray, list[int]]:
  with Context(DEV=device):
    first = logits = model(Tensor([prompt]), 0).numpy()[0]
    toks, pos = [int(logits.argmax())], len(prompt)
    while len(toks) < n:
      logits = model(Tensor([[toks[-1]]]), Variable("start_pos", 1, MAX_CONTEXT - 1).bind(pos)).numpy()[0]
      toks.append(int(logits.argmax()))
      pos += 1
    return first, toks

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  for name, default in (("layers", 1), ("dim", 64), ("heads", 4), ("kv-heads", 2), ("vocab", 300), ("tokens", 4), ("seed", 0)):
    ap.add_argument(f"--{name}", type=int, default=default)
  ap.add_argument("--device", default="VULKAN", help="a DEV value: VULKAN, VULKAN:1, VULKAN:GLSL (the GLSL renderer)")
  args = ap.parse_args(argv)
  prompt = [int(x) for x in np.random.default_rng(args.seed + 1).integers(0, args.vocab, 5)]
  ref_model, weights = build("CPU", args)
  model, _ = build(args.device, args, weights)
  (ref_logits, ref_toks), (logits, toks) = generate(ref_model, "CPU", prompt, args.tokens), generate(model, args.device, prompt, args.tokens)
  err = float(np.abs(logits - ref_logits).max())
  print(f"LLaMA-style {args.layers} layers, dim {args.dim}, {args.heads}/{args.kv_heads} heads, vocab {args.vocab}, {dtypes.default_float}")
  print(f"  CPU    {ref_toks}\n  {args.device:6s} {toks}\n  max |logit difference| {err:.2e}")
  ok = toks == ref_toks and np.allclose(logits, ref_logits, rtol=2e-2, atol=2e-2)
  print("match" if ok else "MISMATCH")
  return 0 if ok else 1

if __name__ == "__main__": sys.exit(main())
