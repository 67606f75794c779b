"""Random tinygrad programs on VULKAN against tinygrad's CPU device: elementwise math, reductions broadcast back, movement ops,
casts and int arithmetic, over shapes off every workgroup size. One seed is one program, drawn from its own generator (a failure
names its seed; VULKAN_RANDOM_SEEDS=n runs more)."""
import os
import numpy as np
import pytest
from tinygrad import Tensor, dtypes

SEEDS = range(int(os.environ.get("VULKAN_RANDOM_SEEDS", "24")))

def float_step(rng, x, y):
  """One random op on float tensors of one shape (a, b): kept finite by construction, then clipped."""
  a, b = x.shape
  k = int(rng.integers(15))
  if k == 0: out = x + y
  elif k == 1: out = x * y
  elif k == 2: out = x - y.flip(int(rng.integers(2)))
  elif k == 3: out = x.maximum(y)
  elif k == 4: out = (x < y).where(x, y * 0.5)
  elif k == 5: out = x.clip(-8, 8).exp2()
  elif k == 6: out = (x.abs() + 0.5).log2()
  elif k == 7: out = x.abs().sqrt()
  elif k == 8: out = x.sin()
  elif k == 9: out = (x.abs() + 0.5).reciprocal()
  elif k == 10: out = x.sigmoid() + y.relu()
  elif k == 11: out = x - x.sum(int(ax := rng.integers(2)), keepdim=True) / x.shape[ax]
  elif k == 12: out = x.max(int(rng.integers(2)), keepdim=True).expand(a, b) + y
  elif k == 13: out = x.reshape(b, a).T + y                                   # a real permutation of the data
  else: out = x.pad(((1, 0), (0, 2))).shrink(((0, a), (2, b + 2))) + y        # shifted, zeros coming in
  return out.clip(-50, 50)

def int_step(rng, x, y):
  k = int(rng.integers(8))
  if k == 0: out = x + y
  elif k == 1: out = x * (y % 7)
  elif k == 2: out = x // ((y.abs() % 5) + 1)
  elif k == 3: out = x % ((y.abs() % 9) + 1)
  elif k == 4: out = (x & 0xff) ^ y
  elif k == 5: out = x.maximum(y) - x.sum(int(rng.integers(2)), keepdim=True)
  elif k == 6: out = (x < y).where(x, -y)
  else: out = (x << 2) >> 1
  return out.clip(-10**6, 10**6)

def program(seed:int):
  """The inputs and a function of device -> result tensors for this seed."""
  rng = np.random.default_rng(seed)
  a, b = int(rng.integers(1, 38)), int(rng.integers(1, 68))
  fl = [rng.uniform(-2, 2, (a, b)).astype(np.float32) for _ in range(3)]
  ints = [rng.integers(-100, 101, (a, b)).astype(np.int32) for _ in range(2)]
  steps = [(int(rng.integers(3)), int(rng.integers(3)), int(rng.integers(1 << 30))) for _ in range(int(rng.integers(3, 8)))]
  def run(device:str):
    f, i = [Tensor(x, device=device) for x in fl], [Tensor(x, device=device) for x in ints]
    for s, (p, q, sub) in enumerate(steps):
      f.append(float_step(np.random.default_rng(sub), f[-1 - p], f[q]))
      i.append(int_step(np.random.default_rng(sub), i[-1 - p % 2], i[q % 2]))
    # the two meet: ints into float, a float's floor into int
    return (f[-1] + i[-1].cast(dtypes.float) * 0.001).realize(), (i[-1] + f[-1].floor().cast(dtypes.int)).realize()
  return run

@pytest.mark.parametrize("seed", SEEDS)
def test_random_program(seed):
  run = program(seed)
  (fv, iv), (fc, ic) = run("VULKAN"), run("CPU")
  np.testing.assert_allclose(fv.numpy(), fc.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"seed {seed}")
  # a float's floor may land on the other side of an integer where the float ops differ in their last bits
  np.testing.assert_allclose(iv.numpy(), ic.numpy(), atol=1, rtol=0, err_msg=f"seed {seed}")
