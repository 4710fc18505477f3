"""`tf_outheads.ops.attentional_lstm`, `masked_lstm` and `sequence_lstm`: the fused
teacher-forced decoder and encoder recurrences and their hand-written gradients, against autodiff of the
per-step decoder loop (`AttentionalLSTMDecoder` with `fused = False`) and of Keras' LSTM
layers (`LSTMEncoder` with `fused = False`) on the same weights and dropout masks, and
against finite differences."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import lstm_layer_case
from tf_outheads.ops.recurrent import attentional_lstm, masked_lstm, sequence_lstm
from tf_outheads_zoo.lstm import LSTMSeq2Seq

B, S, T = 4, 7, 6


def make(num_layers=1, input_feeding=True, attention_score="general", dropout=0.0, **kwargs):
    keras.utils.set_random_seed(3)
    model = LSTMSeq2Seq(50, 60, embedding_dim=12, hidden_dim=16, num_layers=num_layers,
                        bidirectional_encoder=True, dropout=dropout, input_feeding=input_feeding,
                        attention_score=attention_score, head="softmax", **kwargs)
    rng = np.random.default_rng(0)
    source = rng.integers(4, 50, size=(B, S)).astype("int32")
    source[1, 4:] = 0  # padding: masked in the attention
    source[2, 2:] = 0
    target_in = rng.integers(4, 60, size=(B, T)).astype("int32")
    model({"source_ids": source, "target_in": target_in})
    # A weight on each output, so that every step's h̃ gets its own upstream gradient.
    weights = tf.constant(rng.normal(size=(B, T, 16)).astype("float32"))
    return model, source, target_in, weights


def outputs_and_gradients(model, source, target_in, weights, fused, jit_compile=False):
    """h̃ and the gradient of Σ w·h̃ for every variable; the random state (dropout
    masks) is restored first, so both paths draw the same masks."""
    model.decoder.fused = fused

    @tf.function(jit_compile=jit_compile)
    def run():
        with tf.GradientTape() as tape:
            h = model.teacher_forced(source, target_in, training=True)
            loss = tf.reduce_sum(tf.cast(h, "float32") * weights)
        return h, tape.gradient(loss, model.trainable_variables)

    state = [v.numpy() for v in model.non_trainable_variables]  # seed generators
    h, grads = run()
    for variable, value in zip(model.non_trainable_variables, state):
        variable.assign(value)
    dense = [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads]
    return np.asarray(h, "float32"), dense


def assert_same(model, reference, fused, rtol=1e-5):
    np.testing.assert_allclose(fused[0], reference[0], atol=rtol / 10)
    for variable, expected, actual in zip(model.trainable_variables, reference[1], fused[1]):
        assert (expected is None) == (actual is None), variable.path
        if expected is None:
            continue
        scale = max(np.abs(expected).max(), 1e-12)
        assert np.abs(actual - expected).max() / scale < rtol, variable.path


@pytest.mark.parametrize(
    "num_layers,input_feeding,attention_score,dropout",
    [(1, True, "general", 0.0), pytest.param(1, True, "dot", 0.3, marks=pytest.mark.slow),
     (1, False, "general", 0.3), pytest.param(2, True, "general", 0.3, marks=pytest.mark.slow),
     pytest.param(3, False, "dot", 0.0, marks=pytest.mark.slow)],  # slow: issue 37
)
def test_fused_decoder_matches_autodiff_of_the_step(num_layers, input_feeding, attention_score,
                                                    dropout):
    model, source, target_in, weights = make(num_layers, input_feeding, attention_score, dropout)
    reference = outputs_and_gradients(model, source, target_in, weights, fused=False)
    fused = outputs_and_gradients(model, source, target_in, weights, fused=True)
    assert sum(g is not None for g in fused[1]) >= 8
    assert_same(model, reference, fused)


@pytest.mark.parametrize("num_layers,attention_score,dropout",
                         [(1, "general", 0.3),
                          pytest.param(2, "dot", 0.0, marks=pytest.mark.slow),
                          pytest.param(3, "general", 0.3, marks=pytest.mark.slow)])
def test_whole_sequence_decoder_without_input_feeding_matches_the_step(num_layers,
                                                                       attention_score,
                                                                       dropout):
    """The cuDNN path (`cudnn`, on where a GPU is visible) runs here through
    `sequence_lstm`'s loop: the same h̃ and gradients as autodiff of the step loop,
    with the same dropout masks."""
    model, source, target_in, weights = make(num_layers, False, attention_score, dropout)
    assert model.decoder.cudnn == bool(tf.config.list_logical_devices("GPU"))
    model.decoder.cudnn = False
    reference = outputs_and_gradients(model, source, target_in, weights, fused=False)
    model.decoder.cudnn = True
    whole = outputs_and_gradients(model, source, target_in, weights, fused=True)
    assert sum(g is not None for g in whole[1]) >= 8
    assert_same(model, reference, whole)
    # Input feeding needs the step: the flag changes nothing there.
    model, source, target_in, weights = make(num_layers, True, attention_score, dropout)
    model.decoder.cudnn = True
    calls = []
    model.decoder._sequence_call = lambda *args: calls.append(args)
    model.teacher_forced(source, target_in)
    assert not calls


def test_sequence_lstm_is_keras_lstm_layer():
    layer, inputs, hidden, cell = lstm_layer_case(seed=4, steps=5, input_dim=6, units=7,
                                                  scale=0.5)
    expected = layer(inputs, initial_state=[hidden, cell])
    weights = layer.cell
    actual = sequence_lstm(inputs, hidden, cell, weights.kernel, weights.recurrent_kernel,
                           weights.bias)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_fused_decoder_under_xla_matches_the_graph():
    model, source, target_in, weights = make(2, dropout=0.0)
    graph = outputs_and_gradients(model, source, target_in, weights, fused=True)
    xla = outputs_and_gradients(model, source, target_in, weights, fused=True, jit_compile=True)
    # XLA sums in other orders: the attention kernel's gradient, ~1e-6, moves by ~1e-11.
    assert_same(model, graph, xla, rtol=1e-4)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_fused_decoder_in_bfloat16():
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    try:
        model, source, target_in, weights = make(2, dropout=0.3)
        reference = outputs_and_gradients(model, source, target_in, weights, fused=False)
        fused = outputs_and_gradients(model, source, target_in, weights, fused=True)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    # Both round every op to bfloat16 (8 bits of mantissa), in other orders.
    assert_same(model, reference, fused, rtol=3e-2)


def random_inputs(num_layers, input_feeding, seed=0, units=5, memory_dim=6):
    rng = np.random.default_rng(seed)

    def normal(*shape, scale=0.5):
        return tf.constant(scale * rng.normal(size=shape).astype("float32"))

    mask = np.ones((B, S), "float32")
    mask[0, 3:] = 0
    kernels = [normal(2 * units if input_feeding else units, 4 * units)]
    kernels += [normal(2 * units, 4 * units) for _ in range(num_layers - 1)]
    return dict(
        xw0=normal(T, B, 4 * units), hidden=normal(num_layers, B, units),
        cell=normal(num_layers, B, units), attentional=normal(B, units),
        memory=normal(B, S, memory_dim), keys=normal(B, S, units),
        mask_bias=tf.constant((1.0 - mask) * -1e9),
        kernels=kernels, biases=[normal(4 * units) for _ in range(num_layers - 1)],
        output_kernel=normal(memory_dim + units, units),
        noise=tf.constant((rng.random((T, num_layers, B, units)) > 0.3).astype("float32") / 0.7),
        input_feeding=input_feeding)


# All four cases (~15-20 s each) in the slow set (issue 37); the masked LSTM's finite
# differences below stay in the fast suite.
@pytest.mark.slow
@pytest.mark.parametrize("num_layers,input_feeding", list(itertools.product((1, 2), (True, False))))
def test_gradient_of_every_input_matches_finite_differences(num_layers, input_feeding):
    """Every differentiable input, initial states and memory included, in float64
    against central differences (tf.test.compute_gradient)."""
    inputs = random_inputs(num_layers, input_feeding)
    names = ["xw0", "hidden", "cell", "attentional", "memory", "keys", "output_kernel"]
    tensors = [tf.cast(inputs[name], "float64") for name in names]
    tensors += [tf.cast(k, "float64") for k in inputs["kernels"]]
    tensors += [tf.cast(b, "float64") for b in inputs["biases"]]
    noise = tf.cast(inputs["noise"], "float64")
    mask_bias = tf.cast(inputs["mask_bias"], "float32")
    count = len(inputs["kernels"])

    @tf.function  # one graph, called twice per input element
    def f(*args):
        xw0, hidden, cell, attentional, memory, keys, output_kernel = args[:7]
        kernels, biases = list(args[7:7 + count]), list(args[7 + count:])
        out = attentional_lstm(xw0, hidden, cell, attentional, memory, keys, mask_bias,
                               kernels, biases, output_kernel, noise=noise,
                               input_feeding=input_feeding)
        return tf.reduce_sum(tf.sin(out))  # every step, every unit its own weight

    theoretical, numerical = tf.test.compute_gradient(f, tensors, delta=1e-6)
    for name, a, n in zip(names + ["kernel"] * count + ["bias"] * (count - 1),
                          theoretical, numerical):
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-7, err_msg=name)


def test_fed_state_is_the_dropped_output():
    """With input feeding, step t + 1 reads the dropped h̃_t: zeroing a unit of h̃_0's
    mask changes step 1 (and only through the fed input when the LSTM input is fixed)."""
    inputs = random_inputs(1, True, seed=1)
    out = attentional_lstm(**inputs)
    noise = inputs["noise"].numpy()
    noise[0, -1, :, :] = 0.0  # drop all of h̃_0
    changed = attentional_lstm(**dict(inputs, noise=tf.constant(noise)))
    np.testing.assert_allclose(changed[0], 0.0)
    assert not np.allclose(changed[1], out[1])
    # Without input feeding the next step does not see h̃_0 at all.
    plain = random_inputs(1, False, seed=1)
    out = attentional_lstm(**plain)
    noise = plain["noise"].numpy()
    noise[0, -1, :, :] = 0.0
    changed = attentional_lstm(**dict(plain, noise=tf.constant(noise)))
    np.testing.assert_allclose(changed[0], 0.0)
    np.testing.assert_allclose(changed[1:], out[1:])


@pytest.mark.parametrize("num_layers,input_feeding", [(1, True), (2, False)])
def test_forward_only_loop_gives_the_same_outputs(num_layers, input_feeding):
    inputs = random_inputs(num_layers, input_feeding, seed=2)
    np.testing.assert_allclose(attentional_lstm(**inputs, differentiable=False),
                               attentional_lstm(**inputs), atol=1e-7)
    xw, mask, kernels = masked_inputs(2)
    for forward_only, full in zip(masked_lstm(xw, mask, kernels, differentiable=False),
                                  masked_lstm(xw, mask, kernels)):
        for a, b in zip(forward_only, full):
            np.testing.assert_allclose(a, b, atol=1e-7)


def test_forward_only_loops_can_be_saved_in_a_saved_model(tmp_path):
    """tf.saved_model.save cannot serialise the custom gradients (they capture their
    forward's TensorArrays); the zoo model runs the forward-only loops out of training."""
    model, source, target_in, _ = make(2)
    module = tf.Module()
    module.model = model
    module.run = tf.function(
        lambda s, t: model.teacher_forced(s, t, training=False),
        input_signature=[tf.TensorSpec((None, None), tf.int32)] * 2)
    expected = module.run(source, target_in)
    tf.saved_model.save(module, str(tmp_path / "saved"))
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_allclose(restored.run(source, target_in), expected, atol=1e-6)


def test_bias_count_is_checked():
    inputs = random_inputs(2, True)
    with pytest.raises(ValueError, match="2 kernels need 1 biases"):
        attentional_lstm(**dict(inputs, biases=[]))


# -- the encoder's masked_lstm ------------------------------------------------------------
def encoder_outputs_and_gradients(model, source, fused):
    """The encoder's outputs and final states, and the gradient of a weighted sum of
    them (outputs on tokens only: padding outputs differ by design), every variable."""
    model.encoder.fused = fused
    mask = source != 0

    @tf.function
    def run():
        with tf.GradientTape() as tape:
            state = model.encode(source, training=True)
            memory = state["memory"] * tf.cast(mask, "float32")[:, :, None]
            loss = (tf.reduce_sum(tf.sin(memory)) + tf.reduce_sum(tf.sin(2.0 * state["hidden"]))
                    + tf.reduce_sum(tf.cos(state["cell"])))
        return memory, state["hidden"], state["cell"], tape.gradient(
            loss, model.trainable_variables)

    state = [v.numpy() for v in model.non_trainable_variables]
    *values, grads = run()
    for variable, value in zip(model.non_trainable_variables, state):
        variable.assign(value)
    return [np.asarray(v) for v in values], [
        None if g is None else tf.convert_to_tensor(g).numpy() for g in grads]


@pytest.mark.parametrize("bidirectional,num_layers,dropout",
                         [(True, 1, 0.0), (True, 2, 0.3), (False, 2, 0.0)])
def test_fused_encoder_matches_the_keras_layers(bidirectional, num_layers, dropout):
    keras.utils.set_random_seed(4)
    model = LSTMSeq2Seq(50, 60, embedding_dim=12, hidden_dim=16, num_layers=num_layers,
                        bidirectional_encoder=bidirectional, dropout=dropout, head="softmax")
    rng = np.random.default_rng(1)
    source = rng.integers(4, 50, size=(B, S)).astype("int32")
    source[0, 3:] = 0  # three lengths, one full
    source[2, 5:] = 0
    model({"source_ids": source, "target_in": source[:, :T]})
    keras_values, keras_grads = encoder_outputs_and_gradients(model, source, fused=False)
    fused_values, fused_grads = encoder_outputs_and_gradients(model, source, fused=True)
    for expected, actual in zip(keras_values, fused_values):
        np.testing.assert_allclose(actual, expected, atol=1e-6)
    checked = 0
    for variable, expected, actual in zip(model.trainable_variables, keras_grads, fused_grads):
        assert (expected is None) == (actual is None), variable.path
        if expected is None or "encoder" not in variable.path and "source" not in variable.path:
            continue
        checked += 1
        scale = max(np.abs(expected).max(), 1e-12)
        assert np.abs(actual - expected).max() / scale < 1e-5, variable.path
    assert checked == 1 + 3 * num_layers * (2 if bidirectional else 1)


def masked_inputs(directions, units=4):
    rng = np.random.default_rng(directions)
    lengths = np.array([T, 2, 4, 1])
    mask = tf.constant((np.arange(T)[:, None] < lengths[None, :]).astype("float64"))
    xw = [tf.constant(rng.normal(size=(T, B, 4 * units))) for _ in range(directions)]
    kernels = [tf.constant(0.5 * rng.normal(size=(units, 4 * units))) for _ in range(directions)]
    return xw, mask, kernels


@pytest.mark.parametrize("directions", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_masked_lstm_gradient_matches_finite_differences(directions):
    xw, mask, kernels = masked_inputs(directions)

    @tf.function
    def f(*args):
        outputs, hidden, cell = masked_lstm(list(args[:directions]), mask,
                                            list(args[directions:]))
        return (sum(tf.reduce_sum(tf.sin(o)) for o in outputs)
                + sum(tf.reduce_sum(tf.sin(2.0 * h)) for h in hidden)
                + sum(tf.reduce_sum(tf.cos(c)) for c in cell))

    theoretical, numerical = tf.test.compute_gradient(f, xw + kernels, delta=1e-6)
    for a, n in zip(theoretical, numerical):
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-7)


def test_masked_lstm_freezes_the_state_on_padding():
    """A sentence's final state is its last token's, whatever padding follows; its
    padding outputs are zeros."""
    rng = np.random.default_rng(0)
    xw = tf.constant(rng.normal(size=(T, B, 8)).astype("float32"))
    kernel = tf.constant(rng.normal(size=(2, 8)).astype("float32"))
    lengths = np.array([T, 3, 1, 5])
    mask = tf.constant(np.arange(T)[:, None] < lengths[None, :])
    (outputs,), (hidden,), (cell,) = masked_lstm([xw], mask, [kernel])
    for row, length in enumerate(lengths):
        (alone,), (h,), (c,) = masked_lstm([xw[:length, row:row + 1]],
                                           tf.ones((length, 1), bool), [kernel])
        np.testing.assert_allclose(hidden[row], h[0], atol=1e-6)
        np.testing.assert_allclose(cell[row], c[0], atol=1e-6)
        np.testing.assert_allclose(outputs[:length, row], alone[:, 0], atol=1e-6)
        np.testing.assert_allclose(outputs[length:, row], 0.0)
