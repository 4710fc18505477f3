"""ReWE in a model: `LSTMSeq2Seq(rewe=...)` trained with Keras' multi-output compile.

Covers the issue's "done when": the decoder outputs in training / evaluation
steps (the losses run both heads on them) and only the logits elsewhere, the separate NLL and ReWE losses in the History and
TensorBoard, λ = 0 bit-identical to the plain model, no ReWE weight in the
inference graph, `.keras` round trip, padding, `jit_compile`, mixed precision,
the contrastive set-ups of supplementary C and the zoo presets through the CLI.
"""

import glob
import json
import os
import random
import subprocess
import sys
import textwrap
from xml.etree import ElementTree

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tf_outheads import MaskedSequenceCrossEntropy, ReWELoss, compile_for_translation, rewe_loss
from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import greedy_search
from tf_outheads.losses.objective import Objective
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.metrics import parameter_report
from tf_outheads_zoo.lstm import LSTMSeq2Seq

SOURCE_VOCAB = 23
TARGET_VOCAB = 19
EMBEDDING_DIM = 8
HIDDEN_DIM = 10
UNITS = 6  # the ReWE network's ReLU layer (the paper: 200)
LENGTHS = [3, 5, 2]  # target tokens per sentence (EOS included)
REWE = {"hidden_dim": UNITS}


def make_batch(seed=0):
    """Inputs dict and target_out, padded with PAD_ID after each sentence."""
    rng = np.random.default_rng(seed)
    source = rng.integers(4, SOURCE_VOCAB, (3, 6)).astype("int32")
    source[2, 4:] = PAD_ID
    words = rng.integers(4, TARGET_VOCAB, (3, max(LENGTHS))).astype("int32")
    target_out = np.full((3, max(LENGTHS)), PAD_ID, "int32")
    target_in = np.full((3, max(LENGTHS)), PAD_ID, "int32")
    for row, length in enumerate(LENGTHS):
        target_out[row, :length - 1] = words[row, :length - 1]
        target_out[row, length - 1] = EOS_ID
        target_in[row, :length] = np.concatenate([[BOS_ID], target_out[row, :length - 1]])
    return {"source_ids": source, "target_in": target_in}, target_out


def make_model(rewe=REWE, seed=0, **kwargs):
    """A tiny model; Keras' unseeded initializers and dropout seeds come from Python's
    `random`, seeded here and restored (not `keras.utils.set_random_seed`, which frees
    the SentencePiece resources of session-scoped tokenizers)."""
    config = dict(embedding_dim=EMBEDDING_DIM, hidden_dim=HIDDEN_DIM, num_layers=1, dropout=0.2)
    config.update(kwargs)
    state = random.getstate()
    random.seed(seed)
    try:
        return LSTMSeq2Seq(SOURCE_VOCAB, TARGET_VOCAB, rewe=rewe, **config)
    finally:
        random.setstate(state)


def compile_rewe(model, weight=20.0, distance="cosine", **kwargs):
    model.compile(optimizer=keras.optimizers.Adam(1e-2),
                  loss={"logits": MaskedSequenceCrossEntropy(), "rewe": ReWELoss(distance)},
                  loss_weights={"logits": 1.0, "rewe": weight}, **kwargs)
    return model


def rewe_term(model, y, outputs, loss=None):
    """`(sum, tokens)` of the ReWE term of a step, as the model's objective computes it."""
    heads = {"logits": model.head, **model.auxiliary_heads()}
    return Objective({"rewe": loss or ReWELoss()}, None, heads)(y, outputs)


def step_outputs(model, x):
    """The `StepOutputs` of a training step on `x` (the losses' view)."""
    with model.training_outputs():
        return model.step_outputs(model(x, training=True))


def rewe_variable_ids(model):
    return {id(w.value) for w in model.rewe.weights}


@pytest.fixture
def mixed_precision():
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    yield
    keras.mixed_precision.set_global_policy(previous)


