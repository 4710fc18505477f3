"""Attention layers: Luong global attention (Luong et al. 2015, §3.1), one decoder
step at a time, and the Transformer's multi-head attention with its sinusoidal
position encodings (Vaswani et al. 2017, §3.2 and §3.5)."""

import math
import numbers

import keras
import tensorflow as tf
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.ops.linalg import matvec, row_matmul
from tf_outheads.validation import positive_int

# Logit of a masked attention position. exp(-1e9 - max) is exactly 0 in float32,
# so a masked key gets weight 0 (as with -inf), and a row with every key masked
# stays finite (uniform weights) instead of NaN.
MASKED_LOGIT = -1e9


@export
class LuongAttention(keras.layers.Layer):
    """Global attention with the attentional hidden state h̃_t = tanh(W_c[c_t; h_t]).

    Scores (Luong et al. 2015, Eq. 8): `"dot"` hₜᵀ h̄ₛ, or `"general"`
    hₜᵀ W_a h̄ₛ. For `"general"` the memory side `W_a h̄ₛ` is computed once per
    sentence by `memory_keys` and kept in the decoding state, so each step costs
    one batched dot product. With `scaled`, either score is divided by √d_q, as
    the Transformer's dot products are (Vaswani et al. 2017, §3.2.1, Eq. 1); the
    keys carry the factor, so every path that uses them (training, decoding,
    exports) scales alike.

    Why scale: with Adam at the CPU presets' rate (5e-3, no warm-up) and
    U(±0.1) weights, an attentional LSTM's attention can collapse in its first
    updates onto one source position whose state barely depends on the sentence
    (the final `</s>`, or the full stop before it), where the saturated softmax
    keeps it for good: `lstm-cpu-vmf-softmax` at seed 1234 had 96 % of its
    attention there after 9 updates and dev BLEU 2.46 at step 600 (its other
    seeds 11.8–14.6); OpenNMT-py's untied model stalls so at two seeds in three.
    Scaled by 1/√256 the same seed reaches 13.49 (benchmarks/docs/peer_opennmt.md,
    "Stalls").

    Args:
        units: int. Size of the attentional hidden state h̃ (Eq. 5).
        score: `"general"` or `"dot"`. Defaults to `"general"`.
        scaled: bool. Divide the scores by √d_q (d_q the query size). Defaults
            to `False` (Luong et al.'s scores).
        kernel_initializer: Defaults to `"glorot_uniform"`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        query: `(B, d_q)` decoder top-layer state hₜ, or `(B, T, d_q)`: the states
            of T steps at once (a decoder without input feeding).
        memory: `(B, S, d_m)` encoder outputs.
        keys: `(B, S, d_q)` from `memory_keys(memory)`.
        memory_mask: `(B, S)` 1 for real source tokens, 0 for padding.

    Returns:
        `(attentional, alignment)`: `(B, units)` and `(B, S)` attention weights
        (`(B, T, units)` and `(B, T, S)` for T steps).

    References:
        Luong, Pham & Manning 2015, Eq. 5, 7, 8; Vaswani et al. 2017, Eq. 1 (`scaled`).
    """

    def __init__(self, units, score="general", kernel_initializer="glorot_uniform",
                 scaled=False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units < 1:
            raise ValueError(f"`units` must be a positive int. Received: units={units!r}")
        if score not in ("general", "dot"):
            raise ValueError(f"`score` must be 'general' or 'dot'. Received: score={score}")
        if not isinstance(scaled, bool):
            raise ValueError(f"`scaled` must be a bool. Received: scaled={scaled!r}")
        self.units = int(units)
        self.score = score
        self.scaled = scaled
        self.key_scale = 1.0
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, memory_shape):
        query_dim, memory_dim = query_shape[-1], memory_shape[-1]
        if self.score == "dot" and query_dim != memory_dim:
            raise ValueError(
                "'dot' attention needs equal query and memory sizes. "
                f"Received: query_dim={query_dim}, memory_dim={memory_dim}"
            )
        self.key_scale = 1.0 / math.sqrt(query_dim) if self.scaled else 1.0
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
        """`(B, S, d_m) → (B, S, d_q)`: the step-independent half of the score
        (times 1/√d_q when `scaled`)."""
        keys = memory
        if self.memory_kernel is not None:
            keys = ops.matmul(memory, ops.cast(self.memory_kernel, memory.dtype))
        if self.key_scale != 1.0:
            keys = keys * ops.cast(self.key_scale, keys.dtype)
        return keys

    def call(self, query, memory, keys, memory_mask):
        steps = "t" if len(query.shape) == 3 else ""  # one step, or T at once
        if steps:
            scores = ops.einsum("btq,bsq->bts", query, keys)  # (B, T, S)
        else:  # one step: the fused LSTM's one-row product (`tf_outheads.ops.linalg`)
            scores = matvec(keys, query)  # (B, S)
        scores = ops.cast(scores, "float32")
        mask_bias = (1.0 - ops.cast(memory_mask, "float32")) * MASKED_LOGIT
        scores = scores + (mask_bias[:, None] if steps else mask_bias)
        alignment = ops.softmax(scores, axis=-1)
        weights = ops.cast(alignment, memory.dtype)
        if steps:
            context = ops.einsum("bts,bsm->btm", weights, memory)
        else:
            context = matvec(memory, weights, transpose_a=True)  # (B, d_m)
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
                "scaled": self.scaled,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def sinusoidal_position_encoding(positions, dim):
    """Sinusoidal position encodings of Vaswani et al. 2017, §3.5.

    `PE(pos, 2i) = sin(pos / 10000^(2i/d))`, `PE(pos, 2i+1) = cos(pos / 10000^(2i/d))`,
    computed for the positions given, so any length (and any single decoding
    step) gets its encoding without a table.

    Args:
        positions: int tensor of any shape `(...)`.
        dim: int, the model size `d` (even).

    Returns:
        float32 tensor `(..., dim)`.
    """
    index = ops.arange(dim, dtype="int32")
    exponent = ops.cast((index // 2) * 2, "float32") / float(dim)  # 2i / d
    inverse_frequency = ops.exp(-math.log(10000.0) * exponent)  # (d,)
    angles = ops.cast(positions, "float32")[..., None] * inverse_frequency  # (..., d)
    return ops.where(ops.equal(index % 2, 0), ops.sin(angles), ops.cos(angles))


def _batch_matmul(x, y, one_position, adj_y=False):
    """`x · y` (`yᵀ` with `adj_y`) over leading batch axes, for attention: `y` is
    read transposed in place (Keras' einsum transposes the keys first, a copy of
    the whole cache at every decoding step). One query position (a decoding
    step) goes to `row_matmul`, T positions to oneDNN's batch matmul."""
    if one_position:
        return row_matmul(x, y, adj_y=adj_y)
    return tf.linalg.matmul(x, y, transpose_b=adj_y)


@export
class MultiHeadAttention(keras.layers.Layer):
    """Scaled dot-product attention with `num_heads` heads and explicit keys/values.

    Keys and values are computed apart from the attention (`keys_values`), so
    that a decoder can compute the encoder's once per sentence and keep its own
    in a cache: `attend(query, keys, values, mask)` never projects them again.
    Weights are a softmax in float32 whatever the compute dtype.

    Args:
        num_heads: int.
        model_dim: int, divisible by `num_heads`.
        dropout: float, dropout on the attention weights. Defaults to 0.
        kernel_initializer: initializer of the four projections. Defaults
            to `"glorot_uniform"`.
    """

    def __init__(self, num_heads, model_dim, dropout=0.0, kernel_initializer="glorot_uniform",
                 **kwargs):
        super().__init__(**kwargs)
        self.num_heads = positive_int("num_heads", num_heads)
        self.model_dim = positive_int("model_dim", model_dim)
        if model_dim % num_heads:
            raise ValueError("`model_dim` must be divisible by `num_heads`. "
                             f"Received: model_dim={model_dim}, num_heads={num_heads}")
        self.head_dim = model_dim // num_heads
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.query_dense = self._projection("query")
        self.key_dense = self._projection("key")
        self.value_dense = self._projection("value")
        self.output_dense = self._projection("output")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def _projection(self, name):
        # Its own initializer copy: a Keras random initializer repeats its draw.
        initializer = keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))
        return keras.layers.Dense(self.model_dim, kernel_initializer=initializer,
                                  dtype=self.dtype_policy, name=name)

    def build(self, query_dim, memory_dim=None):
        memory_dim = memory_dim or query_dim
        self.query_dense.build((None, None, query_dim))
        self.key_dense.build((None, None, memory_dim))
        self.value_dense.build((None, None, memory_dim))
        self.output_dense.build((None, None, self.model_dim))
        self.built = True

    def _split_heads(self, x):
        """`(B, T, d)` → `(B, H, T, d / H)`; one step's `(B, d)` → `(B, H, 1, d / H)`."""
        if len(x.shape) == 2:  # a single position: the heads need no transpose
            return ops.reshape(x, (-1, self.num_heads, 1, self.head_dim))
        batch = ops.shape(x)[0]
        x = ops.reshape(x, (batch, -1, self.num_heads, self.head_dim))
        return ops.transpose(x, (0, 2, 1, 3))

    def _merge_heads(self, context, rank):
        """`(B, H, T, d / H)` → `(B, T, d)`, or `(B, d)` where the query was `(B, d)`."""
        if rank == 2:
            return ops.reshape(context, (-1, self.model_dim))
        context = ops.transpose(context, (0, 2, 1, 3))
        return ops.reshape(context, (ops.shape(context)[0], -1, self.model_dim))

    def keys_values(self, memory):
        """Keys and values of `memory (B, S, d_m)`: two `(B, H, S, d / H)` tensors.
        One position `(B, d_m)` gives `(B, H, 1, d / H)`."""
        keys, values = self.key_dense(memory), self.value_dense(memory)
        return self._split_heads(keys), self._split_heads(values)

    def attend(self, query, keys, values, mask, training=False):
        """Attention of `query (B, T, d_q)` over `keys`/`values` `(B, H, S, d / H)`.

        A decoding step may pass one position as `(B, d_q)`: the same attention,
        computed on 2-D projections (a plain matmul each, no head transposes).

        Args:
            mask: bool tensor broadcastable to `(B, H, T, S)`; False hides a key.

        Returns:
            `(output (B, T, d), weights (B, H, T, S) float32)`; `(B, d)` and
            `(B, H, 1, S)` for a `(B, d_q)` query.
        """
        queries = self._split_heads(self.query_dense(query))
        queries = queries * ops.cast(self.head_dim ** -0.5, queries.dtype)
        one_position = len(query.shape) == 2
        logits = ops.cast(_batch_matmul(queries, keys, one_position, adj_y=True), "float32")
        logits = ops.where(mask, logits, MASKED_LOGIT)
        # The softmax written out: `ops.softmax` warns about a one-key axis (the first
        # position of a causal pass, a cache of one step).
        weights = ops.exp(logits - ops.max(logits, axis=-1, keepdims=True))
        weights = weights / ops.sum(weights, axis=-1, keepdims=True)
        dropped = self.dropout_layer(ops.cast(weights, values.dtype), training=training)
        context = _batch_matmul(dropped, values, one_position)  # (B, H, T, d / H)
        return self.output_dense(self._merge_heads(context, len(query.shape))), weights

    def call(self, query, memory, mask, training=False):
        keys, values = self.keys_values(memory)
        return self.attend(query, keys, values, mask, training=training)[0]

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "model_dim": self.model_dim,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config
