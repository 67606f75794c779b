"""Noncontiguous movement and masked (gated) accesses."""
import numpy as np
from tinygrad import Tensor
from util import data

A = data((5, 7, 9))

def check(fn_t, fn_np, x=A):
  np.testing.assert_array_equal(fn_t(Tensor(x)).numpy(), fn_np(x))

def test_permute(): check(lambda t: t.permute(2, 0, 1) + 1, lambda x: x.transpose(2, 0, 1) + 1)
def test_shrink_strided(): check(lambda t: t[1:5:2, ::3, 2:9:2] * 2, lambda x: x[1:5:2, ::3, 2:9:2] * 2)
def test_pad(): check(lambda t: t.pad(((1, 2), (0, 3), (2, 0))) + 1, lambda x: np.pad(x, ((1, 2), (0, 3), (2, 0))) + 1)
def test_expand(): check(lambda t: t[:, :1, :].expand(5, 6, 9) - t[:, 1:, :], lambda x: np.broadcast_to(x[:, :1], (5, 6, 9)) - x[:, 1:])
def test_flip(): check(lambda t: t.flip(0, 2) * t, lambda x: x[::-1, :, ::-1] * x)
def test_pad_where():
  # the padded region is masked: the load is gated and the WHERE picks the alternative
  m = data((5, 7, 9)) > 0
  check(lambda t: Tensor(np.pad(m, 1)).where(t.pad(((1, 1),) * 3), -7.0), lambda x: np.where(np.pad(m, 1), np.pad(x, 1), np.float32(-7.0)))
def test_cat_gated_loads():
  b = data((5, 3, 9))
  check(lambda t: t.cat(Tensor(b), dim=1) * 3, lambda x: np.concatenate([x, b], axis=1) * 3)
def test_shifted_window():
  # overlapping shifted reads of one buffer: each output element gates two loads
  check(lambda t: t[:, :-1, :] + t[:, 1:, :].pad(((0, 0), (0, 0), (1, 0)))[:, :, :9],
        lambda x: x[:, :-1] + np.pad(x[:, 1:], ((0, 0), (0, 0), (1, 0)))[:, :, :9])