# -- what the model returns ------------------------------------------------------------------

def test_steps_give_the_losses_the_decoder_outputs_logits_elsewhere():
    x, y = make_batch()
    model = make_model()
    logits_shape = (3, max(LENGTHS), TARGET_VOCAB)
    assert tuple(model(x).shape) == logits_shape
    assert tuple(model(x, training=True).shape) == logits_shape  # a training-mode call
    with model.training_outputs():
        outputs = model(x, training=True)
    assert set(outputs) == {"hidden"}
    assert tuple(outputs["hidden"].shape) == (3, max(LENGTHS), HIDDEN_DIM)
    assert tuple(model.rewe(outputs["hidden"]).shape) == (3, max(LENGTHS), EMBEDDING_DIM)
    assert model.auxiliary_heads() == {"rewe": model.rewe}

    compile_rewe(model)
    assert tuple(model(x).shape) == logits_shape
    assert model.predict(x, verbose=0).shape == logits_shape
    logs = model.evaluate(x, y, verbose=0, return_dict=True)  # the evaluation step: both
    assert {"logits_loss", "rewe_loss"} <= set(logs)

    model.compile(optimizer="adam", loss=MaskedSequenceCrossEntropy())  # the head's loss only
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    assert set(logs) == {"loss"}
    np.testing.assert_allclose(logs["loss"], float(MaskedSequenceCrossEntropy()(y, model(x))),
                               rtol=1e-5)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_history_logs_nll_and_rewe_separately_and_their_weighted_sum():
    x, y = make_batch()
    model = compile_rewe(make_model(dropout=0.0), weight=20.0)
    history = model.fit(x, y, validation_data=(x, y), batch_size=3, epochs=2, verbose=0)
    assert {"loss", "logits_loss", "rewe_loss", "val_loss", "val_logits_loss",
            "val_rewe_loss"} <= set(history.history)

    logs = model.evaluate(x, y, batch_size=3, verbose=0, return_dict=True)
    # Independently: the NLL of the logits, the cosine loss of the ReWE output.
    nll = float(MaskedSequenceCrossEntropy()(y, model(x)))
    hidden = model.decoder(x["target_in"], model.encode(x["source_ids"]))
    regression = float(rewe_loss(y, model.rewe(hidden), model.target_embedding.embeddings))
    np.testing.assert_allclose(logs["logits_loss"], nll, rtol=1e-5)
    np.testing.assert_allclose(logs["rewe_loss"], regression, rtol=1e-5)
    np.testing.assert_allclose(logs["loss"], nll + 20.0 * regression, rtol=1e-5)
    assert logs["rewe_loss"] != pytest.approx(logs["logits_loss"], rel=1e-2)


@pytest.mark.slow  # a training with TensorBoard logs (issue 37: CI runs it)
def test_tensorboard_has_separate_nll_and_rewe_curves(tmp_path):
    x, y = make_batch()
    model = compile_rewe(make_model())
    history = model.fit(x, y, validation_data=(x, y), batch_size=3, epochs=2, verbose=0,
                        callbacks=[keras.callbacks.TensorBoard(str(tmp_path), update_freq=1)])
    for split, prefix in (("train", "loss"), ("validation", "val_loss")):
        values = {}
        for path in glob.glob(str(tmp_path / split / "events*")):
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    values.setdefault(value.tag, []).append(float(tf.make_ndarray(value.tensor)))
        for name in ("logits_loss", "rewe_loss"):
            logged = history.history[prefix.replace("loss", name)]
            np.testing.assert_allclose(values[f"epoch_{name}"], logged, rtol=1e-6)
        if split == "train":
            assert {"batch_logits_loss", "batch_rewe_loss"} <= set(values)


# -- λ = 0 is the plain model ---------------------------------------------------------------

