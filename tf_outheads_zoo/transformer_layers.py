"""The Transformer's layers (Vaswani et al. 2017): encoder and decoder layers (post- or
pre-norm sublayers), their stacks, and the decoder's incremental step with self-attention
caches; `tf_outheads_zoo.transformer.TransformerSeq2Seq` assembles them (its docstring has
the data flow).
"""

import numbers

import keras
import tensorflow as tf
from keras import ops

from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.layers.attention import MultiHeadAttention

# tensor2tensor's layer-norm epsilon.
LAYER_NORM_EPSILON = 1e-6
NORMS = ("post", "pre")


class _Sublayers(keras.layers.Layer):
    """What encoder and decoder layers share: the feed-forward network and the
    residual connection around every sub-layer, post-norm or pre-norm."""

    def __init__(self, model_dim, ffn_dim, num_heads, dropout=0.0, attention_dropout=0.0,
                 ffn_dropout=0.0, norm="post", **kwargs):
        super().__init__(**kwargs)
        # The layer's configuration; the sub-layers below are built from it.
        self.layer_settings = {
            "model_dim": model_dim, "ffn_dim": ffn_dim, "num_heads": num_heads,
            "dropout": dropout, "attention_dropout": attention_dropout,
            "ffn_dropout": ffn_dropout, "norm": norm,
        }
        self.model_dim, self.norm = model_dim, norm
        self.ffn_inner = keras.layers.Dense(ffn_dim, activation="relu",
                                            kernel_initializer="glorot_uniform",
                                            dtype=self.dtype_policy, name="ffn_inner")
        self.ffn_outer = keras.layers.Dense(model_dim, kernel_initializer="glorot_uniform",
                                            dtype=self.dtype_policy, name="ffn_outer")
        self.ffn_norm = self._layer_norm("ffn_norm")
        self.ffn_dropout_layer = keras.layers.Dropout(ffn_dropout, dtype=self.dtype_policy)
        self.residual_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def _layer_norm(self, name):
        return keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON,
                                               dtype=self.dtype_policy, name=name)

    def _attention(self, name):
        settings = self.layer_settings
        return MultiHeadAttention(settings["num_heads"], self.model_dim,
                                  dropout=settings["attention_dropout"],
                                  dtype=self.dtype_policy, name=name)

    def _build_feed_forward(self):
        self.ffn_inner.build((None, None, self.model_dim))
        self.ffn_outer.build((None, None, self.layer_settings["ffn_dim"]))
        self.ffn_norm.build((None, None, self.model_dim))

    def _sublayer_input(self, x, norm):
        """Pre-norm normalises the sub-layer's input; post-norm its output."""
        return norm(x) if self.norm == "pre" else x

    def _residual(self, x, output, norm, training):
        x = x + self.residual_dropout(output, training=training)
        return norm(x) if self.norm == "post" else x

    def _feed_forward(self, x, training):
        y = self._sublayer_input(x, self.ffn_norm)
        y = self.ffn_outer(self.ffn_dropout_layer(self.ffn_inner(y), training=training))
        return self._residual(x, y, self.ffn_norm, training)

    def get_config(self):
        config = super().get_config()
        config.update(self.layer_settings)
        return config


