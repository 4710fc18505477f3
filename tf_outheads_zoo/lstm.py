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
import tensorflow as tf
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.layers.attention import MASKED_LOGIT, LuongAttention
from tf_outheads.ops.recurrent import attentional_lstm, masked_lstm, sequence_lstm
from tf_outheads.models.seq2seq import Seq2SeqModel


class LSTMEncoder(keras.layers.Layer):
    """Stacked (bi)LSTM over embedded source tokens; padding masked.

    A bidirectional layer has `hidden_dim // 2` units per direction and its final
    states are the concatenation of both directions (as in OpenNMT), so the
    decoder of the same `hidden_dim` starts from them.
    """

    def __init__(self, num_layers, hidden_dim, bidirectional=False, dropout=0.0,
                 uniform_init=None, **kwargs):
        super().__init__(**kwargs)
        if bidirectional and hidden_dim % 2:
            raise ValueError(
                "A bidirectional encoder needs an even hidden size. "
                f"Received: hidden_dim={hidden_dim}"
            )
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.bidirectional = bidirectional
        self.dropout = dropout
        self.uniform_init = uniform_init
        self.supports_masking = True
        self.rnn_layers = []
        for index in range(num_layers):
            units = hidden_dim // 2 if bidirectional else hidden_dim
            lstm = keras.layers.LSTM(
                units,
                return_sequences=True,
                return_state=True,
                kernel_initializer="glorot_uniform",
                recurrent_initializer="orthogonal",
                dtype=self.dtype_policy,
                name=f"lstm_{index}",
            )
            if bidirectional:
                lstm = keras.layers.Bidirectional(
                    lstm, dtype=self.dtype_policy, name=f"bilstm_{index}"
                )
            self.rnn_layers.append(lstm)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        # `call` through tf_outheads.ops.masked_lstm (both directions in one loop, a
        # hand-written gradient) on CPUs; where a GPU is visible, Keras' LSTM layers,
        # which run cuDNN's kernel there (right-padded masks).
        self.fused = not tf.config.list_logical_devices("GPU")

    def build(self, input_dim):
        for index, layer in enumerate(self.rnn_layers):
            layer.build((None, None, input_dim if index == 0 else self.hidden_dim))
        self.built = True

    def call(self, inputs, mask, training=False):
        if self.fused:
            return self._fused_call(inputs, mask, training)
        outputs = inputs
        final_hidden, final_cell = [], []
        for index, layer in enumerate(self.rnn_layers):
            if index > 0:
                outputs = self.dropout_layer(outputs, training=training)
            results = layer(outputs, mask=mask, training=training)
            outputs = results[0]
            if self.bidirectional:
                h_fw, c_fw, h_bw, c_bw = results[1:]
                final_hidden.append(ops.concatenate([h_fw, h_bw], axis=-1))
                final_cell.append(ops.concatenate([c_fw, c_bw], axis=-1))
            else:
                final_hidden.append(results[1])
                final_cell.append(results[2])
        # (B, S, H), (B, L, H), (B, L, H)
        return outputs, ops.stack(final_hidden, axis=1), ops.stack(final_cell, axis=1)

    def _fused_call(self, inputs, mask, training):
        """`call` by `tf_outheads.ops.masked_lstm`: both directions of a layer in one
        loop with a hand-written gradient (forward-only out of training), on the
        Keras layers' weights. Padding
        outputs are zeros (Keras' unidirectional LSTM repeats the last output there;
        the attention never reads them)."""
        dtype = inputs.dtype
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        time_mask = ops.transpose(tf.sequence_mask(lengths, ops.shape(inputs)[1]))  # (S, B)
        outputs = inputs
        final_hidden, final_cell = [], []
        for index, layer in enumerate(self.rnn_layers):
            if index > 0:
                outputs = self.dropout_layer(outputs, training=training)
            xs = ops.transpose(outputs, (1, 0, 2))  # (S, B, in)
            if self.bidirectional:
                cells = [layer.forward_layer.cell, layer.backward_layer.cell]
                xs = [xs, tf.reverse_sequence(xs, lengths, seq_axis=0, batch_axis=1)]
            else:
                cells, xs = [layer.cell], [xs]
            xw = [ops.matmul(x, ops.cast(lstm_cell.kernel, dtype)) + ops.cast(lstm_cell.bias, dtype)
                  for x, lstm_cell in zip(xs, cells)]
            directions, hidden, cell = masked_lstm(
                xw, time_mask, [ops.cast(lstm_cell.recurrent_kernel, dtype) for lstm_cell in cells],
                differentiable=bool(training))
            if self.bidirectional:
                directions[1] = tf.reverse_sequence(directions[1], lengths, seq_axis=0,
                                                    batch_axis=1)
            outputs = ops.transpose(ops.concatenate(directions, axis=-1), (1, 0, 2))
            final_hidden.append(ops.concatenate(hidden, axis=-1))
            final_cell.append(ops.concatenate(cell, axis=-1))
        return outputs, ops.stack(final_hidden, axis=1), ops.stack(final_cell, axis=1)