@pytest.mark.slow  # two trainings
def test_lambda_zero_trains_bit_identically_to_the_plain_model():
    batches = [make_batch(seed) for seed in (0, 1, 2)]
    plain = compile_for_translation(make_model(rewe=None), learning_rate=1e-2)
    with_rewe = compile_for_translation(make_model(), learning_rate=1e-2,
                                        auxiliary_weights={"rewe": 0.0})
    weighted = compile_for_translation(make_model(), learning_rate=1e-2,
                                       auxiliary_weights={"rewe": 1.0})
    shared = {w.path: w for w in plain.weights}
    for model in (with_rewe, weighted):
        for weight in model.weights:
            if weight.path in shared:  # same initial values: ReWE is built last
                np.testing.assert_array_equal(weight.numpy(), shared[weight.path].numpy())
    plain_losses, rewe_losses = [], []
    for x, y in batches:  # dropout 0.2: the same seeds draw the same masks
        plain_losses.append(plain.train_on_batch(x, y, return_dict=True)["loss"])
        rewe_losses.append(with_rewe.train_on_batch(x, y, return_dict=True)["loss"])
        weighted.train_on_batch(x, y)
    assert plain_losses == rewe_losses
    compared = 0
    for weight in with_rewe.weights:
        if weight.path in shared:
            np.testing.assert_array_equal(weight.numpy(), shared[weight.path].numpy(),
                                          err_msg=weight.path)
            compared += 1
    assert compared == len(plain.weights)
    # λ > 0 does change the shared weights (the comparison can fail).
    assert any(not np.array_equal(w.numpy(), shared[w.path].numpy())
               for w in weighted.weights if w.path in shared)


# -- inference -------------------------------------------------------------------------------

def test_inference_graphs_hold_no_rewe_variables_and_decode_as_the_plain_model():
    x, _ = make_batch()
    model = compile_rewe(make_model())
    plain = make_model(rewe=None)  # same seed: the same weights outside the ReWE head
    specs = {"source_ids": tf.TensorSpec([None, None], tf.int32),
             "target_in": tf.TensorSpec([None, None], tf.int32)}

    def decode(m, source_ids):
        return greedy_search(m.make_step_fn(), m.initial_decoding_state(source_ids),
                             tf.shape(source_ids)[0], 7)

    graphs = {
        "decode": tf.function(lambda s: decode(model, s).ids).get_concrete_function(
            specs["source_ids"]),
        "call": tf.function(lambda inputs: model(inputs)).get_concrete_function(specs),
        "predict": tf.function(lambda inputs: model.predict_step((inputs,))).get_concrete_function(
            specs),
    }
    rewe_ids = rewe_variable_ids(model)
    assert len(rewe_ids) == 4
    for name, graph in graphs.items():
        captured = {id(v) for v in graph.variables}
        assert captured and not captured & rewe_ids, name

    def training_loss(inputs, y):
        with model.training_outputs():
            return model.compute_loss(inputs, y, model(inputs, training=True))

    training = tf.function(training_loss).get_concrete_function(
        specs, tf.TensorSpec([None, None], tf.int32))
    assert rewe_ids <= {id(v) for v in training.variables}  # the check can fail

    mine, theirs = decode(model, x["source_ids"]), decode(plain, x["source_ids"])
    np.testing.assert_array_equal(mine.ids, theirs.ids)
    np.testing.assert_array_equal(mine.scores, theirs.scores)


@pytest.mark.parametrize("targets", ["input_embedding", "pretrained"])
def test_parameter_report_puts_rewe_in_its_own_group(targets):
    rewe = dict(REWE, targets=targets, embedding_dim=12 if targets == "pretrained" else None)
    rewe = {k: v for k, v in rewe.items() if v is not None}
    report = parameter_report(make_model(rewe=rewe))
    plain = parameter_report(make_model(rewe=None))
    m = 12 if targets == "pretrained" else EMBEDDING_DIM
    trainable = HIDDEN_DIM * UNITS + UNITS + UNITS * m + m  # W1, b1, W2, b2
    assert report.trainable_groups["rewe"] == trainable
    assert report.groups["rewe"] == trainable + (TARGET_VOCAB * m if targets == "pretrained" else 0)
    # Everything the inference model has is counted as in the plain model.
    assert {k: v for k, v in report.groups.items() if k != "rewe"} == plain.groups
    assert report.total == plain.total + report.groups["rewe"]