class TransformerEncoderLayer(_Sublayers):
    """Self-attention and feed-forward, each in a residual block (§3.1)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._layer_norm("self_attention_norm")

    def build(self, input_dim=None):
        self.self_attention.build(self.model_dim)
        self.self_attention_norm.build((None, None, self.model_dim))
        self._build_feed_forward()
        self.built = True

    def call(self, x, mask, training=False):
        """`x (B, S, d)`, `mask` bool `(B, 1, 1, S)` (source padding) → `(B, S, d)`."""
        y = self._sublayer_input(x, self.self_attention_norm)
        keys, values = self.self_attention.keys_values(y)
        y, _ = self.self_attention.attend(y, keys, values, mask, training=training)
        x = self._residual(x, y, self.self_attention_norm, training)
        return self._feed_forward(x, training)


class TransformerDecoderLayer(_Sublayers):
    """Masked self-attention, attention over the encoder output, feed-forward (§3.1).

    The same `call` serves the parallel pass (`cache=None`: keys and values of
    every position) and one decoding step (`cache=(keys, values)` of shape
    `(B, H, L, d / H)`: this step's key and value are appended, or written
    where `write` is True in a preallocated cache).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._layer_norm("self_attention_norm")
        self.cross_attention = self._attention("cross_attention")
        self.cross_attention_norm = self._layer_norm("cross_attention_norm")

    def build(self, input_dim=None, memory_dim=None):
        self.self_attention.build(self.model_dim)
        self.self_attention_norm.build((None, None, self.model_dim))
        self.cross_attention.build(self.model_dim, memory_dim or self.model_dim)
        self.cross_attention_norm.build((None, None, self.model_dim))
        self._build_feed_forward()
        self.built = True

    def call(self, x, self_mask, cross_keys, cross_values, cross_mask, cache=None, write=None,
             training=False):
        """One decoder layer.

        Args:
            x: `(B, T, d)`, or `(B, d)`: one decoding step.
            self_mask: bool, `(B, 1, T, T)` (causal and padding) or, in a step,
                `(B, 1, 1, L)` (positions written so far that are not padding).
            cross_keys, cross_values: `(B, H, S, d / H)`, from the encoder output.
            cross_mask: bool `(B, 1, 1, S)`, source padding.
            cache: `None`, or the self-attention `(keys, values)` `(B, H, L, d / H)`
                of the positions before this step (growing), or of all positions
                (preallocated).
            write: `None`: this step's key and value are appended to `cache`
                (`L + 1` positions out). Else bool `(B, 1, L, 1)`, where they go
                in a preallocated cache.

        Returns:
            `(x (B, T, d) or (B, d), cross-attention weights (B, H, T, S) float32,
            (self keys, self values))`: the cache with this step written, or
            the keys and values of all positions.
        """
        y = self._sublayer_input(x, self.self_attention_norm)
        keys, values = self.self_attention.keys_values(y)
        if cache is not None and write is None:
            keys = ops.concatenate([cache[0], keys], axis=2)
            values = ops.concatenate([cache[1], values], axis=2)
        elif cache is not None:
            keys = ops.where(write, keys, cache[0])
            values = ops.where(write, values, cache[1])
        y, _ = self.self_attention.attend(y, keys, values, self_mask, training=training)
        x = self._residual(x, y, self.self_attention_norm, training)

        y = self._sublayer_input(x, self.cross_attention_norm)
        y, cross_weights = self.cross_attention.attend(y, cross_keys, cross_values, cross_mask,
                                                       training=training)
        x = self._residual(x, y, self.cross_attention_norm, training)
        return self._feed_forward(x, training), cross_weights, (keys, values)


class _Stack(keras.layers.Layer):
    """`num_layers` layers and, with pre-norm, the final layer norm of their output."""

    layer_class = None

    def __init__(self, num_layers, model_dim, ffn_dim, num_heads, dropout=0.0,
                 attention_dropout=0.0, ffn_dropout=0.0, norm="post", **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers
        # Every layer of the stack is built from, and configured by, these settings.
        self.layer_settings = {
            "model_dim": model_dim, "ffn_dim": ffn_dim, "num_heads": num_heads,
            "dropout": dropout, "attention_dropout": attention_dropout,
            "ffn_dropout": ffn_dropout, "norm": norm,
        }
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.blocks = [
            self.layer_class(**self.layer_settings, dtype=self.dtype_policy,
                             name=f"layer_{index}")
            for index in range(num_layers)
        ]
        # Pre-norm leaves the residual stream unnormalised: one last layer norm.
        self.final_norm = None
        if norm == "pre":
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="final_norm")

    def build(self, input_dim=None):
        for block in self.blocks:
            block.build(self.model_dim)
        if self.final_norm is not None:
            self.final_norm.build((None, None, self.model_dim))
        self.built = True

    def _final(self, x):
        return self.final_norm(x) if self.final_norm is not None else x

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self.layer_settings})
        return config


class TransformerEncoder(_Stack):
    """The encoder stack over embedded source positions."""

    layer_class = TransformerEncoderLayer

    def call(self, x, source_mask, training=False):
        """`x (B, S, d)`, `source_mask` bool `(B, S)` (False at padding) → memory `(B, S, d)`."""
        mask = source_mask[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask, training=training)
        return self._final(x)


