"""Tests for `tf_outheads.SharedPrivateEmbedding` (Liu et al. 2019, Eq. 2–3)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.layers.heads import SoftmaxHead
from tf_outheads.layers.heads import TiedSoftmaxHead
from tf_outheads.layers.joint_head import JointEmbeddingHead
from tf_outheads.layers.shared_private import SharedPrivateEmbedding
from tf_outheads.layers.shared_private import SharedPrivateEmbeddingSide

PAPER_V, PAPER_D = 30_000, 512


def synthetic_pairs(counts, vocabulary_size=PAPER_V, seed=0):
    """Every source id paired with a random target id; categories by `counts`."""
    rng = np.random.default_rng(seed)
    return WordPairs(np.arange(vocabulary_size), rng.permutation(vocabulary_size),
                     np.repeat([0, 1, 2], counts), vocabulary_size, vocabulary_size)


def millions(n):
    return f"{n / 1e6:.1f}M"


def test_parameter_counts_reproduce_tables_1_4_and_5():
    """Embedding parameters for |V_src| = |V_tgt| = 30K, d = 512."""
    source = keras.layers.Embedding(PAPER_V, PAPER_D)
    target = keras.layers.Embedding(PAPER_V, PAPER_D)
    for layer in (source, target):
        layer.build((None,))
    softmax = SoftmaxHead(PAPER_V)
    softmax.build((None, PAPER_D))
    vanilla = source.count_params() + target.count_params() + int(np.prod(softmax.kernel.shape))
    assert millions(vanilla) == "46.1M"  # Table 1: three tables

    def shared_private(counts, ratios):
        layer = SharedPrivateEmbedding(synthetic_pairs(counts), PAPER_D, sharing_ratios=ratios)
        layer.build()
        tied = TiedSoftmaxHead(layer.target)
        tied.build((None, PAPER_D))
        # The tied output layer adds its bias only; the paper counts the tables.
        assert tied.output_capacity()["parameters"] == PAPER_V
        assert layer.count_params() == layer.parameter_count()["parameters"]
        return layer.count_params()

    table5 = (21_172, 11, 8_817)
    assert shared_private(table5, (0, 0, 0)) == 2 * PAPER_V * PAPER_D
    assert millions(shared_private(table5, (0, 0, 0))) == "30.7M"  # decoder WT
    assert millions(shared_private(table5, (0.9, 0.7, 0.5))) == "18.7M"  # Table 1, 5
    assert millions(shared_private((4_869, 309, 24_822), (0.9, 0.7, 0.5))) == "22.0M"  # Table 5
    # Table 4's other sharing coefficients, with the Table 5 counts.
    assert millions(shared_private(table5, (0.5, 0.7, 0.9))) == "21.2M"
    assert millions(shared_private(table5, (0.5, 0.5, 0.5))) == "23.0M"
    assert millions(shared_private(table5, (0.9, 0.7, 0))) == "21.0M"
    # λ = 1 shares every feature: one table (Table 4 prints 15.3M for 15.36M).
    assert shared_private(table5, (1, 1, 1)) == PAPER_V * PAPER_D
    # The exact count: 0.9 · 512 = 460.8 features round to 461.
    assert shared_private(table5, (0.9, 0.7, 0.5)) == (
        2 * PAPER_V * PAPER_D - 21_172 * 461 - 11 * 358 - 8_817 * 256)


def small_layer(ratios=(0.9, 0.7, 0.5), dim=10):
    # Source ids 0..5 paired with target ids (lm: 0→3, 1→0; wf: 2→2; ur: 3→5);
    # source 4, 5 and target 1, 4, 6 stay unpaired.
    pairs = WordPairs(np.array([0, 1, 2, 3]), np.array([3, 0, 2, 5]), np.array([0, 0, 1, 2]),
                      6, 7)
    layer = SharedPrivateEmbedding(pairs, dim, sharing_ratios=ratios,
                                   embeddings_initializer="random_normal")
    layer.build()
    return layer


def test_paired_rows_hold_the_same_first_features_only():
    layer = small_layer()
    source = np.asarray(layer.source.embeddings)
    target = np.asarray(layer.target.embeddings)
    assert source.shape == (6, 10) and target.shape == (7, 10)
    assert layer.widths == (9, 7, 5)
    for s, t, k in ((0, 3, 9), (1, 0, 9), (2, 2, 7), (3, 5, 5)):
        np.testing.assert_array_equal(source[s, :k], target[t, :k])
        assert not np.isclose(source[s, k:], target[t, k:]).any()
    # No two rows start equal otherwise (each sub-matrix has its own draw).
    rows = np.concatenate([source, target])
    distinct = {tuple(np.round(r[:5], 6)) for r in rows}
    assert len(distinct) == 6 + 7 - 4


def test_a_source_side_gradient_reaches_the_shared_slice_of_the_paired_target_row():
    layer = small_layer()
    target_before = np.asarray(layer.target.embeddings)
    optimizer = keras.optimizers.SGD(learning_rate=1.0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer.source(np.array([[0]])))  # source word 0 only
    optimizer.apply(tape.gradient(loss, layer.trainable_weights), layer.trainable_weights)
    change = np.asarray(layer.target.embeddings) - target_before
    # Source 0 is paired (lm, 9 shared features) with target 3.
    np.testing.assert_allclose(change[3, :9], -1.0, rtol=1e-6)
    np.testing.assert_array_equal(change[3, 9:], 0.0)  # its private slice: untouched
    np.testing.assert_array_equal(np.delete(change, 3, axis=0), 0.0)


def test_no_sharing_is_two_private_tables_and_full_sharing_one_table():
    layer = small_layer(ratios=(0, 0, 0))
    target_before = np.asarray(layer.target.embeddings)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer.source(np.arange(6)))
    gradients = tape.gradient(loss, layer.trainable_weights)
    keras.optimizers.SGD(1.0).apply(gradients, layer.trainable_weights)
    np.testing.assert_array_equal(np.asarray(layer.target.embeddings), target_before)
    assert layer.count_params() == (6 + 7) * 10

    # Three-way tying: every word paired with itself and λ = 1 — one table
    # for source, target input and (through a tied head) target output.
    tied = SharedPrivateEmbedding(WordPairs.identity(9), 4, sharing_ratios=(1, 1, 1))
    tied.build()
    np.testing.assert_array_equal(np.asarray(tied.source.embeddings),
                                  np.asarray(tied.target.embeddings))
    assert tied.count_params() == 9 * 4


def test_the_target_side_serves_tied_and_joint_heads_and_trains_the_shared_features():
    layer = small_layer()
    h = np.random.default_rng(0).normal(size=(2, 3, 10)).astype("float32")
    for head in (TiedSoftmaxHead(layer.target), JointEmbeddingHead(layer.target, joint_dim=6)):
        head.build((None, None, 10))
        logits = head(h)
        assert tuple(logits.shape) == (2, 3, 7)
        np.testing.assert_allclose(
            np.asarray(head.logits_for(h, np.array([3, 5]))), np.asarray(logits)[..., [3, 5]],
            rtol=1e-5, atol=1e-6)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.log_softmax(head(h))[..., 3])
        variables = {w.path.split("/")[-1]: w for w in layer.trainable_weights}
        gradient = tape.gradient(loss, variables["shared_lm"])
        assert np.abs(np.asarray(tf.convert_to_tensor(gradient))).sum() > 0
        # The head's own capacity does not count the embedding's variables.
        terms = head.output_capacity()["terms"]
        assert terms and not any("shared_private" in path for path, _ in terms)


def test_serialization_round_trip_keeps_pairs_and_tables(tmp_path):
    layer = small_layer()
    config = keras.saving.serialize_keras_object(layer)
    clone = keras.saving.deserialize_keras_object(config)
    clone.build()
    clone.set_weights(layer.get_weights())
    for side in ("source", "target"):
        np.testing.assert_array_equal(np.asarray(clone.table(side)), np.asarray(layer.table(side)))
    np.testing.assert_array_equal(clone.pairs.target_ids, layer.pairs.target_ids)
    assert clone.widths == layer.widths
    # A side alone serializes with its owner and comes back as that owner's side.
    side = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer.target))
    assert isinstance(side, SharedPrivateEmbeddingSide) and side.side == "target"
    # Pairs may be given as a file.
    path = layer.pairs.save(tmp_path / "pairs.tsv")
    from_file = SharedPrivateEmbedding(path, 10)
    assert from_file.source_vocabulary_size == 6 and from_file.target_vocabulary_size == 7


def test_a_model_holding_only_one_side_trains_and_saves_its_variables(tmp_path):
    layer = small_layer()
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, layer.source(ids))
    assert {id(w) for w in model.trainable_weights} == {id(w) for w in layer.trainable_weights}
    path = tmp_path / "side.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded.predict(np.array([[0, 4]]), verbose=0),
                                  model.predict(np.array([[0, 4]]), verbose=0))


@pytest.mark.parametrize("kwargs, message", [
    ({"sharing_ratios": (0.9, 0.7)}, "3 numbers in"),
    ({"sharing_ratios": (0.9, 0.7, 1.5)}, "3 numbers in"),
    ({"output_dim": 0}, "output_dim"),
    ({"pairs": [1, 2, 3]}, "must be a tf_outheads.data.WordPairs"),
])
def test_bad_arguments_are_refused(kwargs, message):
    arguments = {"pairs": synthetic_pairs((2, 1, 1), vocabulary_size=4), "output_dim": 8}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        SharedPrivateEmbedding(**arguments)


@pytest.mark.parametrize("ratios", [(0.9, 0.7, 0.5), (0, 0, 0), (1, 1, 1), (1, 0.5, 0)])
def test_lookup_without_the_table_equals_rows_of_the_table(ratios):
    layer = small_layer(ratios)
    ids = np.array([[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]])
    np.testing.assert_array_equal(np.asarray(layer.source(ids)),
                                  np.asarray(layer.source.embeddings)[ids])
    ids = np.array([6, 5, 4, 3, 2, 1, 0, 3])
    np.testing.assert_array_equal(np.asarray(layer.target(ids)),
                                  np.asarray(layer.target.embeddings)[ids])
    # Gradients of a lookup equal those of rows of the assembled table.
    weights = np.random.default_rng(0).normal(size=(8, 10)).astype("float32")
    gradients = []
    for rows in (lambda: layer.target(ids), lambda: tf.gather(layer.target.embeddings, ids)):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(rows() * weights)
        gradients.append([np.asarray(tf.convert_to_tensor(g)) if g is not None else None
                          for g in tape.gradient(loss, layer.trainable_weights)])
    for lookup_gradient, table_gradient in zip(*gradients):
        if table_gradient is None:
            assert lookup_gradient is None or not lookup_gradient.any()
        else:
            np.testing.assert_allclose(lookup_gradient, table_gradient, rtol=1e-6, atol=1e-6)
