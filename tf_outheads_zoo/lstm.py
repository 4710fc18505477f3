"""LSTM encoder–decoder with Luong global attention and input feeding.

The backbone of Pappas et al. 2018, Kumar & Tsvetkov 2019, the VIVO report and
ReWE: a (bi)LSTM encoder, a stacked LSTM decoder whose input at step t is
[E(y_{t−1}); h̃_{t−1}] (input feeding, Luong et al. 2015 §3.3), global attention,
and any output head of `tf_outheads`.

Data flow (docs/architecture.md):
    encode(source_ids)           -> decoding state (memory, keys, mask, LSTM states)
    decoder(target_in, state)    -> h (B, T, d_h)   teacher forcing, one scan over time
    decoder.step(ids_t, state)   -> h_t (B, d_h), new state   (same weights, same code)
    head(h)                      -> logits (B, T, V)
"""

import random as python_random

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.models.seq2seq import Seq2SeqModel
from tf_outheads_zoo.lstm_layers import AttentionalLSTMDecoder, LSTMEncoder


def _memory(state):
    """The encoder outputs `(memory (B, S, d), mask (B, S) bool)` of a decoding state."""
    return state["memory"], ops.cast(state["memory_mask"], "bool")


@export
class LSTMSeq2Seq(Seq2SeqModel):
    """Attentional LSTM encoder–decoder that takes any output head.

    Args:
        source_vocabulary_size: int.
        target_vocabulary_size: int.
        embedding_dim: int. Target (and, unless `source_embedding_dim` is
            set, source) embedding size. Defaults to 512.
        hidden_dim: int. LSTM size of encoder (both directions together) and
            decoder, and size of the attentional state h̃. Defaults to 512.
        num_layers: int in [1, 8]. Layers of the encoder and of the decoder.
            Defaults to 2.
        encoder_layers: int in [1, 8] or `None`. Encoder layers, when they
            differ from the decoder's (the VIVO report's Table 3: 1 encoder
            layer, 2 decoder layers). Defaults to `None` (`num_layers`).
        decoder_layers: int in [1, 8] or `None`. Defaults to `None`
            (`num_layers`). Decoder layer i starts from the final state of
            encoder layer i; decoder layers above the encoder's top layer
            start from zeros, and encoder layers above the decoder's top
            layer hand no state on.
        source_embedding_dim: int or `None`. Source embedding size, when it
            differs from the target's (Table 3: 512 source, 300 target).
            Defaults to `None` (`embedding_dim`).
        bidirectional_encoder: bool. Defaults to `False`.
        dropout: float. Between layers, on embeddings and on h̃. Defaults to 0.3.
        input_feeding: bool. Feed h̃_{t−1} to the decoder input. Defaults to `True`.
        attention_score: `"general"` or `"dot"`. Defaults to `"general"`.
        scaled_attention: bool. Divide the attention scores by √hidden_dim
            (`tf_outheads.layers.LuongAttention`'s `scaled`: against the
            attention's early collapse onto the source's last position at a
            high learning rate). Defaults to `False` (Luong et al.'s scores).
        uniform_init: float or `None`. Every weight (embeddings, LSTM
            kernels and biases, attention, head) is drawn from U(−a, a), the
            initialisation of OpenNMT-py (`param_init`), Luong et al. 2015 and
            Pappas et al. 2018. `None` keeps Keras' initializers (Glorot and
            orthogonal LSTM kernels, forget-gate bias 1, embeddings
            U(±0.05)), with which the same model learned far slower than
            OpenNMT-py's (benchmarks/docs/peer_opennmt.md).
            Defaults to `0.1`.
        head: the output head: `"softmax"`, `"tied"`, another registered name,
            or a spec dict `{"class_name": ..., "config": {...}}`. Heads that reuse
            the target embedding get this model's target embedding.
            Defaults to `"softmax"`.
        rewe: a ReWE head (Jauregi Unanue et al. 2019), trained next to the
            head and ignored at inference: `None`, `True` (the paper's
            Linear(d_h→200) → ReLU → Linear(200→m) regressing this model's
            target embedding), a `tf_outheads.ReWEHead` config dict (e.g.
            `{"targets": "pretrained", "embedding_dim": 300}`), a spec dict or a
            `ReWEHead`. Its weights are created after all others, so the rest
            of the model starts from the same values with or without it.
            Defaults to `None`.
        selection: neural vocabulary selection on the encoder outputs: `None`,
            `True` or a `tf_outheads.VocabularySelectionHead` config dict, spec dict
            or layer, built after all other weights. Defaults to `None`.
        shared_private: shared-private bilingual embeddings (Liu et al.
            2019): `None` (separate source and target tables), a dict
            `{"pairs": WordPairs | config | pairs file, "sharing_ratios":
            (λ_lm, λ_wf, λ_ur)}` or a `tf_outheads.SharedPrivateEmbedding` of
            this model's vocabularies and `embedding_dim`. Its target side is
            the target embedding every tied/joint/ReWE head reuses. Needs
            `source_embedding_dim` unset. Defaults to `None`.
        **kwargs: passed to `keras.Model`.

    Call arguments:
        inputs: dict with `"source_ids"` `(B, S)` and `"target_in"` `(B, T)`,
            int32, padded with 0.
        training: bool.

    Returns:
        The head's output: logits `(B, T, V)` for categorical heads. Inside
        `model.training_outputs()` (the training and evaluation steps), the
        decoder outputs `{"hidden": (B, T, d_h)}` instead, which every loss
        reads (`tf_outheads.losses.objective`).

    Example:
    ```python
    import numpy as np
    from tf_outheads_zoo.lstm import LSTMSeq2Seq
    model = LSTMSeq2Seq(100, 120, embedding_dim=32, hidden_dim=32, num_layers=1,
                        head="tied")
    logits = model({"source_ids": np.ones((2, 7), "int32"),
                    "target_in": np.ones((2, 5), "int32")})
    ```

    References:
        Luong, Pham & Manning 2015 (attention, input feeding);
        Pappas, Miculicich & Henderson 2018, §4.1 (the 2-layer/512 setup).
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size,
        embedding_dim=512,
        hidden_dim=512,
        num_layers=2,
        bidirectional_encoder=False,
        dropout=0.3,
        input_feeding=True,
        attention_score="general",
        uniform_init=0.1,
        head="softmax",
        scaled_attention=False,
        rewe=None,
        selection=None,
        encoder_layers=None,
        decoder_layers=None,
        source_embedding_dim=None,
        shared_private=None,
        **kwargs,
    ):
        super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
        for name, value in (("num_layers", num_layers), ("encoder_layers", encoder_layers),
                            ("decoder_layers", decoder_layers)):
            if value is None and name != "num_layers":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 8:
                raise ValueError(f"`{name}` must be an int in [1, 8]. Received: {name}={value!r}")
        if source_embedding_dim is not None and (
                isinstance(source_embedding_dim, bool) or not isinstance(source_embedding_dim, int)
                or source_embedding_dim < 1):
            raise ValueError("`source_embedding_dim` must be a positive int or None. "
                             f"Received: source_embedding_dim={source_embedding_dim!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout}")
        if shared_private is not None and source_embedding_dim not in (None, embedding_dim):
            raise ValueError(
                "Shared-private embeddings have one size for both sides: leave "
                "`source_embedding_dim` unset. "
                f"Received: source_embedding_dim={source_embedding_dim}, "
                f"embedding_dim={embedding_dim}")
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.source_embedding_dim = source_embedding_dim
        self.bidirectional_encoder = bidirectional_encoder
        self.dropout = dropout
        self.input_feeding = input_feeding
        self.attention_score = attention_score
        self.scaled_attention = scaled_attention
        self.uniform_init = uniform_init

        # Drawn again from U(±uniform_init) by `initialize` when it is set.
        self.build_embeddings(source_embedding_dim or embedding_dim, embedding_dim,
                              lambda: "uniform", shared_private)
        self.source_dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.encoder = LSTMEncoder(
            encoder_layers or num_layers, hidden_dim, bidirectional=bidirectional_encoder, dropout=dropout,
            uniform_init=uniform_init, dtype=self.dtype_policy, name="encoder",
        )
        self.decoder = AttentionalLSTMDecoder(
            self.target_embedding, decoder_layers or num_layers, hidden_dim, attention_score=attention_score,
            input_feeding=input_feeding, dropout=dropout, uniform_init=uniform_init,
            scaled_attention=scaled_attention, dtype=self.dtype_policy, name="decoder",
        )
        self.build_heads(head, rewe, selection)

    @property
    def hidden_size(self):
        return self.hidden_dim

    def build_network(self):
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        self.encoder.build(self.source_embedding.output_dim)
        self.decoder.build(self.hidden_dim)

    def initialize(self, variables):
        """With `uniform_init = a`, every variable given (biases and head included)
        drawn independently from U(−a, a), as OpenNMT-py's `param_init` (Pappas et
        al. use a = 0.1); without it, nothing.

        The draws are seeded from Python's `random`, as Keras' unseeded
        initializers are: `keras.utils.set_random_seed` (or `random.seed`) before
        building gives the same weights, and a model built with or without a
        ReWE head draws the same values for the weights both have.
        """
        if not self.uniform_init:
            return
        base = python_random.randint(1, 2 ** 30)
        for index, variable in enumerate(variables):
            variable.assign(keras.random.uniform(
                variable.shape, -self.uniform_init, self.uniform_init, dtype=variable.dtype,
                seed=base + index))

    # -- encoder side -----------------------------------------------------
    def encode(self, source_ids, training=False):
        """Source ids `(B, S)` → decoding state dict (see `AttentionalLSTMDecoder`)."""
        source_ids = ops.cast(source_ids, "int32")
        mask = ops.not_equal(source_ids, PAD_ID)
        embedded = self.source_dropout(self.source_embedding(source_ids), training=training)
        memory, hidden, cell = self.encoder(embedded, mask=mask, training=training)
        hidden, cell = (self._decoder_initial(states) for states in (hidden, cell))
        return self.decoder.initial_state(memory, mask, hidden, cell)

    def _decoder_initial(self, states):
        """Encoder final states `(B, L_enc, H)` → decoder initial states `(B, L_dec, H)`."""
        encoder_layers, decoder_layers = self.encoder.num_layers, self.decoder.num_layers
        if decoder_layers <= encoder_layers:
            return states[:, :decoder_layers]
        zeros = ops.zeros_like(states[:, :1])
        return ops.concatenate([states] + [zeros] * (decoder_layers - encoder_layers), axis=1)

    returns_memory = True

    def teacher_forced(self, source_ids, target_in, training=False, return_alignments=False,
                       return_memory=False):
        """`h (B, T, d_h)`, the attentional states h̃ (dropped in training: the
        decoder feeds the dropped one back), and the attention with
        `return_alignments`; with `return_memory`, `(that, (memory, mask))`."""
        state = self.encode(source_ids, training=training)
        outputs = self.decoder(ops.cast(target_in, "int32"), state, training=training,
                               return_alignments=return_alignments)
        return (outputs, _memory(state)) if return_memory else outputs

    # -- decoding contract ------------------------------------------------
    def initial_decoding_state(self, source_ids, max_length=None, return_memory=False):
        """The decoding state of a batch of sources (see `AttentionalLSTMDecoder`); with
        `return_memory`, `(state, (memory, mask))`.

        Args:
            source_ids: int `(B, S)`, padded with 0.
            max_length: the number of decoding steps the search will run (int
                or int32 tensor), part of the decoding contract for models
                that preallocate per-step caches (`tf_outheads_zoo.TransformerSeq2Seq`).
                Ignored: the LSTM state does not grow with the output.
                Defaults to `None`.
        """
        del max_length  # the LSTM state has no per-step cache
        state = self.encode(source_ids, training=False)
        return (state, _memory(state)) if return_memory else state

    def decoder_step(self, ids_t, state):
        return self.decoder.step(ids_t, state)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embedding_dim": self.embedding_dim,
                "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers,
                "encoder_layers": self.encoder_layers,
                "decoder_layers": self.decoder_layers,
                "source_embedding_dim": self.source_embedding_dim,
                "bidirectional_encoder": self.bidirectional_encoder,
                "dropout": self.dropout,
                "input_feeding": self.input_feeding,
                "attention_score": self.attention_score,
                "scaled_attention": self.scaled_attention,
                "uniform_init": self.uniform_init,
            }
        )
        return config


__all__ = ["LSTMSeq2Seq", "LSTMEncoder", "AttentionalLSTMDecoder"]
