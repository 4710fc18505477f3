"""Tests for `tf_outheads.losses.sampled_softmax` and `tf_outheads.ops.candidate_sampling`."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads import SampledSoftmaxLoss
from tf_outheads import compile_for_translation
from tf_outheads import sampled_softmax_loss
from tf_outheads.layers.heads import SoftmaxHead, TiedSoftmaxHead
from tf_outheads.layers.joint_head import JointEmbeddingHead
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import masked_sequence_cross_entropy
from tf_outheads.losses.sampled_softmax import sampled_softmax_per_token
from tf_outheads.ops import candidate_sampling
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tests.testing import step_loss

VOCAB = 40
HIDDEN = 12
HEAD_IDS = ["softmax", "tied", "joint"]


def make_head(kind, vocabulary_size=VOCAB, hidden_dim=HIDDEN, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "softmax":
        head = SoftmaxHead(vocabulary_size)
        head.build((None, None, hidden_dim))
    else:
        embedding = keras.layers.Embedding(vocabulary_size, hidden_dim)
        embedding.build((None,))
        if kind == "tied":
            head = TiedSoftmaxHead(embedding)
        else:
            head = JointEmbeddingHead(embedding, joint_dim=16)
        head.build((None, None, hidden_dim))
    for weight in head.weights:
        weight.assign(rng.normal(0.0, 0.5, size=weight.shape).astype("float32"))
    return head


def make_batch(seed=0, vocabulary_size=VOCAB, batch=3, time=6, pad=True):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(batch, time, HIDDEN)).astype("float32")
    targets = rng.integers(4, vocabulary_size, size=(batch, time)).astype("int32")
    if pad:
        targets[0, 4:] = 0
        targets[-1, 5:] = 0
    return hidden, targets


def seed_of(step, base=7):
    return candidate_sampling.step_seed(base, step)


# -- p = 100 % is the full softmax -------------------------------------------------

@pytest.mark.parametrize("kind", HEAD_IDS)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1], ids=["plain", "smoothed"])
def test_full_fraction_equals_full_cross_entropy(kind, label_smoothing):
    head = make_head(kind)
    hidden, targets = make_batch()
    sampled = sampled_softmax_loss(head, hidden, targets, seed_of(3), fraction=1.0,
                                   label_smoothing=label_smoothing)
    full = masked_sequence_cross_entropy(targets, head(hidden), label_smoothing=label_smoothing)
    np.testing.assert_allclose(float(sampled), float(full), rtol=1e-5, atol=1e-6)


def test_full_fraction_candidates_are_the_vocabulary():
    _, targets = make_batch()
    ids, labels = candidate_sampling.batch_candidates(targets, VOCAB, VOCAB, seed_of(0))
    assert sorted(ids.numpy().tolist()) == list(range(VOCAB))
    np.testing.assert_array_equal(ids.numpy()[labels.numpy()], targets)


# -- Pappas batch candidates --------------------------------------------------------

def test_batch_candidates_positives_first_then_distinct_negatives():
    _, targets = make_batch()
    positives = np.unique(targets)
    ids, labels = candidate_sampling.batch_candidates(targets, VOCAB, 25, seed_of(1))
    ids = ids.numpy()
    assert len(ids) == 25
    assert len(set(ids.tolist())) == 25
    np.testing.assert_array_equal(ids[: len(positives)], positives)
    np.testing.assert_array_equal(ids[labels.numpy()], targets)


def test_positives_are_never_dropped():
    # 3 × 6 targets, up to 17 distinct ids, but K = ⌈5 % · 40⌉ = 2.
    hidden, targets = make_batch()
    positives = np.unique(targets)
    assert len(positives) > candidate_sampling.num_candidates_for(0.05, VOCAB)
    ids, labels = candidate_sampling.batch_candidates(targets, VOCAB, 2, seed_of(1))
    assert sorted(ids.numpy().tolist()) == positives.tolist()
    np.testing.assert_array_equal(ids.numpy()[labels.numpy()], targets)
    # The loss is the softmax over exactly those words.
    head = make_head("softmax")
    loss = sampled_softmax_loss(head, hidden, targets, seed_of(1), fraction=0.05)
    logits = head(hidden).numpy()[..., positives]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    index = np.searchsorted(positives, targets)
    per_token = -np.take_along_axis(log_probs, index[..., None], -1)[..., 0]
    mask = targets != 0
    np.testing.assert_allclose(float(loss), per_token[mask].mean(), rtol=1e-5)


def test_static_size_holds_every_position():
    _, targets = make_batch()
    ids, labels = candidate_sampling.batch_candidates(targets, VOCAB, 2, seed_of(1),
                                                      static_size=True)
    assert len(ids) == targets.size  # min(V, N) = 18 > K = 2
    np.testing.assert_array_equal(ids.numpy()[labels.numpy()], targets)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_negatives_are_uniform_over_non_targets():
    # Every non-target word is drawn with the same probability (K − #pos)/(V − #pos).
    targets = np.array([[5, 6, 7]], "int32")
    counts = np.zeros(VOCAB)
    draws = 3000
    candidates = tf.function(
        lambda seed: candidate_sampling.batch_candidates(targets, VOCAB, 8, seed)[0])
    for step in range(draws):
        ids = candidates(seed_of(step))
        counts[ids.numpy()[3:]] += 1
    negatives = np.setdiff1d(np.arange(VOCAB), [5, 6, 7])
    assert counts[[5, 6, 7]].sum() == 0
    p = 5 / len(negatives)
    expected = draws * p
    tolerance = 5 * math.sqrt(draws * p * (1 - p))
    assert np.all(np.abs(counts[negatives] - expected) < tolerance), counts[negatives]


def test_fraction_rounding():
    assert candidate_sampling.num_candidates_for(0.25, 128000) == 32000
    assert candidate_sampling.num_candidates_for(0.05, 128000) == 6400
    assert candidate_sampling.num_candidates_for(0.05, 31999) == 1600
    with pytest.raises(ValueError, match="fraction"):
        candidate_sampling.num_candidates_for(0.0, 100)


# -- the standard estimator ---------------------------------------------------------

@pytest.mark.parametrize("sampler", ["uniform", "log_uniform", "unigram"])
def test_samplers_draw_from_their_proposal(sampler):
    counts_table = np.arange(VOCAB, 0, -1).astype("float32") ** 2
    table = candidate_sampling.unigram_log_probabilities(counts_table)
    draws = 40000
    ids = candidate_sampling.sample_candidates(sampler, draws, VOCAB, seed_of(0), table).numpy()
    observed = np.bincount(ids, minlength=VOCAB)
    q = candidate_sampling.proposal_probabilities(sampler, VOCAB, counts_table)
    np.testing.assert_allclose(q.sum(), 1.0, rtol=1e-6)
    expected = draws * q
    chi2 = ((observed - expected) ** 2 / expected).sum()
    # df = 39: mean 39, sd 8.8; 39 + 5 sd ≈ 83.
    assert chi2 < 83, chi2


@pytest.mark.parametrize("sampler", ["uniform", "log_uniform", "unigram"])
def test_matches_tf_nn_sampled_softmax_loss(sampler):
    head = make_head("softmax")
    hidden, targets = make_batch()
    counts = np.arange(VOCAB, 0, -1).astype("float32")
    table = candidate_sampling.unigram_log_probabilities(counts)
    seed = seed_of(11)
    num_sampled = 9
    ours = sampled_softmax_per_token(head, hidden, targets, seed, mode=sampler,
                                     num_sampled=num_sampled,
                                     unigram_counts=tf.constant(counts)).numpy()
    sampled = candidate_sampling.sample_candidates(sampler, num_sampled, VOCAB, seed, table)
    expected_count = lambda ids: tf.exp(candidate_sampling.log_expected_count(  # noqa: E731
        sampler, ids, num_sampled, VOCAB, table))
    flat_targets = targets.reshape(-1, 1).astype("int64")
    reference = tf.nn.sampled_softmax_loss(
        weights=head.kernel, biases=head.bias, labels=flat_targets,
        inputs=hidden.reshape(-1, HIDDEN), num_sampled=num_sampled, num_classes=VOCAB,
        sampled_values=(tf.cast(sampled, tf.int64), expected_count(flat_targets),
                        expected_count(sampled)),
        remove_accidental_hits=True).numpy()
    # TF removes one draw per (position, word) even when the word was drawn
    # twice (it keys hits by id); we remove every such draw. Compare where the
    # gold word was drawn at most once, and check the others by hand.
    hits = (flat_targets == sampled.numpy()[None, :]).sum(-1)
    once = hits <= 1
    assert once.sum() >= 10
    np.testing.assert_allclose(ours.reshape(-1)[once], reference[once], rtol=1e-5, atol=1e-5)
    logits = head(hidden).numpy().reshape(-1, VOCAB)
    log_count = lambda ids: candidate_sampling.log_expected_count(  # noqa: E731
        sampler, ids, num_sampled, VOCAB, table).numpy()
    for row in np.flatnonzero(~once):
        gold = flat_targets[row, 0]
        negatives = sampled.numpy()[sampled.numpy() != gold]
        true = logits[row, gold] - log_count(np.array([gold]))[0]
        column = np.concatenate([[true], logits[row, negatives] - log_count(negatives)])
        expected = np.log(np.exp(column - column.max()).sum()) + column.max() - true
        np.testing.assert_allclose(ours.reshape(-1)[row], expected, rtol=1e-5)


def _inverse_probability_estimates(head, hidden, targets, sampler, num_sampled, draws,
                                   assumed=None):
    """Per-position estimates of 1/p(y) from the sampled loss, over `draws` seeds.

    With the gold logit and the draws corrected by log S·Q,
    exp(loss_t) = 1 + Σ_{k: w_k≠y} [exp(s_k)/(S·Q(w_k))] / [exp(s_y)/(S·Q(y))], so
    1 + (exp(loss_t) − 1)/(S·Q(y)) = [exp(s_y) + Σ_k exp(s_k)/(S·Q(w_k))] / exp(s_y):
    the importance-sampling estimate of Z, over exp(s_y). `assumed` scores the
    draws of `sampler` with another proposal's correction (a wrong estimator).
    """
    counts = np.arange(VOCAB, 0, -1).astype("float32") ** 2
    table = candidate_sampling.unigram_log_probabilities(counts)
    assumed = assumed or sampler

    @tf.function
    def estimate(seed):
        ids = candidate_sampling.sample_candidates(sampler, num_sampled, VOCAB, seed, table)
        log_count = lambda w: candidate_sampling.log_expected_count(  # noqa: E731
            assumed, w, num_sampled, VOCAB, table)
        if assumed == sampler:
            loss = sampled_softmax_per_token(head, hidden, targets, seed, mode=sampler,
                                             num_sampled=num_sampled,
                                             unigram_counts=tf.constant(counts))
        else:
            true = head.logits_for(hidden, targets[..., None])[..., 0] - log_count(targets)
            negatives = head.logits_for(hidden, ids) - log_count(ids)
            negatives = tf.where(tf.equal(targets[..., None], ids), -1e9, negatives)
            loss = tf.reduce_logsumexp(tf.concat([true[..., None], negatives], -1), -1) - true
        return 1.0 + (tf.exp(loss) - 1.0) / tf.exp(log_count(targets))

    return np.stack([estimate(seed_of(step, base=99)).numpy() for step in range(draws)])


def _z_scores(head, hidden, targets, estimates):
    probs = tf.nn.softmax(head(hidden)).numpy()
    inverse_p = 1.0 / np.take_along_axis(probs, targets[..., None], -1)[..., 0]
    standard_error = estimates.std(0, ddof=1) / math.sqrt(len(estimates))
    return np.abs(estimates.mean(0) - inverse_p) / standard_error


@pytest.mark.parametrize("sampler", ["uniform", *(pytest.param(sampler, marks=pytest.mark.slow)
                                     for sampler in ("log_uniform", "unigram"))])
def test_partition_function_estimate_is_unbiased(sampler):
    # The sampled normaliser Σ_k exp(s_k)/(S·Q(w_k)) over draws that miss y is an
    # unbiased estimate of Σ_{v≠y} exp(s_v): the mean over draws of the 1/p(y)
    # estimate must be within 4.5 standard errors of the exact 1/p(y) (fixed seeds).
    head = make_head("softmax")
    hidden, targets = make_batch(batch=2, time=3, pad=False)
    hidden = hidden * 0.3  # moderate logits: a light-tailed estimate, few draws needed
    estimates = _inverse_probability_estimates(head, hidden, targets, sampler, 8, 1500)
    z = _z_scores(head, hidden, targets, estimates)
    assert np.all(z < 4.5), z


def test_unbiasedness_check_detects_a_wrong_correction():
    # Draws from the unigram proposal corrected as if uniform: the same check fails.
    head = make_head("softmax")
    hidden, targets = make_batch(batch=2, time=3, pad=False)
    hidden = hidden * 0.3
    estimates = _inverse_probability_estimates(head, hidden, targets, "unigram", 8, 1500,
                                               assumed="uniform")
    z = _z_scores(head, hidden, targets, estimates)
    assert np.max(z) > 4.5, z


# -- sparse gradients -----------------------------------------------------------------

def _output_parameters(head):
    if isinstance(head, SoftmaxHead):
        return {"kernel": head.kernel, "bias": head.bias}
    return {"embedding": head.embedding.embeddings, "bias": head.bias}


@pytest.mark.parametrize("mode", ["batch", "uniform"])
@pytest.mark.parametrize("kind", HEAD_IDS)
def test_gradients_reach_only_candidate_rows(kind, mode):
    head = make_head(kind, vocabulary_size=200)
    hidden, targets = make_batch(vocabulary_size=200)
    seed = seed_of(5)
    options = {"fraction": 0.1} if mode == "batch" else {"num_sampled": 15}
    if mode == "batch":
        candidates, _ = candidate_sampling.batch_candidates(targets, 200, 20, seed)
    else:
        candidates = tf.concat([targets.reshape(-1),
                                candidate_sampling.sample_candidates("uniform", 15, 200, seed)], 0)
    candidates = set(candidates.numpy().tolist())
    assert len(candidates) < 60
    parameters = _output_parameters(head)
    with tf.GradientTape() as tape:
        loss = sampled_softmax_loss(head, hidden, targets, seed, mode=mode, **options)
    gradients = tape.gradient(loss, list(parameters.values()))
    for name, gradient in zip(parameters, gradients):
        assert isinstance(gradient, tf.IndexedSlices), name
        rows = set(gradient.indices.numpy().tolist())
        assert rows <= candidates, (name, rows - candidates)
        assert set(np.unique(targets[targets != 0]).tolist()) <= rows, name


@pytest.mark.parametrize("mode", ["batch", "log_uniform"])
def test_padding_positions_get_no_gradient(mode):
    head = make_head("joint")
    hidden, targets = make_batch()
    hidden = tf.constant(hidden)
    options = {"fraction": 0.3} if mode == "batch" else {"num_sampled": 10}
    with tf.GradientTape() as tape:
        tape.watch(hidden)
        loss = sampled_softmax_loss(head, hidden, targets, seed_of(2), mode=mode, **options)
    gradient = tape.gradient(loss, hidden).numpy()
    assert np.all(gradient[targets == 0] == 0.0)
    assert np.all(np.abs(gradient[targets != 0]).sum(-1) > 0)


# -- the Keras loss class -------------------------------------------------------------

def test_loss_class_on_full_logits_is_masked_cross_entropy():
    head = make_head("softmax")
    hidden, targets = make_batch()
    logits = head(hidden)
    weights = np.array([1.0, 0.5, 2.0], "float32")
    for smoothing in (0.0, 0.2):
        ours = SampledSoftmaxLoss(fraction=0.1, label_smoothing=smoothing)
        full = MaskedSequenceCrossEntropy(label_smoothing=smoothing)
        np.testing.assert_allclose(float(ours(targets, logits)), float(full(targets, logits)),
                                   rtol=1e-6)
        np.testing.assert_allclose(float(ours(targets, logits, sample_weight=weights)),
                                   float(full(targets, logits, sample_weight=weights)), rtol=1e-6)


def test_in_a_training_step_matches_function_and_weights():
    head = make_head("tied")
    hidden, targets = make_batch()
    loss = SampledSoftmaxLoss(fraction=0.5, seed=7)
    total, tokens = step_loss(loss, targets, head, hidden=hidden, step=4)
    expected = sampled_softmax_loss(head, hidden, targets, seed_of(4, base=7), fraction=0.5)
    np.testing.assert_allclose(total / tokens, float(expected), rtol=1e-6)
    # Zero weight on a sentence removes its tokens from the sum, not from the
    # count (as Keras' reduction of MaskedSequenceCrossEntropy).
    zero_first, _ = step_loss(loss, targets, head, hidden=hidden, step=4,
                              sample_weight=np.array([0.0, 1.0, 1.0], "float32"))
    per_token = sampled_softmax_per_token(head, hidden, targets, seed_of(4, base=7),
                                          fraction=0.5).numpy()
    mask = targets != 0
    mask[0] = False
    np.testing.assert_allclose(zero_first, per_token[mask].sum(), rtol=1e-5)
    assert tokens == (targets != 0).sum()


def test_in_an_evaluation_step_is_the_full_cross_entropy():
    head = make_head("tied")
    hidden, targets = make_batch()
    for smoothing in (0.0, 0.2):
        loss = SampledSoftmaxLoss(fraction=0.1, label_smoothing=smoothing)
        total, tokens = step_loss(loss, targets, head, hidden=hidden, training=False)
        full = MaskedSequenceCrossEntropy(label_smoothing=smoothing)
        np.testing.assert_allclose(total / tokens, float(full(targets, head(hidden))), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mixed_precision_hidden_gives_float32_loss(dtype):
    head = make_head("joint")
    hidden, targets = make_batch()
    loss = sampled_softmax_loss(head, tf.cast(hidden, dtype), targets, seed_of(0), fraction=0.5)
    reference = sampled_softmax_loss(head, hidden, targets, seed_of(0), fraction=0.5)
    assert loss.dtype == tf.float32
    np.testing.assert_allclose(float(loss), float(reference), rtol=2e-2)


def test_config_round_trip():
    loss = SampledSoftmaxLoss(mode="unigram", num_sampled=64, unigram_counts=[3, 2, 1],
                              distortion=0.75, seed=5)
    clone = SampledSoftmaxLoss.from_config(loss.get_config())
    assert clone.get_config() == loss.get_config()
    assert keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(loss)).get_config() == loss.get_config()


@pytest.mark.parametrize("kwargs, message", [
    ({"fraction": 1.5}, "fraction"),
    ({"mode": "zipf"}, "mode"),
    ({"mode": "unigram", "num_sampled": 5}, "unigram_counts"),
    ({"mode": "uniform", "num_sampled": 5, "label_smoothing": 0.1}, "label smoothing"),
    ({"mode": "uniform", "fraction": 0.1, "num_sampled": 5}, "exactly one"),
    ({"mode": "batch", "num_sampled": 5}, "num_sampled"),
    ({"mode": "uniform", "num_sampled": 0}, "num_sampled"),
])
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SampledSoftmaxLoss(**kwargs)


def test_unigram_counts_must_match_vocabulary():
    head = make_head("softmax")
    hidden, targets = make_batch()
    with pytest.raises(ValueError, match="one entry per word"):
        sampled_softmax_loss(head, hidden, targets, seed_of(0), mode="unigram", num_sampled=4,
                             unigram_counts=tf.ones((VOCAB - 1,)))


# -- under model.fit --------------------------------------------------------------------

def _seq2seq_data(seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(4, 50, (16, 7)).astype("int32")
    target_in = rng.integers(4, 60, (16, 6)).astype("int32")
    target_in[:4, 4:] = 0
    target_out = np.roll(target_in, -1, 1)
    target_out[:, -1] = 0
    return {"source_ids": source, "target_in": target_in}, target_out


def _small_model(head, **kwargs):
    return LSTMSeq2Seq(50, 60, embedding_dim=16, hidden_dim=16, num_layers=1, dropout=0.0,
                       head=head, **kwargs)


JOINT = {"class_name": "joint", "config": {"joint_dim": 24}}


# The joint head in the default run (it projects only the sampled rows), the other two
# in the slow set (issue 37).
@pytest.mark.parametrize("head", [pytest.param("softmax", marks=pytest.mark.slow),
                                  pytest.param("tied", marks=pytest.mark.slow), JOINT],
                         ids=HEAD_IDS)
@pytest.mark.parametrize("jit_compile", [
    False, pytest.param(True, marks=pytest.mark.slow)], ids=["graph", "xla"])  # XLA: 9 s each
def test_fit_trains_and_evaluate_uses_full_softmax(head, jit_compile):
    keras.utils.set_random_seed(3)
    x, y = _seq2seq_data()
    model = _small_model(head)
    compile_for_translation(model, learning_rate=1e-2, jit_compile=jit_compile,
                            loss=SampledSoftmaxLoss(fraction=0.3, seed=1))
    before = model.evaluate(x, y, verbose=0)
    history = model.fit(x, y, batch_size=8, epochs=4, verbose=0)
    after = model.evaluate(x, y, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert after < before
    # evaluate() is the full masked cross-entropy of the model's logits.
    full = MaskedSequenceCrossEntropy()(y, model(x))
    np.testing.assert_allclose(after, float(full), rtol=1e-4)


def test_loss_steps_see_the_decoder_outputs_whatever_the_loss():
    x, _ = _seq2seq_data()
    model = _small_model("tied")
    for loss in (None, SampledSoftmaxLoss(fraction=0.5)):
        compile_for_translation(model, loss=loss)
        assert model(x, training=True).shape[-1] == 60  # the head's logits
        with model.training_outputs():
            outputs = model(x, training=True)
        assert set(outputs) == {"hidden"} and outputs["hidden"].shape[-1] == 16
        assert model(x, training=False).shape[-1] == 60


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_fit_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(3)
        x, y = _seq2seq_data()
        model = _small_model(JOINT)
        compile_for_translation(model, learning_rate=1e-2,
                                loss=SampledSoftmaxLoss(fraction=0.3, seed=1))
        history = model.fit(x, y, batch_size=8, epochs=3, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.slow  # two trainings (issue 37: CI runs it)
def test_same_seed_same_training():
    x, y = _seq2seq_data()
    losses = []
    for _ in range(2):
        keras.utils.set_random_seed(3)
        model = _small_model("softmax")
        compile_for_translation(model, loss=SampledSoftmaxLoss(fraction=0.2, seed=4,
                                                                 mode="batch"))
        losses.append(model.fit(x, y, batch_size=8, epochs=2, verbose=0,
                                shuffle=False).history["loss"])
    assert losses[0] == losses[1]


def test_label_smoothing_and_loss_together_is_refused():
    with pytest.raises(ValueError, match="label smoothing"):
        compile_for_translation(_small_model("tied"), label_smoothing=0.1,
                                loss=SampledSoftmaxLoss(fraction=0.5))


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_keras_file_round_trip_keeps_the_sampled_loss(tmp_path):
    x, y = _seq2seq_data()
    model = _small_model(JOINT)
    compile_for_translation(model, loss=SampledSoftmaxLoss(fraction=0.3, seed=9,
                                                           label_smoothing=0.1))
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded.loss, SampledSoftmaxLoss)
    assert loaded.loss.get_config() == model.loss.get_config()
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert loaded.loss_weights is None
    history = loaded.fit(x, y, batch_size=8, epochs=1, verbose=0)  # still trains, sampled
    assert np.isfinite(history.history["loss"][0])


def test_every_sampled_preset_builds_its_loss():
    from tf_outheads_zoo.presets import PRESET_CONFIGS, preset_config
    from tf_outheads_zoo.components import training_loss

    sampled = {name: config for name, config in PRESET_CONFIGS.items()
               if config.train.sampled_softmax}
    assert {"lstm-cpu-32k-sampled5", "lstm-pappas-joint-4096-128k-sampled5",
            "lstm-pappas-tied-128k-sampled25"} <= set(sampled)
    for name, config in sampled.items():
        loss = training_loss(config.train)["loss"]
        assert isinstance(loss, SampledSoftmaxLoss), name
        assert loss.fraction == config.train.sampled_softmax["fraction"]
        assert loss.seed == config.train.seed
    with pytest.raises(ValueError, match="sampled_softmax"):
        preset_config("lstm-tiny", {"train.sampled_softmax": 0.05,
                                    "train.label_smoothing": 0.0})
