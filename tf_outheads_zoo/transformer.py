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

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.layers.attention import sinusoidal_position_encoding
from tf_outheads.models.seq2seq import Seq2SeqModel
from tf_outheads.validation import positive_int
from tf_outheads_zoo.transformer_layers import (LAYER_NORM_EPSILON, NORMS, TransformerDecoder,
                                              TransformerEncoder, _decoding_length)


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
        selection: a neural vocabulary selection head on the encoder outputs,
            as for `LSTMSeq2Seq`. Defaults to `None`.
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
        selection=None,
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
        self.build_heads(head, rewe, selection)

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

    returns_memory = True

    def teacher_forced(self, source_ids, target_in, training=False, return_alignments=False,
                       return_memory=False):
        memory, source_mask = self.encode(source_ids, training=training)
        outputs = self.decode(target_in, memory, source_mask, training=training,
                              return_alignments=return_alignments)
        return (outputs, (memory, source_mask)) if return_memory else outputs

    # -- decoding contract ------------------------------------------------
    def initial_decoding_state(self, source_ids, max_length=None, return_memory=False):
        """The decoding state of a batch of sources (with `return_memory`, `(state,
        (memory, mask))`).

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
        state = self.decoder.initial_state(memory, source_mask, cache_length)
        return (state, (memory, source_mask)) if return_memory else state

    def decoder_step(self, ids_t, state):
        x_t = self._embed(self.target_embedding, ids_t, state["step"])  # (B, d)
        return self.decoder.step(x_t, ids_t, state)

    def ctranslate2_backbone(self, max_positions):
        """CTranslate2's `TransformerSpec` of this model (`Seq2SeqModel.ctranslate2_backbone`):
        pre- or post-norm layers, ReLU feed-forward, embeddings scaled by √d, this
        library's sinusoids as explicit position encodings, layer-norm epsilon 1e-6,
        alignments from the last layer averaged over heads (as `alignment` here)."""
        from ctranslate2.specs import common_spec, transformer_spec

        from tf_outheads.export import ctranslate2 as ct2
        from tf_outheads.layers.linear_scores import to_numpy

        pre_norm = self.norm == "pre"
        relu = common_spec.Activation.RELU
        encoder = transformer_spec.TransformerEncoderSpec(
            self.encoder_layers, self.num_heads, pre_norm=pre_norm, activation=relu)
        decoder = transformer_spec.TransformerDecoderSpec(
            self.decoder_layers, self.num_heads, pre_norm=pre_norm, activation=relu,
            alignment_layer=-1, alignment_heads=0)
        spec = transformer_spec.TransformerSpec(encoder, decoder)
        spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
        positions = ct2.position_encodings(self.model_dim, max_positions)
        encoder.embeddings[0].weight = to_numpy(self.source_embedding.embeddings)
        decoder.embeddings.weight = to_numpy(self.target_embedding.embeddings)
        for side, stack in ((encoder, self.encoder), (decoder, self.decoder)):
            side.position_encodings.encodings = positions
            for layer, block in zip(side.layer, stack.blocks):
                ct2.set_attention(layer.self_attention, block.self_attention,
                                  block.self_attention_norm, self_attention=True)
                if side is decoder:
                    ct2.set_attention(layer.attention, block.cross_attention,
                                      block.cross_attention_norm, self_attention=False)
                ct2.set_feed_forward(layer.ffn, block.ffn_inner, block.ffn_outer,
                                     block.ffn_norm)
            if stack.final_norm is not None:
                ct2.set_layer_norm(side.layer_norm, stack.final_norm)
        return spec

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


__all__ = ["TransformerSeq2Seq"]
