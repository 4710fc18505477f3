"""A fused teacher-forced LSTM decoder with global attention and input feeding.

`attentional_lstm` runs the whole target sequence of a stacked LSTM decoder with
Luong attention (Luong et al. 2015, Eq. 5, 7, 8; input feeding §3.3) in one
`tf.while_loop`, and its gradient in one hand-written backward loop
(`tf.custom_gradient`).

Why: on a CPU the decoder of a small model (`lstm-cpu`: 256 units) is bound by
the per-op cost of the loop, not by its FLOPs. Autodiff of a while loop saves
every intermediate of every op of the step and runs the gradient of each of them
(about 4× the forward's time per step, measured; benchmarks/docs/training.md). The
backward loop here does only the recurrent part per step (two small matmuls and
the gate algebra per layer, the attention's softmax gradient); the weight
gradients, and those of the memory and the attention keys, are a few large
matmuls after the loop.

The math is the same as one `AttentionalLSTMDecoder._step` per time step
(tests/ops/test_recurrent.py checks values and every gradient against autodiff
of that step): per layer l, with the input x of layer 0 the embedded token and,
with input feeding, h̃_{t−1}:

    z = [x; h_{t−1}]·[W; U] + b,  i, f, g, o = σ(z_i), σ(z_f), tanh(z_g), σ(z_o)
    c_t = f ⊙ c_{t−1} + i ⊙ g,    h_t = o ⊙ tanh(c_t)

(Keras' LSTMCell gate order i, f, c, o), then on the top layer's h_t

    α = softmax(keys·h_t + mask),  ctx = αᵀ·memory,  h̃_t = tanh([ctx; h_t]·W_c).

Dropout masks are given (drawn before the loop): between layers and on h̃_t, the
dropped h̃_t being both the output and the next step's fed input (OpenNMT-py).
"""

import tensorflow as tf

from tf_outheads.ops.linalg import matvec


def attentional_lstm(xw0, hidden, cell, attentional, memory, keys, mask_bias,
                     kernels, biases, output_kernel, noise=None, input_feeding=True,
                     differentiable=True):
    """Teacher-forced attentional LSTM decoder over a whole sequence.

    Args:
        xw0: `(T, B, 4H)`, layer 0's input projection of the embedded target
            tokens, its bias included: `x_t·W_x + b` (the part of layer 0's
            kernel that multiplies the embedding).
        hidden: `(L, B, H)`, the initial hidden states.
        cell: `(L, B, H)`, the initial cell states.
        attentional: `(B, H)`, the initial fed h̃ (zeros).
        memory: `(B, S, D_m)`, the encoder outputs.
        keys: `(B, S, H)`, the attention keys (`W_a·memory`, or `memory`).
        mask_bias: float32 `(B, S)`, 0 on source tokens, a large negative
            number on padding.
        kernels: L tensors. Layer 0's is `[W_h̃; U]` `(2H, 4H)` with input
            feeding, else `U` `(H, 4H)`; layer l > 0's is `[W; U]` `(2H, 4H)`.
        biases: L − 1 tensors `(4H,)`, the biases of layers 1 … L − 1.
        output_kernel: `(D_m + H, H)`, W_c.
        noise: `(T, L, B, H)` dropout masks (already scaled) or `None`: index
            l − 1 multiplies the input of layer l, index L − 1 multiplies h̃.
        input_feeding: bool.
        differentiable: bool. False runs the forward loop alone: nothing saved for a
            backward pass, no custom gradient (autodiff of the plain loop still
            works, slowly). For inference, and for graphs that
            `tf.saved_model.save` serialises: it cannot save a custom gradient
            that captures its forward's TensorArrays. Defaults to True.

    Returns:
        `(T, B, H)`: h̃_t of every step (dropped where `noise` is given).
    """
    num_layers = len(kernels)
    if len(biases) != num_layers - 1:
        raise ValueError(f"{num_layers} kernels need {num_layers - 1} biases, "
                         f"received {len(biases)}")
    flat = [xw0, hidden, cell, attentional, memory, keys, mask_bias, output_kernel,
            *kernels, *biases]
    has_noise = noise is not None
    if has_noise:
        flat.append(noise)
    return _attentional_lstm(num_layers, bool(input_feeding), has_noise,
                             bool(differentiable))(*flat)


