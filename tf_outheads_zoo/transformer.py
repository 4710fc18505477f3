"""Transformer encoder–decoder (Vaswani et al. 2017, "base") that takes any output head.

The backbone of the shared-private embeddings paper (Liu et al. 2019: Transformer
base, 6+6 layers, d_model 512, d_ff 2048, 8 heads) with every head of
`tf_outheads`: softmax, tied, joint, sampled softmax, continuous (vMF), ReWE.

Data flow (docs/architecture.md):
    encode(source_ids)                 -> memory (B, S, d), source mask (B, S)
    decode(target_in, memory, mask)    -> h (B, T, d)   teacher forcing, one parallel pass
    initial_decoding_state(source_ids, max_length=None)
                                       -> state: cross-attention K/V (once), empty
                                          self-attention K/V caches: growing, or
                                          preallocated for max_length steps (XLA)
    make_step_fn(cache)(ids_t, state)  -> log-scores (B, V), state with step t written
    head(h)                            -> logits (B, T, V)

Incremental decoding computes exactly what the parallel pass computes: position
t's keys and values are appended to the caches (or, preallocated, written at
t), and the attention mask of step t is "written and not padding", which is the
causal mask plus the target padding mask of the full pass (a test compares the
two to 1e-5).
"""

import math
import numbers

import keras
import tensorflow as tf
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.layers.attention import MultiHeadAttention, sinusoidal_position_encoding
from tf_outheads.models.seq2seq import Seq2SeqModel
from tf_outheads.validation import positive_int

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