# -- padding ---------------------------------------------------------------------------------

def test_padding_positions_get_exactly_zero_gradient_from_the_rewe_loss():
    x, y = make_batch()
    model = make_model()
    hidden = model.decoder(x["target_in"], model.encode(x["source_ids"]))
    with tf.GradientTape() as tape:
        tape.watch(hidden)
        value, _ = rewe_term(model, y, model.step_outputs({"hidden": hidden}))
    gradient = tape.gradient(value, hidden).numpy()
    padding = y == PAD_ID
    assert padding.sum() == 5
    assert np.all(gradient[padding] == 0.0)
    assert np.all(np.abs(gradient[~padding]).sum(-1) > 0.0)


def test_padded_decoder_inputs_change_neither_the_rewe_loss_nor_its_gradients():
    x, y = make_batch()
    noisy = dict(x, target_in=np.where(x["target_in"] == PAD_ID, 7, x["target_in"]).astype("int32"))
    model = compile_rewe(make_model(dropout=0.0))
    results = []
    for inputs in (x, noisy):
        with tf.GradientTape() as tape:
            total, tokens = rewe_term(model, y, step_outputs(model, inputs), model.loss["rewe"])
            value = total / tokens
        gradients = tape.gradient(value, model.rewe.trainable_weights)
        results.append([float(value)] + [g.numpy() for g in gradients])
    assert not np.array_equal(model(x), model(noisy))  # the padded steps did change
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_equal(got, want)


# -- saving ----------------------------------------------------------------------------------

@pytest.mark.parametrize("targets", [pytest.param("input_embedding", marks=pytest.mark.slow),
                                     pytest.param("pretrained", marks=pytest.mark.slow)])
