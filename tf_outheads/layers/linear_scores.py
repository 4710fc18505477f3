"""A head's decoding scores as one affine map of the decoder output.

Engines whose decoder ends with one linear layer (CTranslate2: a final norm, then
`logits = h · Wᵀ + b`, then a log-softmax) can run a head only where its scores
are, or rank words like, `log_softmax(h · Wᵀ + b)`. Each head answers for itself
(`linear_scores()`); this module holds what they share: the result type and the
fold of an affine map of `h` into the output matrix,

    (h · Kᵀ_p + b_p) · Eᵀ + b  =  h · (E · K_p)ᵀ + (E · b_p + b),

which is exact in real arithmetic (float32 rounding differs, ~1e-6 relative).
"""

import dataclasses

import keras
import numpy as np


@dataclasses.dataclass(frozen=True)
class LinearScores:
    """`scores(h) ≅ log_softmax(h · weightᵀ + bias)`.

    Attributes:
        weight: float32 numpy `(V, d_h)`, one row per word (the `[out, in]`
            layout of CTranslate2's and PyTorch's linear layers).
        bias: float32 numpy `(V,)`.
        exact: bool. True: the log-softmax of these logits *is* the head's
            `scores`, so every search (beam, n-best, sampling, scoring) agrees.
            False: only the arg-max is the head's (greedy decoding); the
            scores are not the head's (e.g. vMF's cosine or log-likelihood).
        note: str, what the map is, for the export's record.
    """

    weight: np.ndarray
    bias: np.ndarray
    exact: bool
    note: str


def to_numpy(x):
    """A weight or tensor as a float32 numpy array."""
    return np.asarray(keras.ops.convert_to_numpy(x), dtype="float32")


def dense_affine(dense, owner, role, activation=None):
    """`(kernel (d_in, d_out), bias (d_out,) or None)` of a Keras `Dense` layer followed
    by `activation` (default: the layer's own), refused with the reason if that is not
    linear.

    Args:
        dense: `keras.layers.Dense`.
        owner: str, the head for the message, e.g. "JointEmbeddingHead 'head'".
        role: str, what the layer does, e.g. "its context projection σ(V·h + b_v)".
        activation: the activation applied to the layer's output, if the owner
            applies it itself. Defaults to `None`: `dense.activation`.

    Raises:
        ValueError: the activation is not linear.
    """
    activation = activation_name(dense.activation if activation is None else activation)
    if activation != "linear":
        raise ValueError(
            f"{owner}: {role} has the nonlinearity {activation!r}, so the head's logits "
            "are not one matrix times the decoder output; an engine whose output layer "
            "is linear (CTranslate2) cannot run it. Only activation='linear' folds.")
    bias = to_numpy(dense.bias) if dense.use_bias else None
    return to_numpy(dense.kernel), bias


def activation_name(activation):
    """The serialized name of a Keras activation (`"linear"`, `"tanh"`, ...)."""
    name = keras.activations.serialize(activation)
    return name if isinstance(name, str) else getattr(activation, "__name__", repr(activation))


def fold(rows, bias, affine):
    """Logits `h · (rows · K)ᵀ + (rows · b_p + bias)` of `rows (V, d_o)` after the affine
    map `affine = (K (d_h, d_o), b_p (d_o,) or None)` of `h`, or `None` (the identity):
    `(weight (V, d_h), bias (V,))`, float32."""
    rows = np.asarray(rows, dtype="float64")
    bias = np.zeros(rows.shape[0]) if bias is None else np.asarray(bias, dtype="float64")
    if affine is None:
        return rows.astype("float32"), bias.astype("float32")
    kernel, inner_bias = affine
    weight = rows @ np.asarray(kernel, dtype="float64").T  # (V, d_o) · (d_o, d_h)
    if inner_bias is not None:
        bias = bias + rows @ np.asarray(inner_bias, dtype="float64")
    return weight.astype("float32"), bias.astype("float32")


__all__ = ["LinearScores", "activation_name", "dense_affine", "fold", "to_numpy"]
