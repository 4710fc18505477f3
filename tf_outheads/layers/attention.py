"""Luong global attention (Luong et al. 2015, §3.1), one decoder step at a time."""

import numbers

import keras
from keras import ops

from tf_outheads.api_export import export

# Added to the scores of padding positions; finite so fully-masked rows stay NaN-free.
_MASK_PENALTY = -1e9


@export
class LuongAttention(keras.layers.Layer):
    """Global attention with the attentional hidden state h̃_t = tanh(W_c[c_t; h_t]).

    Scores (Luong et al. 2015, Eq. 8): `"dot"` hₜᵀ h̄ₛ, or `"general"`
    hₜᵀ W_a h̄ₛ. For `"general"` the memory side `W_a h̄ₛ` is computed once per
    sentence by `memory_keys` and kept in the decoding state, so each step costs
    one batched dot product.

    Args:
        units: int. Size of the attentional hidden state h̃ (Eq. 5).
        score: `"general"` or `"dot"`. Defaults to `"general"`.
        kernel_initializer: Defaults to `"glorot_uniform"`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        query: `(B, d_q)` decoder top-layer state hₜ.
        memory: `(B, S, d_m)` encoder outputs.
        keys: `(B, S, d_q)` from `memory_keys(memory)`.
        memory_mask: `(B, S)` 1 for real source tokens, 0 for padding.

    Returns:
        `(attentional, alignment)`: `(B, units)` and `(B, S)` attention weights.

    References:
        Luong, Pham & Manning 2015, Eq. 5, 7, 8.
    """

    def __init__(self, units, score="general", kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units < 1:
            raise ValueError(f"`units` must be a positive int. Received: units={units!r}")
        if score not in ("general", "dot"):
            raise ValueError(f"`score` must be 'general' or 'dot'. Received: score={score}")
        self.units = int(units)
        self.score = score
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, memory_shape):
        query_dim, memory_dim = query_shape[-1], memory_shape[-1]
        if self.score == "dot" and query_dim != memory_dim:
            raise ValueError(
                "'dot' attention needs equal query and memory sizes. "
                f"Received: query_dim={query_dim}, memory_dim={memory_dim}"
            )
        self.memory_kernel = None
        if self.score == "general":
            self.memory_kernel = self.add_weight(
                name="memory_kernel",
                shape=(memory_dim, query_dim),
                initializer=self.kernel_initializer,
            )
        self.output_kernel = self.add_weight(
            name="output_kernel",
            shape=(memory_dim + query_dim, self.units),
            initializer=self.kernel_initializer,
        )

    def memory_keys(self, memory):
        """`(B, S, d_m) → (B, S, d_q)`: the step-independent half of the score."""
        if self.memory_kernel is None:
            return memory
        return ops.matmul(memory, ops.cast(self.memory_kernel, memory.dtype))

    def call(self, query, memory, keys, memory_mask):
        scores = ops.einsum("bq,bsq->bs", query, keys)  # (B, S)
        scores = ops.cast(scores, "float32")
        scores = scores + (1.0 - ops.cast(memory_mask, "float32")) * _MASK_PENALTY
        alignment = ops.softmax(scores, axis=-1)
        context = ops.einsum("bs,bsm->bm", ops.cast(alignment, memory.dtype), memory)
        attentional = ops.tanh(
            ops.matmul(
                ops.concatenate([context, query], axis=-1),
                ops.cast(self.output_kernel, query.dtype),
            )
        )
        return attentional, alignment

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "score": self.score,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