def _cell(z, c_prev):
    """One LSTM cell update from its pre-activations `z` `(B, 4H)` (gate order i, f, c, o):
    returns `(gates [i, f, g, o], c_t, tanh(c_t), h_t)`."""
    z_i, z_f, z_g, z_o = tf.split(z, 4, axis=-1)
    i, f, o = tf.sigmoid(z_i), tf.sigmoid(z_f), tf.sigmoid(z_o)
    g = tf.tanh(z_g)
    c_t = f * c_prev + i * g
    tanh_c = tf.tanh(c_t)
    return tf.concat([i, f, g, o], -1), c_t, tanh_c, o * tanh_c


def _cell_gradient(d_h, d_c, gates, c_prev, tanh_c):
    """Backward of `_cell`: from the gradients of h_t and c_t (c_t's own, not through
    h_t) to `(d_z (B, 4H), d_c_prev)`."""
    i, f, g, o = tf.split(gates, 4, axis=-1)
    d_c = d_c + d_h * o * (1.0 - tanh_c * tanh_c)
    d_z = tf.concat([
        d_c * g * i * (1.0 - i),
        d_c * c_prev * f * (1.0 - f),
        d_c * i * (1.0 - g * g),
        d_h * tanh_c * o * (1.0 - o),
    ], -1)
    return d_z, d_c * f