def test_keras_save_load_round_trip(targets, tmp_path):
    x, y = make_batch()
    rewe = dict(REWE, targets=targets)
    model = compile_rewe(make_model(rewe=rewe, dropout=0.0))
    if targets == "pretrained":
        vectors = np.random.default_rng(4).normal(size=(TARGET_VOCAB, EMBEDDING_DIM))
        model.rewe.set_target_vectors(vectors)
    model.fit(x, y, batch_size=3, epochs=1, verbose=0)
    expected = model.evaluate(x, y, verbose=0, return_dict=True)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is LSTMSeq2Seq and loaded.rewe.targets == targets
    assert loaded.get_config() == model.get_config()
    if targets == "input_embedding":
        assert loaded.rewe.embedding is loaded.target_embedding
    for mine, theirs in zip(model.rewe.weights, loaded.rewe.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    np.testing.assert_allclose(loaded(x), model(x), rtol=1e-6, atol=1e-6)
    # The compiled losses come back too (ReWELoss is registered, λ in loss_weights).
    logs = loaded.evaluate(x, y, verbose=0, return_dict=True)
    for name in ("loss", "logits_loss", "rewe_loss"):
        np.testing.assert_allclose(logs[name], expected[name], rtol=1e-5)
    revived = LSTMSeq2Seq.from_config(model.get_config())
    assert revived.get_config() == model.get_config()


# -- XLA and mixed precision -----------------------------------------------------------------

@pytest.mark.slow  # XLA compilation
def test_jit_compile_trains_and_evaluates_like_graph_mode():
    x, y = make_batch()
    results = {}
    for jit in (False, True):
        model = compile_for_translation(make_model(dropout=0.0), learning_rate=1e-2,
                                        jit_compile=jit, auxiliary_weights={"rewe": 20.0})
        steps = [model.train_on_batch(x, y, return_dict=True) for _ in range(2)]
        results[jit] = steps + [model.evaluate(x, y, verbose=0, return_dict=True)]
    assert model.jit_compile
    for graph, xla in zip(results[False], results[True]):
        for name in ("loss", "logits_loss", "rewe_loss"):
            np.testing.assert_allclose(xla[name], graph[name], rtol=2e-4)


@pytest.mark.slow  # training steps of a whole model (issue 37: CI runs it)
def test_mixed_float16_trains_with_loss_scaling(mixed_precision):
    x, y = make_batch()
    model = compile_for_translation(make_model(dropout=0.0), learning_rate=1e-2)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    outputs = step_outputs(model, x)
    assert outputs.of(model.rewe).dtype == tf.float16
    assert outputs.of(model.head).dtype == tf.float32
    assert model.rewe.hidden_layer.kernel.dtype == tf.float32
    before = model.evaluate(x, y, verbose=0, return_dict=True)
    # The first steps overflow in float16 at the initial loss scale (2^15) and are
    # skipped while the scale halves.
    history = model.fit(x, y, batch_size=3, epochs=12, verbose=0).history
    assert np.all(np.isfinite(history["loss"]))
    after = model.evaluate(x, y, verbose=0, return_dict=True)
    assert after["rewe_loss"] < before["rewe_loss"]
    assert after["logits_loss"] < before["logits_loss"]


# -- compile_for_translation -----------------------------------------------------------------

def test_compile_for_translation_defaults_to_the_paper_lambda_and_cosine():
    x, y = make_batch()
    model = compile_for_translation(make_model(dropout=0.0))
    assert type(model.loss["rewe"]) is ReWELoss and model.loss["rewe"].distance == "cosine"
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["loss"], logs["logits_loss"] + 20.0 * logs["rewe_loss"],
                               rtol=1e-5)
    mse = compile_for_translation(make_model(dropout=0.0), auxiliary_weights={"rewe": 0.5},
                                  auxiliary_losses={"rewe": ReWELoss("mse")})
    assert mse.loss["rewe"].distance == "mse"
    logs = mse.evaluate(x, y, verbose=0, return_dict=True)
    np.testing.assert_allclose(logs["loss"], logs["logits_loss"] + 0.5 * logs["rewe_loss"],
                               rtol=1e-5)


@pytest.mark.slow  # three fits and evaluations (~8 s)
def test_per_term_dev_losses_are_token_weighted_means_like_val_loss():
    """Over dev batches of different lengths, `val_logits_loss` is the per-token NLL of the
    whole dev set (what a plain model's `val_loss` is), so `val_loss` = `val_logits_loss`
    + λ·`val_rewe_loss`. Weighting each batch's mean by its sentences (the code before
    issue 53) gives another number: a ReWE arm's dev NLL was then averaged unlike a plain
    arm's."""
    from tf_outheads import training

    x, y = make_batch()
    # Two dev batches: one long sentence (4 tokens), then two short ones (2 + 1).
    long_y = y[1:2].copy()
    long_y[0, 4] = PAD_ID
    long_y[0, 3] = EOS_ID
    long_x = {k: v[1:2] for k, v in x.items()}
    short_y = y[[0, 2]].copy()
    short_y[0, 1:] = PAD_ID
    short_y[0, 1] = EOS_ID
    short_y[1, 1:] = PAD_ID
    short_y[1, 0] = EOS_ID
    short_x = {k: v[[0, 2]] for k, v in x.items()}
    batches = [(long_x, long_y), (short_x, short_y)]
    dev = tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=({k: tf.TensorSpec((None, None), tf.int32) for k in x},
                          tf.TensorSpec((None, None), tf.int32)))
    model = compile_rewe(make_model(dropout=0.0), weight=20.0)
    history = training.fit(model, tf.data.Dataset.from_tensors((x, y)).repeat(), epochs=1,
                           steps_per_epoch=1, validation_data=dev, verbose=0).history
    # Independently, after the training step: the token-weighted NLL over both batches.
    nll, tokens = 0.0, 0
    for features, labels in batches:
        count = int(np.sum(labels != PAD_ID))
        nll += float(MaskedSequenceCrossEntropy()(labels, model(features))) * count
        tokens += count
    np.testing.assert_allclose(history["val_logits_loss"][-1], nll / tokens, rtol=1e-5)
    np.testing.assert_allclose(
        history["val_loss"][-1],
        history["val_logits_loss"][-1] + 20.0 * history["val_rewe_loss"][-1], rtol=1e-5)


