"""The LSTM encoder–decoder's layers: a stacked (bi)LSTM encoder and the attentional
LSTM decoder with input feeding (Luong et al. 2015), teacher-forced and step by step;
`tf_outheads_zoo.lstm.LSTMSeq2Seq` assembles them (its docstring has the data flow).
"""

import keras
import tensorflow as tf
from keras import ops

from tf_outheads.layers.attention import MASKED_LOGIT, LuongAttention
from tf_outheads.ops.recurrent import attentional_lstm, masked_lstm, sequence_lstm


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


__all__ = ["AttentionalLSTMDecoder", "LSTMEncoder"]