def _attentional_lstm(num_layers, input_feeding, has_noise, differentiable):
    """The function for one configuration (a closure, so that every argument of the
    custom-gradient function is a tensor); forward-only unless `differentiable`."""

    def run(*flat):
        xw0, hidden, cell, attentional, memory, keys, mask_bias, output_kernel = flat[:8]
        kernels = list(flat[8:8 + num_layers])
        biases = list(flat[8 + num_layers:8 + 2 * num_layers - 1])
        noise = flat[-1] if has_noise else None
        dtype = xw0.dtype
        # The softmax in float32 at least (float64 stays float64: gradient checks).
        score_dtype = tf.float64 if dtype == tf.float64 else tf.float32
        mask_bias = tf.cast(mask_bias, score_dtype)
        steps = tf.shape(xw0)[0]
        # Static where known, so that the loops' slices keep their shapes.
        units = hidden.shape[-1] if hidden.shape[-1] is not None else tf.shape(hidden)[-1]
        memory_dim = memory.shape[-1] if memory.shape[-1] is not None else tf.shape(memory)[-1]

        def array(element_dtype=dtype):
            # Read more than once outside tf.function (eager TensorArrays clear on read).
            return tf.TensorArray(element_dtype, size=steps, clear_after_read=False)

        xw_in = array().unstack(xw0)
        noise_in = array().unstack(noise) if has_noise else None
        # Saved per step for the backward loop (only the outputs when forward-only).
        saved_names = ["output"]
        if differentiable:
            saved_names += ["alpha", "context_hidden", "tanh_pre"]
            for layer in range(num_layers):
                saved_names += [f"input{layer}", f"gates{layer}", f"cell_prev{layer}",
                                f"tanh_cell{layer}"]

        def forward_body(t, h, c, fed, arrays):
            arrays = dict(zip(saved_names, arrays))
            noise_t = noise_in.read(t) if has_noise else None
            new_h, new_c = [], []
            below = None
            for layer in range(num_layers):
                if layer == 0:
                    inputs = tf.concat([fed, h[0]], -1) if input_feeding else h[0]
                    z = xw_in.read(t) + tf.matmul(inputs, kernels[0])
                else:
                    x = below * noise_t[layer - 1] if has_noise else below
                    inputs = tf.concat([x, h[layer]], -1)
                    z = tf.matmul(inputs, kernels[layer]) + biases[layer - 1]
                gates, c_t, tanh_c, h_t = _cell(z, c[layer])
                _save(arrays, f"input{layer}", t, inputs)
                _save(arrays, f"gates{layer}", t, gates)
                _save(arrays, f"cell_prev{layer}", t, c[layer])
                _save(arrays, f"tanh_cell{layer}", t, tanh_c)
                new_h.append(h_t)
                new_c.append(c_t)
                below = h_t
            scores = tf.cast(matvec(keys, below), score_dtype) + mask_bias
            alpha = tf.nn.softmax(scores, axis=-1)
            context = matvec(memory, tf.cast(alpha, dtype), transpose_a=True)
            context_hidden = tf.concat([context, below], -1)
            tanh_pre = tf.tanh(tf.matmul(context_hidden, output_kernel))
            output = tanh_pre * noise_t[num_layers - 1] if has_noise else tanh_pre
            _save(arrays, "output", t, output)
            _save(arrays, "alpha", t, alpha)
            _save(arrays, "context_hidden", t, context_hidden)
            _save(arrays, "tanh_pre", t, tanh_pre)
            return (t + 1, tuple(new_h), tuple(new_c), output,
                    tuple(arrays[name] for name in saved_names))

        initial_arrays = tuple(array(score_dtype if name == "alpha" else dtype)
                               for name in saved_names)
        _, _, _, _, arrays = tf.while_loop(
            lambda t, *_: t < steps,
            forward_body,
            (tf.constant(0), tuple(tf.unstack(hidden, num_layers)),
             tuple(tf.unstack(cell, num_layers)), attentional, initial_arrays),
            maximum_iterations=steps,
        )
        arrays = dict(zip(saved_names, arrays))
        outputs = arrays["output"].stack()
        if not differentiable:
            return outputs

        def grad(upstream):
            upstream_in = array().unstack(tf.convert_to_tensor(upstream, dtype))
            # Transposed once per call: oneDNN's matmul with `transpose_b` ran the
            # per-step (64, 1024) × (512, 1024)ᵀ product at a third of the speed of a
            # plain one (1.01 against 0.36 ms), the largest cost of the backward loop.
            kernels_t = [tf.transpose(kernel) for kernel in kernels]
            output_kernel_t = tf.transpose(output_kernel)
            grad_names = ["d_pre", "d_scores", "d_context"] + [
                f"d_z{layer}" for layer in range(num_layers)]

            def backward_body(t, d_fed, d_h, d_c, grads):
                grads = dict(zip(grad_names, grads))
                noise_t = noise_in.read(t) if has_noise else None
                d_output = upstream_in.read(t) + d_fed
                d_tanh = d_output * noise_t[num_layers - 1] if has_noise else d_output
                tanh_pre = arrays["tanh_pre"].read(t)
                d_pre = d_tanh * (1.0 - tanh_pre * tanh_pre)
                d_context_hidden = tf.matmul(d_pre, output_kernel_t)
                d_context = d_context_hidden[:, :memory_dim]
                d_top = d_context_hidden[:, memory_dim:]
                alpha = arrays["alpha"].read(t)
                d_alpha = tf.cast(matvec(memory, d_context), score_dtype)
                d_scores = alpha * (d_alpha - tf.reduce_sum(alpha * d_alpha, -1, keepdims=True))
                d_scores = tf.cast(d_scores, dtype)
                d_top += matvec(keys, d_scores, transpose_a=True)
                grads["d_pre"] = grads["d_pre"].write(t, d_pre)
                grads["d_scores"] = grads["d_scores"].write(t, d_scores)
                grads["d_context"] = grads["d_context"].write(t, d_context)
                new_d_h, new_d_c = list(d_h), list(d_c)
                from_above = d_top
                new_d_fed = tf.zeros_like(d_fed)
                for layer in reversed(range(num_layers)):
                    d_z, new_d_c[layer] = _cell_gradient(
                        from_above + d_h[layer], d_c[layer], arrays[f"gates{layer}"].read(t),
                        arrays[f"cell_prev{layer}"].read(t), arrays[f"tanh_cell{layer}"].read(t))
                    grads[f"d_z{layer}"] = grads[f"d_z{layer}"].write(t, d_z)
                    d_inputs = tf.matmul(d_z, kernels_t[layer])
                    if layer == 0 and not input_feeding:
                        new_d_h[0] = d_inputs
                    else:
                        d_x, new_d_h[layer] = d_inputs[:, :units], d_inputs[:, units:]
                        if layer == 0:
                            new_d_fed = d_x
                        else:
                            from_above = d_x * noise_t[layer - 1] if has_noise else d_x
                return (t - 1, new_d_fed, tuple(new_d_h), tuple(new_d_c),
                        tuple(grads[name] for name in grad_names))

            zeros = tf.zeros_like(attentional)
            _, d_fed, d_h, d_c, grads = tf.while_loop(
                lambda t, *_: t >= 0,
                backward_body,
                (steps - 1, zeros, tuple(tf.zeros_like(h) for h in tf.unstack(hidden, num_layers)),
                 tuple(tf.zeros_like(c) for c in tf.unstack(cell, num_layers)),
                 tuple(array() for _ in grad_names)),
                maximum_iterations=steps,
            )
            grads = dict(zip(grad_names, grads))

            def flat2d(name, source):
                value = source[name].stack()
                return tf.reshape(value, (-1, tf.shape(value)[-1]))

            d_z = [grads[f"d_z{layer}"].stack() for layer in range(num_layers)]
            d_kernels = [
                tf.matmul(flat2d(f"input{layer}", arrays),
                          tf.reshape(d_z[layer], (-1, tf.shape(d_z[layer])[-1])),
                          transpose_a=True)
                for layer in range(num_layers)
            ]
            d_biases = [tf.reduce_sum(d_z[layer], axis=(0, 1)) for layer in range(1, num_layers)]
            d_output_kernel = tf.matmul(flat2d("context_hidden", arrays),
                                        flat2d("d_pre", grads), transpose_a=True)
            alpha = tf.cast(arrays["alpha"].stack(), dtype)  # (T, B, S)
            d_memory = tf.einsum("tbs,tbm->bsm", alpha, grads["d_context"].stack())
            top = arrays["context_hidden"].stack()[:, :, memory_dim:]  # (T, B, H)
            d_keys = tf.einsum("tbs,tbh->bsh", grads["d_scores"].stack(), top)
            result = [d_z[0], tf.stack(d_h), tf.stack(d_c), d_fed, d_memory, d_keys, None,
                      d_output_kernel, *d_kernels, *d_biases]
            if has_noise:
                result.append(None)
            return result

        return outputs, grad

    return tf.custom_gradient(run) if differentiable else run