def test_compile_for_translation_refuses_an_auxiliary_loss_without_its_head():
    with pytest.raises(ValueError, match=r"names \['rewe'\].*has none.*"
                                         r"Received: auxiliary_weights=\{'rewe': 20\}"):
        compile_for_translation(make_model(rewe=None), auxiliary_weights={"rewe": 20})
    with pytest.raises(ValueError, match=r"heads: \['logits'\].*Received: loss keys \['rewe'\]"):
        make_model(rewe=None).compile(optimizer="adam", loss={"rewe": ReWELoss()})


@pytest.mark.slow  # training steps of a whole model (issue 37: CI runs it)
def test_sampled_softmax_and_rewe_train_together():
    # Each loss reads the decoder outputs: candidates of the head, and the ReWE head.
    x, y = make_batch()
    model = compile_for_translation(make_model(dropout=0.0), learning_rate=1e-2,
                                    loss=SampledSoftmaxLoss(fraction=0.5, seed=3))
    before = model.evaluate(x, y, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=3, epochs=8, verbose=0).history
    after = model.evaluate(x, y, verbose=0, return_dict=True)
    assert np.all(np.isfinite(history["logits_loss"])) and np.all(np.isfinite(history["rewe_loss"]))
    assert after["rewe_loss"] < before["rewe_loss"] and after["logits_loss"] < before["logits_loss"]


# -- the contrastive set-ups (supplementary C) -----------------------------------------------

def test_contrastive_a_regresses_the_predicted_word_embedding():
    x, y = make_batch()
    model = compile_rewe(make_model(rewe={"prediction": "predicted_word"}, dropout=0.0),
                         weight=0.2)
    assert model.rewe.weights == [] and parameter_report(model).groups["rewe"] == 0
    outputs = step_outputs(model, x)
    predicted = np.argmax(outputs.of(model.head), axis=-1)
    np.testing.assert_array_equal(outputs.of(model.rewe),
                                  model.target_embedding.embeddings.numpy()[predicted])
    with tf.GradientTape() as tape:
        value, _ = rewe_term(model, y, step_outputs(model, x), model.loss["rewe"])
    gradient = ops.convert_to_numpy(tape.gradient(value, model.target_embedding.embeddings))
    assert np.abs(gradient).sum() > 0  # e(argmax p) is what the loss trains
    history = model.fit(x, y, batch_size=3, epochs=2, verbose=0).history
    assert np.all(np.isfinite(history["rewe_loss"]))


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_contrastive_b_is_the_continuous_head_with_the_rewe_network():
    x, y = make_batch()
    head = {"class_name": "continuous", "config": {
        "output_dim": EMBEDDING_DIM, "hidden_units": UNITS, "activation": "relu",
        "scoring": "cosine"}}
    model = make_model(rewe=None, head=head, dropout=0.0)
    vectors = np.random.default_rng(5).normal(size=(TARGET_VOCAB, EMBEDDING_DIM))
    model.head.set_target_vectors(vectors)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=ReWELoss("cosine"))
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=3, epochs=5, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before
    # Nearest-neighbour decoding: each step's word has the highest cosine with ê.
    state = model.initial_decoding_state(x["source_ids"])
    hidden, _ = model.decoder.step(np.full((3,), BOS_ID, "int32"), state)
    scores, _ = model.make_step_fn()(np.full((3,), BOS_ID, "int32"), state)
    predicted = model.head(hidden).numpy()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = predicted @ unit.T / np.linalg.norm(predicted, axis=1, keepdims=True)
    np.testing.assert_allclose(scores, cosine, rtol=1e-4, atol=1e-5)


