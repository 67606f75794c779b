"""Reductions, including ones split across the lanes of a workgroup through shared memory and barriers."""
import numpy as np
import pytest
from tinygrad import Tensor
from util import data, grouped_sources, shows

@pytest.mark.parametrize("shape,axis", [((37, 4000), 1), ((4000,), None), ((4000, 37), 0)])
def test_group_reduce_uses_shared_memory(shape, axis):
  x = data(shape)
  srcs = grouped_sources(Tensor(x).sum(axis))
  assert any(shows(s, "shared") for s in srcs), "expected a GROUP reduction through shared memory"
  np.testing.assert_allclose(Tensor(x).sum(axis).numpy(), x.sum(axis), rtol=1e-4, atol=1e-3)

def test_group_max_and_softmax():
  x = data((37, 4000))
  assert any(shows(s, "shared") for s in grouped_sources(Tensor(x).softmax(1)))
  np.testing.assert_array_equal(Tensor(x).max(1).numpy(), x.max(1))
  e = np.exp(x - x.max(1, keepdims=True))
  np.testing.assert_allclose(Tensor(x).softmax(1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("shape,axis", [((65537,), None), ((257, 33), 1), ((33, 257), 0), ((3, 5, 7), (0, 2))])
def test_reduce_odd_shapes(shape, axis):
  x = data(shape)
  np.testing.assert_allclose(Tensor(x).sum(axis).numpy(), x.sum(axis), rtol=1e-4, atol=1e-3)
  np.testing.assert_array_equal(Tensor(x).min(axis).numpy(), x.min(axis))

def test_matmul():
  a, b = data((67, 45)), data((45, 31))
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)

def test_int_reduce():
  x = data((300, 17), np.int32)
  np.testing.assert_array_equal(Tensor(x).sum(0).numpy(), x.sum(0))