def _save(arrays, name, t, value):
    """Writes step t's value into the TensorArray `arrays[name]`, if it is kept."""
    if name in arrays:
        arrays[name] = arrays[name].write(t, value)


def masked_lstm(xw, mask, recurrent_kernels, differentiable=True):
    """LSTM layers of one or more directions over a padded sequence, in one loop.

    The encoder's recurrence (Hochreiter & Schmidhuber 1997, with Keras' gate order
    i, f, c, o): per direction d, z = xw_d[t] + h·U_d, then as `attentional_lstm`.
    Padding steps leave the state as it was and output zeros, so the final states
    are those of each sentence's last token. Every direction runs in the same
    `tf.while_loop`, and the gradient is one hand-written backward loop; the
    gradients of the input projections are `dz` itself, so that `x·W + b` stays
    one large matmul outside, differentiated by autodiff.

    Args:
        xw: D tensors `(T, B, 4H)`, each direction's input projection `x_t·W + b` in
            its own time order (a backward direction's input reversed by
            `tf.reverse_sequence` beforehand).
        mask: `(T, B)`, 1 on tokens, 0 on padding, the tokens first in every
            direction's order (right padding, reversed per sentence).
        recurrent_kernels: D tensors `(H, 4H)`.
        differentiable: bool. False: the forward loop alone, as in
            `attentional_lstm`. Defaults to True.

    Returns:
        `(outputs, hidden, cell)`: D tensors `(T, B, H)` (zeros on padding), and the
        final states, D tensors `(B, H)` each.
    """
    directions = len(xw)
    if len(recurrent_kernels) != directions:
        raise ValueError(f"{directions} inputs need {directions} recurrent kernels, "
                         f"received {len(recurrent_kernels)}")
    outputs = _masked_lstm(directions, bool(differentiable))(*xw, mask, *recurrent_kernels)
    return (list(outputs[:directions]), list(outputs[directions:2 * directions]),
            list(outputs[2 * directions:]))