# -- under tf.distribute ---------------------------------------------------------------------

MIRRORED_SCRIPT = textwrap.dedent('''
    import json
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from tf_outheads import compile_for_translation
    from tf_outheads_zoo.lstm import LSTMSeq2Seq

    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(0)
    x = {"source_ids": rng.integers(4, 50, (16, 7)).astype("int32"),
         "target_in": rng.integers(4, 60, (16, 6)).astype("int32")}
    y = np.roll(x["target_in"], -1, 1)
    y[:, -1] = 0
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = LSTMSeq2Seq(50, 60, embedding_dim=16, hidden_dim=16, num_layers=1,
                            dropout=0.0, rewe={"hidden_dim": 8})
        compile_for_translation(model, learning_rate=1e-2, auxiliary_weights={"rewe": 20.0})
    before = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=16, epochs=4, verbose=0).history
    after = model.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "before": before,
                      "after": after, "history": history}))
''')


@pytest.mark.slow  # two logical devices
def test_mirrored_strategy_trains_both_outputs():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    assert {"logits_loss", "rewe_loss"} <= set(report["history"])
    for name in ("logits_loss", "rewe_loss"):
        assert report["after"][name] < report["before"][name], name
    np.testing.assert_allclose(
        report["after"]["loss"],
        report["after"]["logits_loss"] + 20.0 * report["after"]["rewe_loss"], rtol=1e-5)


# -- zoo presets and the CLI -----------------------------------------------------------------

def test_cpu_pair_differs_only_by_rewe():
    from tf_outheads_zoo.presets import get_preset

    plain, rewe = get_preset("lstm-cpu"), get_preset("lstm-cpu-rewe")
    assert rewe["model"].pop("rewe") == {"hidden_dim": 200, "embedding_dim": 300,
                                         "targets": "pretrained"}
    assert rewe["train"].pop("rewe") == {"weight": 20.0, "distance": "cosine"}
    assert rewe["data"].pop("target_vectors")["dim"] == 300
    plain["data"].pop("target_vectors")
    assert plain["model"].pop("rewe") is None and plain["train"].pop("rewe") is None
    for section in ("data", "model", "train", "decode"):
        assert rewe[section] == plain[section], section
    paper, paper_plain = get_preset("lstm-rewe-paper"), get_preset("lstm-rewe-paper-plain")
    assert paper["model"]["hidden_dim"] == 1024 and paper["model"]["embedding_dim"] == 300
    assert paper["model"]["bidirectional_encoder"] and paper["model"]["num_layers"] == 1
    assert paper["train"]["learning_rate"] == 2e-4 and paper["decode"]["beam_size"] == 5
    assert paper_plain["model"]["rewe"] is None and paper_plain["train"]["rewe"] is None


@pytest.mark.parametrize("name", [*(pytest.param(name, marks=pytest.mark.slow) for name in (
    "lstm-cpu-rewe", "lstm-rewe-paper", "lstm-rewe-paper-plain", "lstm-cpu-rewe-contrastive-a",
    "lstm-cpu-rewe-contrastive-b"))])  # all five in the slow set (issues 37, 40)