@export
class TransformerSeq2Seq(Seq2SeqModel):
    """Transformer encoder–decoder (Vaswani et al. 2017) that takes any output head.

    Embeddings are scaled by √d and added to sinusoidal position encodings
    (any length; no learned positions); source padding is masked in the
    encoder's self-attention and in every cross-attention, target padding and
    the future in the decoder's self-attention.

    Initialisation: Glorot (Xavier) uniform for every projection (attention
    and feed-forward; biases zero), as tensor2tensor; embeddings from
    N(0, d^-0.5), as tensor2tensor and fairseq, so that √d · E(y) has unit
    variance per coordinate, like the position encodings.

    Args:
        source_vocabulary_size: int.
        target_vocabulary_size: int.
        model_dim: int, d_model: embeddings, attention and every layer's
            output. Divisible by `num_heads` and even. Defaults to 512.
        ffn_dim: int, d_ff: inner size of the feed-forward networks.
            Defaults to 2048.
        num_heads: int. Defaults to 8.
        encoder_layers: int >= 1. Defaults to 6.
        decoder_layers: int >= 1. Defaults to 6.
        dropout: float, P_drop of the paper: on the sum of embeddings and
            positions, and on every sub-layer's output before the residual
            addition. Defaults to 0.1.
        attention_dropout: float, on the attention weights. Defaults to 0.1
            (tensor2tensor's base and Liu et al. 2019 use 0.1; the paper does
            not mention it: set 0 for that).
        ffn_dropout: float, on the ReLU output of the feed-forward networks.
            Defaults to 0.1 (as `attention_dropout`).
        norm: `"post"` (the paper: `LayerNorm(x + Sublayer(x))`) or `"pre"`
            (`x + Sublayer(LayerNorm(x))`, with a final layer norm on the
            encoder and decoder outputs; trains without warm-up more easily).
            Defaults to `"post"`.
        head: the output head: `"softmax"`, `"tied"`, another registered name
            or a spec dict. Heads that reuse the target embedding (tied,
            joint, ReWE on the input embedding) get this model's
            `target_embedding`. Defaults to `"softmax"`.
        rewe: a ReWE head, as for `LSTMSeq2Seq` (built after every other
            weight). Defaults to `None`.
        shared_private: shared-private bilingual embeddings (Liu et al.
            2019), as for `LSTMSeq2Seq`: `None`, a dict `{"pairs": ...,
            "sharing_ratios": ...}` or a `SharedPrivateEmbedding` of this
            model's vocabularies and `model_dim`. With `head="tied"` this is
            the paper's model (target output tied to target input).
            Defaults to `None`.
        **kwargs: passed to `keras.Model`.

    Call arguments:
        inputs: dict with `"source_ids"` `(B, S)` and `"target_in"` `(B, T)`,
            int32, padded with 0.
        training: bool.

    Returns:
        As `LSTMSeq2Seq`: logits `(B, T, V)`; `{"hidden": (B, T, d)}` inside
        `model.training_outputs()` (training and evaluation steps).

    Example:
    ```python
    import numpy as np
    from tf_outheads_zoo.transformer import TransformerSeq2Seq
    model = TransformerSeq2Seq(100, 120, model_dim=32, ffn_dim=64, num_heads=4,
                               encoder_layers=2, decoder_layers=2, head="tied")
    logits = model({"source_ids": np.ones((2, 7), "int32"),
                    "target_in": np.ones((2, 5), "int32")})  # (2, 5, 120)
    ```

    References:
        Vaswani et al. 2017, "Attention is all you need", §3 and §5.4;
        Liu et al. 2019, "Shared-private bilingual word embeddings for NMT", §4.1.
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        model_dim=512,
        ffn_dim=2048,
        num_heads=8,
        encoder_layers=6,
        decoder_layers=6,
        dropout=0.1,
        attention_dropout=0.1,
        ffn_dropout=0.1,
        norm="post",
        head="softmax",
        rewe=None,
        shared_private=None,
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
        self.model_dim = positive_int("model_dim", model_dim)
        self.ffn_dim = positive_int("ffn_dim", ffn_dim)
        self.num_heads = positive_int("num_heads", num_heads)
        self.encoder_layers = positive_int("encoder_layers", encoder_layers)
        self.decoder_layers = positive_int("decoder_layers", decoder_layers)
        if model_dim % num_heads or model_dim % 2:
            raise ValueError("`model_dim` must be even and divisible by `num_heads`. "
                             f"Received: model_dim={model_dim}, num_heads={num_heads}")
        for name, value in (("dropout", dropout), ("attention_dropout", attention_dropout),
                            ("ffn_dropout", ffn_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value}")
        if norm not in NORMS:
            raise ValueError(f"`norm` must be one of {NORMS}. Received: norm={norm!r}")
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.ffn_dropout = ffn_dropout
        self.norm = norm

        # N(0, d^-0.5) (tensor2tensor, fairseq): √d · E(y) has unit variance.
        self.build_embeddings(
            model_dim, model_dim,
            lambda: keras.initializers.RandomNormal(mean=0.0, stddev=model_dim ** -0.5),
            shared_private)
        self.embedding_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        stack = dict(model_dim=model_dim, ffn_dim=ffn_dim, num_heads=num_heads, dropout=dropout,
                     attention_dropout=attention_dropout, ffn_dropout=ffn_dropout, norm=norm,
                     dtype=self.dtype_policy)
        self.encoder = TransformerEncoder(encoder_layers, name="encoder", **stack)
        self.decoder = TransformerDecoder(decoder_layers, name="decoder", **stack)
        self.build_heads(head, rewe)

    @property
    def hidden_size(self):
        return self.model_dim

    def build_network(self):
        for embedding in (self.source_embedding, self.target_embedding):
            if embedding.output_dim != self.model_dim:
                raise ValueError(
                    "The embeddings of a Transformer must have `model_dim` columns. "
                    f"Received: {embedding.name}.output_dim={embedding.output_dim}, "
                    f"model_dim={self.model_dim}")
            if not embedding.built:
                embedding.build((None, None))
        self.encoder.build(self.model_dim)
        self.decoder.build(self.model_dim)

    def _embed(self, embedding, ids, positions, training=False):
        """`√d · E(ids) + PE(positions)`, dropped: `(…, d)`."""
        x = embedding(ids)
        x = x * ops.cast(math.sqrt(self.model_dim), x.dtype)
        x = x + ops.cast(sinusoidal_position_encoding(positions, self.model_dim), x.dtype)
        return self.embedding_dropout(x, training=training)

    # -- encoder side -----------------------------------------------------
    def encode(self, source_ids, training=False):
        """Source ids `(B, S)` → `(memory (B, S, d), source_mask (B, S) bool)`."""
        source_ids = ops.cast(source_ids, "int32")
        source_mask = ops.not_equal(source_ids, PAD_ID)
        positions = ops.arange(ops.shape(source_ids)[1], dtype="int32")[None, :]
        x = self._embed(self.source_embedding, source_ids, positions, training=training)
        return self.encoder(x, source_mask, training=training), source_mask

    def decode(self, target_in, memory, source_mask, training=False, return_alignments=False):
        """Teacher forcing: `target_in (B, T)` → `h (B, T, d)` (and alignments, see
        `TransformerDecoder.call`)."""
        target_in = ops.cast(target_in, "int32")
        positions = ops.arange(ops.shape(target_in)[1], dtype="int32")[None, :]
        x = self._embed(self.target_embedding, target_in, positions, training=training)
        return self.decoder(x, ops.not_equal(target_in, PAD_ID), memory, source_mask,
                            training=training, return_alignments=return_alignments)

    def teacher_forced(self, source_ids, target_in, training=False, return_alignments=False):
        memory, source_mask = self.encode(source_ids, training=training)
        return self.decode(target_in, memory, source_mask, training=training,
                           return_alignments=return_alignments)

    # -- decoding contract ------------------------------------------------
    def initial_decoding_state(self, source_ids, max_length=None):
        """The decoding state of a batch of sources.

        Args:
            source_ids: int `(B, S)`, padded with 0.
            max_length: `None`, int or int32 tensor. `None` (what
                `TranslationGraph` passes outside XLA): the self-attention
                caches start empty and each step appends its position, as
                OpenNMT-py's and fairseq's do, so a step attends over the
                positions decoded so far only; their length is unknown to the
                graph, which `tf.while_loop` accepts. Otherwise the number of
                decoding steps the search will run (its `max_length`; with
                per-sentence limits `(B,)`, their maximum is taken): the caches
                are preallocated to that length and every state entry keeps
                its shape, as XLA needs. A step past it would not be cached.
                Both give the same results. Defaults to `None`.

        Returns:
            dict of tensors, each with leading dimension B:
            `step` `(B,)` int32, the position the next step writes;
            `memory_mask` `(B, S)` bool, source padding;
            `alignment` `(B, S)` float32, the last step's cross-attention of
            the last layer averaged over heads (beam search's coverage
            penalty reads it); per decoder layer `i`: `cross_keys_i`,
            `cross_values_i` `(B, H, S, d/H)`, computed once here and
            returned unchanged by every step (beam search does not reorder
            them). The caches, growing: `past_mask` `(B, t)` bool, positions
            decoded so far that are not padding, and `past_keys_i`,
            `past_values_i` `(B, H, t, d/H)`, t = 0 here; preallocated:
            `self_mask` `(B, L)` (positions written so far that are not
            padding), `self_keys_i`, `self_values_i` `(B, H, L, d/H)`,
            `L = max(max_length, 1)`.

        Raises:
            ValueError: `max_length` is negative.
        """
        cache_length = None if max_length is None else _decoding_length(max_length)
        memory, source_mask = self.encode(source_ids, training=False)
        return self.decoder.initial_state(memory, source_mask, cache_length)

    def decoder_step(self, ids_t, state):
        x_t = self._embed(self.target_embedding, ids_t, state["step"])  # (B, d)
        return self.decoder.step(x_t, ids_t, state)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "model_dim": self.model_dim,
                "ffn_dim": self.ffn_dim,
                "num_heads": self.num_heads,
                "encoder_layers": self.encoder_layers,
                "decoder_layers": self.decoder_layers,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "ffn_dropout": self.ffn_dropout,
                "norm": self.norm,
            }
        )
        return config


__all__ = [
    "MultiHeadAttention",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "TransformerSeq2Seq",
    "sinusoidal_position_encoding",
]