class TransformerDecoder(_Stack):
    """The decoder stack: a parallel pass (`call`) and one cached step (`step`)."""

    layer_class = TransformerDecoderLayer

    def call(self, x, target_mask, memory, source_mask, training=False, return_alignments=False):
        """Teacher forcing over embedded target positions.

        Args:
            x: `(B, T, d)`.
            target_mask: bool `(B, T)`, False at padding.
            memory: `(B, S, d)`, the encoder output.
            source_mask: bool `(B, S)`.

        Returns:
            `h (B, T, d)`; with `return_alignments` also the cross-attention
            weights of the last layer averaged over heads, `(B, T, S)` float32.
        """
        positions = ops.arange(ops.shape(x)[1], dtype="int32")
        causal = positions[:, None] >= positions[None, :]  # (T, T): no peeking ahead
        self_mask = ops.logical_and(causal[None, None], target_mask[:, None, None, :])
        cross_mask = source_mask[:, None, None, :]
        cross_weights = None
        for block in self.blocks:
            cross_keys, cross_values = block.cross_attention.keys_values(memory)
            x, cross_weights, _ = block(x, self_mask, cross_keys, cross_values, cross_mask,
                                        training=training)
        x = self._final(x)
        if return_alignments:
            return x, ops.mean(cross_weights, axis=1)
        return x

    def initial_state(self, memory, source_mask, max_length=None):
        """The decoding state of a batch (see `TransformerSeq2Seq.initial_decoding_state`):
        growing caches (`past_*`) without `max_length`, else preallocated ones (`self_*`)."""
        batch, source_length = ops.shape(memory)[0], ops.shape(memory)[1]
        growing = max_length is None
        prefix = "past" if growing else "self"
        length = 0 if growing else max_length
        # A growing cache's length is left unknown to the graph, so that a while_loop
        # takes a state whose length changes at every step (no-op when eager).
        unknown_length = _unknown_axis if growing else (lambda x, _: x)
        state = {
            "step": ops.zeros((batch,), dtype="int32"),
            "memory_mask": source_mask,
            f"{prefix}_mask": unknown_length(ops.zeros((batch, length), dtype="bool"), 1),
            "alignment": ops.zeros((batch, source_length), dtype="float32"),
        }
        cache_shape = (batch, self.num_heads, length, self.model_dim // self.num_heads)
        for index, block in enumerate(self.blocks):
            keys, values = block.cross_attention.keys_values(memory)
            state[f"cross_keys_{index}"] = keys
            state[f"cross_values_{index}"] = values
            state[f"{prefix}_keys_{index}"] = unknown_length(
                ops.zeros(cache_shape, dtype=keys.dtype), 2)
            state[f"{prefix}_values_{index}"] = unknown_length(
                ops.zeros(cache_shape, dtype=values.dtype), 2)
        return state

    def step(self, x_t, ids_t, state):
        """One decoding step: `x_t (B, d)` embedded `ids_t (B,)` → `(h_t (B, d), state)`.

        The step runs on `(B, d)` tensors: every projection is one 2-D matmul and
        the heads need no transpose (the attention's one-position form).

        Entries that do not change (`memory_mask`, `cross_keys_*`,
        `cross_values_*`) are returned as the very tensors given, so beam
        search does not reorder them.
        """
        step = state["step"]
        written = ops.not_equal(ids_t, PAD_ID)[:, None]  # (B, 1)
        if "past_mask" in state:  # growing caches: this step's position is appended
            prefix, write_cache = "past", None
            self_mask = ops.concatenate([state["past_mask"], written], axis=1)  # (B, t + 1)
        else:  # preallocated for L steps: written at `step`
            prefix = "self"
            cache_length = ops.shape(state["self_mask"])[1]
            write = ops.equal(ops.arange(cache_length, dtype="int32")[None, :],
                              step[:, None])  # (B, L)
            self_mask = ops.where(write, written, state["self_mask"])
            write_cache = write[:, None, :, None]  # (B, 1, L, 1)
        attention_mask = self_mask[:, None, None, :]  # (B, 1, 1, L)
        cross_mask = state["memory_mask"][:, None, None, :]
        new_state = dict(state)
        x, cross_weights = x_t, None
        for index, block in enumerate(self.blocks):
            cache = (state[f"{prefix}_keys_{index}"], state[f"{prefix}_values_{index}"])
            x, cross_weights, (keys, values) = block(
                x, attention_mask, state[f"cross_keys_{index}"], state[f"cross_values_{index}"],
                cross_mask, cache=cache, write=write_cache, training=False)
            new_state[f"{prefix}_keys_{index}"] = keys
            new_state[f"{prefix}_values_{index}"] = values
        new_state.update({
            "step": step + 1,
            f"{prefix}_mask": self_mask,
            "alignment": ops.mean(cross_weights, axis=1)[:, 0],  # (B, S)
        })
        return self._final(x), new_state


def _unknown_axis(x, axis):
    """`x` with its static size on `axis` unknown (a growing cache), in a graph."""
    if tf.executing_eagerly():
        return x
    shape = x.shape.as_list()
    return tf.raw_ops.PlaceholderWithDefault(
        input=x, shape=shape[:axis] + [None] + shape[axis + 1:])


def _decoding_length(max_length):
    """The cache length for `max_length` decoding steps: an int, or an int32 scalar tensor."""
    if isinstance(max_length, numbers.Integral) and not isinstance(max_length, bool):
        if max_length < 0:
            raise ValueError("`max_length` must be non-negative. "
                             f"Received: max_length={max_length}")
        return max(int(max_length), 1)
    max_length = tf.reduce_max(tf.cast(max_length, tf.int32))  # per-sentence limits: their max
    return tf.maximum(max_length, 1)
