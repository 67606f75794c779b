"""Half-precision transformers on devices without shaderFloat16 (half in 16-bit words, renderer/passes/half.py; packed in 32-bit words
where 16-bit storage is missing too): GPT-2 (KV cache at a symbolic position, LayerNorm, GELU, tied head) and LLaMA-style (RMSNorm,
rotary embeddings, grouped-query attention, SwiGLU) blocks, logits and greedy tokens against CPU with the same random weights.
Both failed before in tinygrad 0.14's own half emulation (a half register accumulator under AFTER: UOp verification failed)."""
import pytest
from util import run_python, switched

GPT2 = ("gpt2_check", ["--layers", "1", "--dim", "32", "--heads", "2", "--vocab", "97", "--tokens", "3"])
LLAMA = ("llama_check", ["--layers", "1", "--dim", "32", "--heads", "4", "--kv-heads", "2", "--vocab", "97", "--tokens", "3"])

# the profile and the renderer are this test's own parameters (each model under both profiles, each renderer twice): it runs in
# the default pass of scripts/test.sh and on each real driver, not again under the other passes' switches
@pytest.mark.skipif(bool(switched("VULKAN_VALIDATION")),
                    reason="sets its own VULKAN_PROFILE and renderer: runs in the default pass and on each real driver")
@pytest.mark.parametrize("model,profile,renderer", [(GPT2, "mobile", "SPIRV"), (GPT2, "min", "GLSL"), (LLAMA, "mobile", "GLSL"),
                                                    (LLAMA, "min", "SPIRV")],
                         ids=["gpt2-mobile-spirv", "gpt2-min-glsl", "llama-mobile-glsl", "llama-min-spirv"])
def test_half_transformer(model, profile, renderer):
  script, args = model
  args = args + ["--device", f"VULKAN:{renderer}"]
  r = run_python(f"import sys; sys.path.insert(0, 'scripts'); import {script}; sys.exit({script}.main({args!r}))",
                 # min has no bufferDeviceAddress: a lowered storage-buffer range (CI pass 2) would refuse its buffers (issue 15)
                 {"DEFAULT_FLOAT": "half", "VULKAN_PROFILE": profile, "VULKAN_MAX_STORAGE_RANGE": ""})
  assert r.returncode == 0 and "match" in r.stdout.splitlines()[-1], r.stdout + r.stderr[-3000:]