def _masked_lstm(directions, differentiable):

    def run(*flat):
        xw = list(flat[:directions])
        mask = flat[directions]
        kernels = list(flat[directions + 1:])
        dtype = xw[0].dtype
        steps = tf.shape(xw[0])[0]
        batch = tf.shape(xw[0])[1]
        units = kernels[0].shape[0] if kernels[0].shape[0] is not None else tf.shape(kernels[0])[0]

        def array():
            return tf.TensorArray(dtype, size=steps, clear_after_read=False)

        mask_in = array().unstack(tf.cast(mask, dtype)[:, :, None])
        xw_in = [array().unstack(x) for x in xw]
        names = (("output", "gates", "cell_prev", "tanh_cell", "hidden_prev")
                 if differentiable else ("output",))

        def forward_body(t, h, c, arrays):
            m = mask_in.read(t)
            new_h, new_c, new_arrays = [], [], []
            for d in range(directions):
                saved = dict(zip(names, arrays[d]))
                gates, c_t, tanh_c, h_t = _cell(xw_in[d].read(t) + tf.matmul(h[d], kernels[d]),
                                                c[d])
                output = m * h_t
                _save(saved, "output", t, output)
                _save(saved, "gates", t, gates)
                _save(saved, "cell_prev", t, c[d])
                _save(saved, "tanh_cell", t, tanh_c)
                _save(saved, "hidden_prev", t, h[d])
                new_h.append(output + (1.0 - m) * h[d])
                new_c.append(m * c_t + (1.0 - m) * c[d])
                new_arrays.append(tuple(saved[name] for name in names))
            return t + 1, tuple(new_h), tuple(new_c), tuple(new_arrays)

        zeros = tf.zeros(tf.stack([batch, units]), dtype)
        _, hidden, cell, arrays = tf.while_loop(
            lambda t, *_: t < steps,
            forward_body,
            (tf.constant(0), (zeros,) * directions, (zeros,) * directions,
             tuple(tuple(array() for _ in names) for _ in range(directions))),
            maximum_iterations=steps,
        )
        arrays = [dict(zip(names, a)) for a in arrays]
        outputs = [a["output"].stack() for a in arrays]
        if not differentiable:
            return (*outputs, *hidden, *cell)

        def grad(*upstream):
            # An output the loss does not use may get `None`.
            upstream = [tf.zeros_like(value) if u is None else tf.convert_to_tensor(u, dtype)
                        for u, value in zip(upstream, (*outputs, *hidden, *cell))]
            d_outputs = [array().unstack(u) for u in upstream[:directions]]
            d_hidden = upstream[directions:2 * directions]
            d_cell = upstream[2 * directions:]
            # Transposed once (see `_attentional_lstm`: `transpose_b` is slow in oneDNN).
            kernels_t = [tf.transpose(kernel) for kernel in kernels]

            def backward_body(t, d_h, d_c, d_zs):
                m = mask_in.read(t)
                new_d_h, new_d_c, new_d_zs = [], [], []
                for d in range(directions):
                    saved = arrays[d]
                    # On padding (m = 0) the state passes through unchanged.
                    d_z, d_c_prev = _cell_gradient(
                        m * (d_outputs[d].read(t) + d_h[d]), m * d_c[d], saved["gates"].read(t),
                        saved["cell_prev"].read(t), saved["tanh_cell"].read(t))
                    new_d_zs.append(d_zs[d].write(t, d_z))
                    new_d_h.append((1.0 - m) * d_h[d]
                                   + tf.matmul(d_z, kernels_t[d]))
                    new_d_c.append((1.0 - m) * d_c[d] + d_c_prev)
                return t - 1, tuple(new_d_h), tuple(new_d_c), tuple(new_d_zs)

            _, _, _, d_zs = tf.while_loop(
                lambda t, *_: t >= 0,
                backward_body,
                (steps - 1, tuple(d_hidden), tuple(d_cell),
                 tuple(array() for _ in range(directions))),
                maximum_iterations=steps,
            )
            d_xw = [d_z.stack() for d_z in d_zs]
            d_kernels = []
            for d in range(directions):
                previous = tf.reshape(arrays[d]["hidden_prev"].stack(), (-1, units))
                d_kernels.append(tf.matmul(previous, tf.reshape(d_xw[d], (-1, 4 * units)),
                                           transpose_a=True))
            return [*d_xw, None, *d_kernels]

        return (*outputs, *hidden, *cell), grad

    return tf.custom_gradient(run) if differentiable else run


def sequence_lstm(inputs, hidden, cell, kernel, recurrent_kernel, bias):
    """One LSTM layer over a whole sequence from given initial states, with cuDNN's
    kernel where it can run.

    The cell math of `keras.layers.LSTMCell` (tanh, sigmoid, gate order i, f, c, o),
    no mask: the sequence runs to its end, so a decoder's outputs at its padding are
    computed (and ignored by the loss) rather than skipped. Where a GPU is visible,
    Keras' TensorFlow backend runs it as one cuDNN call on these weights (what
    `keras.layers.LSTM` does); where it cannot (no GPU, no cuDNN), as a
    `tf.scan` of the cell that autodiff differentiates.

    Args:
        inputs: `(B, T, D)`.
        hidden, cell: `(B, H)`, the initial states.
        kernel: `(D, 4H)`; recurrent_kernel: `(H, 4H)`; bias: `(4H,)`.

    Returns:
        `(B, T, H)`, the hidden state of every step.
    """
    if tf.config.list_logical_devices("GPU"):
        # Keras' own cuDNN path (keras.layers.LSTM's), a Keras internal: compat.
        from tf_outheads.compat import cudnn_lstm

        outputs = cudnn_lstm(inputs, hidden, cell, kernel, recurrent_kernel, bias)
        if outputs is not None:
            return outputs
    xw = tf.transpose(tf.matmul(inputs, kernel) + bias, (1, 0, 2))  # (T, B, 4H)

    def step(carry, xw_t):
        h, c = carry
        _, c, _, h = _cell(xw_t + tf.matmul(h, recurrent_kernel), c)
        return h, c

    outputs, _ = tf.scan(step, xw, initializer=(hidden, cell))
    return tf.transpose(outputs, (1, 0, 2))


__all__ = ["attentional_lstm", "masked_lstm", "sequence_lstm"]
