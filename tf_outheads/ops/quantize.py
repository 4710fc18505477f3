"""Symmetric int8 quantization for inference: per-channel weights, per-row activations.

The scheme is the one Keras 3 uses for `Dense` (`keras.quantizers.abs_max_quantize`,
`Dense._int8_call`) and CTranslate2 for its int8 models: a weight matrix `W (K, N)`
is stored as int8 `Q` and one float32 scale per output channel n,

    s_n = max_k |W_kn| / 127,      Q_kn = round(W_kn / s_n)  ∈ [-127, 127],

so the largest weight of each channel is exact and the error of any weight is at most
s_n / 2. Activations are quantized the same way, per row, when the product runs
(dynamic quantization: no calibration data), and the product is computed in integers:

    x·W ≈ (Q_x · Q_W) ⊙ s_x ⊗ s_W,      s_x,b = max_k |x_bk| / 127,

int8 × int8 with int32 accumulation (`tf.linalg.matmul(..., output_type=tf.int32)`;
oneDNN's int8 kernels on x86). Unlike Keras, which stores `127 / max` and divides,
the scales here are the dequantization factors (multiply to get floats back).

`int8_matmul(x, q, scale, activations="float")` is the weight-only variant: the
weights are turned back into floats at each product, which saves memory, not time.
"""

import tensorflow as tf

INT8_MAX = 127.0
ACTIVATIONS = ("dynamic", "float")
# What a model or head can be quantized to for inference (None: float).
QUANTIZATION_MODES = (None, "int8")


def quantize_int8(weights, axis=0):
    """Symmetric per-channel int8 quantization of `weights`.

    Args:
        weights: float tensor.
        axis: int, the axis reduced for each scale: `0` for a `(K, N)` kernel
            used as `x·W` (one scale per output column), `-1` for `(N, K)`
            rows (an embedding table: one scale per row). Defaults to `0`.

    Returns:
        `(q, scale)`: `q` int8 of `weights`' shape, `scale` float32 with `axis`
        removed; `weights ≈ q * scale` (scale broadcast back along `axis`). A
        channel of zeros gets scale 0 and zeros.
    """
    weights = tf.convert_to_tensor(weights)
    weights = tf.cast(weights, tf.float32)
    absmax = tf.reduce_max(tf.abs(weights), axis=axis, keepdims=True)
    scale = absmax / INT8_MAX
    # A zero channel: divide by 1 (its values are 0) and keep scale 0.
    q = tf.round(weights / tf.where(scale > 0.0, scale, 1.0))
    q = tf.cast(tf.clip_by_value(q, -INT8_MAX, INT8_MAX), tf.int8)
    return q, tf.squeeze(scale, axis=axis)


def dequantize_int8(q, scale, axis=0):
    """Float32 weights from `quantize_int8`'s `(q, scale)`, `axis` as given to it."""
    return tf.cast(q, tf.float32) * tf.expand_dims(tf.cast(scale, tf.float32), axis)


def quantize_rows(x):
    """Dynamic per-row quantization of activations `x (..., K)`: `(q int8, scale
    (..., 1) float32)` with `x ≈ q * scale`; a row of zeros gets scale 0."""
    q, scale = quantize_int8(x, axis=-1)
    return q, scale[..., tf.newaxis]


def int8_matmul(x, q, scale, activations="dynamic"):
    """`x · W` for `W ≈ q * scale`, `(q, scale) = quantize_int8(W, axis=0)`.

    Args:
        x: float tensor `(..., K)`.
        q: int8 `(K, N)`.
        scale: float32 `(N,)`.
        activations: `"dynamic"` (default): `x` quantized per row and the
            product computed in int8 with int32 sums; `"float"`: `q` turned
            back into `x`'s dtype and a float product (weight-only int8).

    Returns:
        float32 `(..., N)`.
    """
    if activations not in ACTIVATIONS:
        raise ValueError(f"`activations` must be one of {ACTIVATIONS}. "
                         f"Received: activations={activations!r}")
    scale = tf.cast(scale, tf.float32)
    if activations == "float":
        product = tf.matmul(tf.cast(x, tf.float32), tf.cast(q, tf.float32))
        return product * scale
    x_q, x_scale = quantize_rows(x)
    rank = x_q.shape.rank
    if rank != 2:  # (..., K) rows as one (R, K) matrix: the int8 kernel is 2-D
        shape = tf.shape(x_q)
        x_q = tf.reshape(x_q, [-1, shape[-1]])
    product = tf.matmul(x_q, q, output_type=tf.int32)
    if rank != 2:
        product = tf.reshape(product, tf.concat([shape[:-1], tf.shape(q)[1:]], axis=0))
    return tf.cast(product, tf.float32) * x_scale * scale


__all__ = ["QUANTIZATION_MODES", "dequantize_int8", "int8_matmul", "quantize_int8", "quantize_rows"]