def test_every_rewe_preset_builds_compiles_and_trains_a_step(name):
    from tf_outheads_zoo.presets import preset_config
    from tf_outheads_zoo.components import build_model, training_loss

    config = preset_config(name, {"model.embedding_dim": 12, "model.hidden_dim": 16})
    rewe = config.model.rewe
    if rewe and "embedding_dim" in rewe:
        config = config.with_overrides({"model.rewe": dict(rewe, embedding_dim=12)})
    head = config.model.head
    if isinstance(head, dict) and head["class_name"] == "continuous":
        config = config.with_overrides({"model.head": dict(
            head, config=dict(head["config"], output_dim=12))})
    model = build_model(config, SOURCE_VOCAB, TARGET_VOCAB)
    vectors = np.random.default_rng(0).normal(size=(TARGET_VOCAB, 12))
    if hasattr(model.head, "set_target_vectors"):
        model.head.set_target_vectors(vectors)
    if model.rewe is not None and model.rewe.targets == "pretrained":
        model.rewe.set_target_vectors(vectors)
    compile_for_translation(model, **training_loss(config.train))
    x, y = make_batch()
    logs = model.train_on_batch(x, y, return_dict=True)
    assert np.isfinite(logs["loss"])
    assert ("rewe_loss" in logs) == (config.train.rewe is not None)
    if config.train.rewe:
        weight = config.train.rewe["weight"]
        np.testing.assert_allclose(logs["loss"], logs["logits_loss"] + weight * logs["rewe_loss"],
                                   rtol=1e-5)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """The embedded corpus's first 400 train, 12 dev and 12 test verses."""
    from tests.corpus import write_corpus_slice

    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 400, 12, 12)


@pytest.mark.slow  # CLI training end to end
def test_cli_trains_the_rewe_preset_with_separate_loss_curves(small_corpus, tmp_path):
    from tf_outheads_zoo import cli

    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "lstm-cpu-rewe", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "50", "--set", "data.vocab_size=300",
              "--set", "model.embedding_dim=16", "--set", "model.hidden_dim=16",
              "--set", "model.head=tied",
              "--set", "model.rewe={'hidden_dim': 8, 'embedding_dim': 12, 'targets': 'pretrained'}",
              "--set", "data.target_vectors={'dim': 12, 'epochs': 1, 'path': None}",
              # 50: the TensorBoard callback (update_freq=50) records only at multiples.
              "--set", "train.steps_per_epoch=50", "--set", "train.max_minutes=None",
              "--set", "decode.max_length_offset=3"])
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 50
    assert results["parameters"]["rewe"] == 16 * 8 + 8 + 8 * 12 + 12 + 300 * 12

    with open(os.path.join(run_dir, "loss_curves.csv")) as f:
        header, *rows = [line.split(",") for line in f.read().splitlines()]
    assert header == ["step", "epoch", "loss", "logits_loss", "rewe_loss", "weighted_rewe_loss",
                      "tokens", "time"]
    assert [int(row[0]) for row in rows] == list(range(1, 51))
    for row in rows:  # each step: loss = NLL + 20·ReWE
        loss, nll, regression, weighted = (float(v) for v in row[2:6])
        assert 0.0 < regression <= 2.0
        np.testing.assert_allclose(weighted, 20.0 * regression, rtol=1e-6)
        np.testing.assert_allclose(loss, nll + weighted, rtol=1e-3)
    # The plot of the same curves (ReWE's Figure 3): one polyline per column.
    svg = ElementTree.parse(os.path.join(run_dir, "loss_curves.svg")).getroot()
    lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
    assert [line.find("{http://www.w3.org/2000/svg}title").text for line in lines] == [
        "training loss (NLL + λ·ReWE, Eq. 7)", "NLL", "ReWE", "λ·ReWE (λ = 20)"]
    assert all(len(line.get("points").split()) == 50 for line in lines)
    with open(os.path.join(run_dir, "history.csv")) as f:
        columns = f.readline().strip().split(",")
    assert {"logits_loss", "rewe_loss", "val_logits_loss", "val_rewe_loss"} <= set(columns)
    tags = set()
    for path in glob.glob(os.path.join(run_dir, "logs", "train", "events*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    assert {"epoch_logits_loss", "epoch_rewe_loss", "batch_logits_loss", "batch_rewe_loss"} <= tags

    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"), safe_mode=True)
    assert model.rewe.targets == "pretrained"
    table = model.rewe.target_vectors().numpy()
    assert table.shape == (300, 12) and np.abs(table[4:]).sum() > 0  # the FastText vectors
