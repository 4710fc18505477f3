"""`tf_outheads.ops.quantize`: symmetric per-channel int8 weights and the int8 product,
against float32 numpy."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.ops.quantize import dequantize_int8, int8_matmul, quantize_int8, quantize_rows


def weights(shape=(32, 48), seed=0):
    rng = np.random.default_rng(seed)
    # Channels of very different ranges: one scale per channel must follow each.
    return (rng.normal(size=shape) * rng.uniform(0.01, 3.0, size=(1, shape[1]))).astype("float32")


@pytest.mark.parametrize("axis", [0, -1])
def test_each_channel_is_kept_to_half_its_scale_and_its_largest_weight_exactly(axis):
    w = weights()
    q, scale = quantize_int8(w, axis=axis)
    assert q.dtype == tf.int8 and scale.dtype == tf.float32
    assert tuple(scale.shape) == (w.shape[1] if axis == 0 else w.shape[0],)
    np.testing.assert_allclose(scale, np.abs(w).max(axis=axis) / 127.0, rtol=1e-6)
    back = dequantize_int8(q, scale, axis=axis).numpy()
    error = np.abs(back - w)
    assert np.all(error <= np.expand_dims(scale.numpy(), axis) / 2 * (1 + 1e-5))
    # Every channel's largest weight is 127 (or -127) times its scale.
    assert np.all(np.abs(q.numpy()).max(axis=axis) == 127)


def test_a_channel_of_zeros_stays_zero_with_scale_zero():
    w = weights()
    w[:, 5] = 0.0
    q, scale = quantize_int8(w)
    assert scale[5] == 0.0 and np.all(q.numpy()[:, 5] == 0)
    assert np.all(np.isfinite(dequantize_int8(q, scale).numpy()))


@pytest.mark.parametrize("activations", ["dynamic", "float"])
def test_the_int8_product_is_close_to_the_float_one(activations):
    w = weights()
    x = np.random.default_rng(1).normal(size=(7, 32)).astype("float32")
    x[3] = 0.0  # a zero row: scale 0, output 0
    q, scale = quantize_int8(w)
    y = int8_matmul(x, q, scale, activations=activations).numpy()
    exact = x @ w
    assert y.dtype == np.float32 and y.shape == exact.shape
    np.testing.assert_array_equal(y[3], 0.0)
    # Relative to each output's scale: |x|·|w| bounds what rounding can move.
    bound = np.abs(x) @ np.abs(w)
    relative = np.abs(y - exact) / np.maximum(bound, 1e-6)
    assert relative.max() < (0.02 if activations == "dynamic" else 0.01)
    # And it is not the float product: the rounding is there.
    assert np.abs(y - exact).max() > 0


def test_dynamic_activations_are_the_rows_own_quantization():
    x = np.random.default_rng(2).normal(size=(5, 32)).astype("float32")
    w = weights()
    q, scale = quantize_int8(w)
    x_q, x_scale = quantize_rows(x)
    expected = (x_q.numpy().astype(np.int64) @ q.numpy().astype(np.int64)) * x_scale.numpy() \
        * scale.numpy()
    np.testing.assert_allclose(int8_matmul(x, q, scale), expected, rtol=1e-5)


def test_leading_axes_are_kept():
    w = weights()
    x = np.random.default_rng(3).normal(size=(2, 3, 32)).astype("float32")
    q, scale = quantize_int8(w)
    y = int8_matmul(x, q, scale)
    assert tuple(y.shape) == (2, 3, 48)
    np.testing.assert_allclose(y.numpy().reshape(6, 48), int8_matmul(x.reshape(6, 32), q, scale),
                               rtol=1e-6)


def test_an_unknown_activation_mode_is_refused_by_name():
    q, scale = quantize_int8(weights())
    with pytest.raises(ValueError, match="activations='int4'"):
        int8_matmul(np.zeros((1, 32), "float32"), q, scale, activations="int4")