class AttentionalLSTMDecoder(keras.layers.Layer):
    """Stacked LSTM decoder with global attention and input feeding.

    `step` (incremental decoding) runs `_step` once. `call` (teacher forcing) runs
    the same math over the whole sequence: by default through
    `tf_outheads.ops.attentional_lstm`, one loop with a hand-written gradient
    (a CPU training step of `lstm-cpu`'s shape 1.12–1.15× faster at 64 × 30 tokens,
    1.26–1.31× at 16 × 120, single runs; benchmarks/docs/training.md, "fused recurrences");
    with `fused = False` (an attribute, for checks) or `return_alignments`, as a
    `tf.while_loop` of `_step` that autodiff differentiates. Both give the same
    values and gradients (tests/ops/test_recurrent.py).

    Without input feeding the recurrence does not depend on the attention. Where a
    GPU is visible (`cudnn`, an attribute), teacher forcing then runs each layer
    over the whole sequence in one cuDNN call (`tf_outheads.ops.sequence_lstm`, on
    the cells' weights) and attends at every step at once; the same values and
    gradients (tests/ops/test_recurrent.py, through the op's loop on a CPU).
    """

    def __init__(self, embedding, num_layers, hidden_dim, attention_score="general",
                 input_feeding=True, dropout=0.0, uniform_init=None, scaled_attention=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.attention_score = attention_score
        self.input_feeding = input_feeding
        self.dropout = dropout
        self.uniform_init = uniform_init
        self.cells = [
            keras.layers.LSTMCell(
                hidden_dim,
                kernel_initializer="glorot_uniform",
                recurrent_initializer="orthogonal",
                dtype=self.dtype_policy,
                name=f"lstm_cell_{index}",
            )
            for index in range(num_layers)
        ]
        self.attention = LuongAttention(
            hidden_dim,
            score=attention_score,
            scaled=scaled_attention,
            kernel_initializer="glorot_uniform",
            dtype=self.dtype_policy,
            name="attention",
        )
        self.seed_generator = keras.random.SeedGenerator(seed=None)
        self.fused = True
        self.cudnn = bool(tf.config.list_logical_devices("GPU"))

    def build(self, memory_dim):
        input_dim = self.embedding.output_dim + (self.hidden_dim if self.input_feeding else 0)
        for index, cell in enumerate(self.cells):
            cell.build((None, input_dim if index == 0 else self.hidden_dim))
        self.attention.build((None, self.hidden_dim), (None, None, memory_dim))
        self.built = True

    def initial_state(self, memory, memory_mask, hidden, cell):
        """Decoding state for a batch: a dict of tensors with leading batch dim."""
        batch = ops.shape(memory)[0]
        return {
            "memory": memory,
            "keys": self.attention.memory_keys(memory),
            "memory_mask": ops.cast(memory_mask, memory.dtype),
            "hidden": hidden,
            "cell": cell,
            "attentional": ops.zeros((batch, self.hidden_dim), dtype=memory.dtype),
            "alignment": ops.zeros(ops.shape(memory_mask), dtype="float32"),
        }

    def _step(self, inputs_t, state, noise_t=None):
        """One decoder step on embedded inputs `(B, E)`; `noise_t` holds dropout masks."""
        x = inputs_t
        if self.input_feeding:
            x = ops.concatenate([x, state["attentional"]], axis=-1)
        hidden, cell = [], []
        for index, lstm_cell in enumerate(self.cells):
            if index > 0 and noise_t is not None:
                x = x * noise_t[index - 1]
            x, (h, c) = lstm_cell(x, [state["hidden"][:, index], state["cell"][:, index]])
            hidden.append(h)
            cell.append(c)
        attentional, alignment = self.attention(
            x, state["memory"], state["keys"], state["memory_mask"]
        )
        if noise_t is not None:
            # OpenNMT-py drops the attentional state and feeds the dropped one back.
            attentional = attentional * noise_t[-1]
        new_state = dict(state)
        new_state.update(
            hidden=ops.stack(hidden, axis=1),
            cell=ops.stack(cell, axis=1),
            attentional=attentional,
            alignment=alignment,
        )
        return attentional, new_state

    def step(self, ids_t, state):
        """Incremental decoding: `ids_t (B,)` → `(h_t (B, d_h), new_state)`."""
        return self._step(self.embedding(ids_t), state)

    def call(self, target_in, state, training=False, return_alignments=False):
        """Teacher forcing: `h (B, T, d_h)`, and with `return_alignments` also
        the attention weights `(B, T, S)` of every step."""
        embedded = self.embedding(target_in)  # (B, T, E)
        noise = None
        if training and self.dropout > 0:
            embedded = keras.random.dropout(embedded, self.dropout, seed=self.seed_generator)
            # One mask per step, drawn before the loop: between LSTM layers and on
            # the attentional output. (num_layers, T, B, H) after transposition.
            shape = (self.num_layers,) + tuple(ops.shape(embedded)[:2]) + (self.hidden_dim,)
            keep = keras.random.uniform(shape, seed=self.seed_generator) >= self.dropout
            noise = ops.cast(keep, embedded.dtype) / (1.0 - self.dropout)
            noise = ops.transpose(noise, (2, 0, 1, 3))  # (T, L, B, H)
        if self.cudnn and not self.input_feeding and not return_alignments:
            return self._sequence_call(embedded, state, noise)
        if self.fused and not return_alignments:
            return self._fused_call(embedded, state, noise, training)
        xs = ops.transpose(embedded, (1, 0, 2))  # (T, B, E)
        carry_keys = ("hidden", "cell", "attentional")
        constants = {k: v for k, v in state.items() if k not in carry_keys}
        steps = tf.shape(xs)[0]
        outputs = tf.TensorArray(xs.dtype, size=steps, element_shape=state["attentional"].shape)
        # The alignments' TensorArray is a loop variable only when asked for: an
        # unwritten list in the loop breaks its gradient under XLA ("TensorList
        # input for ZerosLike op is an uninitialized list").
        arrays = (outputs,)
        if return_alignments:
            arrays += (tf.TensorArray("float32", size=steps,
                                      element_shape=state["alignment"].shape),)

        # A while loop, not keras.ops.scan: the TF backend's scan requires the
        # per-step outputs to have the carry's structure.
        def body(t, carry, arrays):
            full = dict(constants)
            full.update(zip(carry_keys, carry))
            noise_t = noise[t] if noise is not None else None
            output, new_state = self._step(xs[t], full, noise_t)
            written = (arrays[0].write(t, output),)
            if return_alignments:
                written += (arrays[1].write(t, ops.cast(new_state["alignment"], "float32")),)
            return t + 1, tuple(new_state[k] for k in carry_keys), written

        _, _, arrays = tf.while_loop(
            lambda t, *_: t < steps,
            body,
            (tf.constant(0), tuple(state[k] for k in carry_keys), arrays),
            maximum_iterations=steps,  # lets XLA size the TensorArray
        )
        outputs = ops.transpose(arrays[0].stack(), (1, 0, 2))  # (B, T, H)
        if return_alignments:
            return outputs, ops.transpose(arrays[1].stack(), (1, 0, 2))  # (B, T, S)
        return outputs

    def _sequence_call(self, embedded, state, noise):
        """`call` without input feeding: each layer over the whole sequence
        (`sequence_lstm`: cuDNN where a GPU is visible), then the attention of every
        step at once; the dropout masks of `noise` `(T, L, B, H)` as the loop uses them."""
        dtype = embedded.dtype
        x = embedded
        for index, lstm_cell in enumerate(self.cells):
            if index > 0 and noise is not None:
                x = x * ops.transpose(noise[:, index - 1], (1, 0, 2))
            x = sequence_lstm(x, state["hidden"][:, index], state["cell"][:, index],
                              ops.cast(lstm_cell.kernel, dtype),
                              ops.cast(lstm_cell.recurrent_kernel, dtype),
                              ops.cast(lstm_cell.bias, dtype))
        attentional, _ = self.attention(x, state["memory"], state["keys"], state["memory_mask"])
        if noise is not None:
            attentional = attentional * ops.transpose(noise[:, -1], (1, 0, 2))
        return attentional  # (B, T, H)

    def _fused_call(self, embedded, state, noise, training):
        """`call` by `tf_outheads.ops.attentional_lstm`: the same math, its
        gradient hand-written (one backward loop, weight gradients after it). Out
        of training the loop runs forward-only (nothing saved for a backward pass;
        a SavedModel can hold it)."""
        dtype = embedded.dtype
        embedding_dim = self.embedding.output_dim
        first = self.cells[0]
        kernel = ops.cast(first.kernel, dtype)
        recurrent = ops.cast(first.recurrent_kernel, dtype)
        xw0 = ops.matmul(ops.transpose(embedded, (1, 0, 2)), kernel[:embedding_dim])
        xw0 = xw0 + ops.cast(first.bias, dtype)  # (T, B, 4H)
        if self.input_feeding:
            kernels = [ops.concatenate([kernel[embedding_dim:], recurrent], axis=0)]
        else:
            kernels = [recurrent]
        biases = []
        for lstm_cell in self.cells[1:]:
            kernels.append(ops.concatenate([ops.cast(lstm_cell.kernel, dtype),
                                            ops.cast(lstm_cell.recurrent_kernel, dtype)], axis=0))
            biases.append(ops.cast(lstm_cell.bias, dtype))
        mask_bias = (1.0 - ops.cast(state["memory_mask"], "float32")) * MASKED_LOGIT
        outputs = attentional_lstm(
            xw0,
            ops.transpose(state["hidden"], (1, 0, 2)),
            ops.transpose(state["cell"], (1, 0, 2)),
            state["attentional"],
            state["memory"],
            state["keys"],
            mask_bias,
            kernels,
            biases,
            ops.cast(self.attention.output_kernel, dtype),
            noise=noise,
            input_feeding=self.input_feeding,
            differentiable=bool(training),
        )
        return ops.transpose(outputs, (1, 0, 2))  # (B, T, H)


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
        self.build_heads(head, rewe)

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

    def teacher_forced(self, source_ids, target_in, training=False, return_alignments=False):
        """`h (B, T, d_h)`, the attentional states h̃ (dropped in training: the
        decoder feeds the dropped one back), and the attention with
        `return_alignments`."""
        state = self.encode(source_ids, training=training)
        return self.decoder(ops.cast(target_in, "int32"), state, training=training,
                            return_alignments=return_alignments)

    # -- decoding contract ------------------------------------------------
    def initial_decoding_state(self, source_ids, max_length=None):
        """The decoding state of a batch of sources (see `AttentionalLSTMDecoder`).

        Args:
            source_ids: int `(B, S)`, padded with 0.
            max_length: the number of decoding steps the search will run (int
                or int32 tensor), part of the decoding contract for models
                that preallocate per-step caches (`tf_outheads_zoo.TransformerSeq2Seq`).
                Ignored: the LSTM state does not grow with the output.
                Defaults to `None`.
        """
        del max_length  # the LSTM state has no per-step cache
        return self.encode(source_ids, training=False)

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
