"""Tests for `tf_outheads.ContinuousOutputHead` (continuous outputs, vMF scoring)."""

import keras
import mpmath
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import run_layer_test
from tf_outheads import ContinuousOutputHead
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.decoding import greedy_search
from tf_outheads.layers.heads import build_head, head_to_spec
from tf_outheads_zoo.lstm import LSTMSeq2Seq

VOCAB = 17
DIM = 6
HIDDEN = 8


def table(seed=0, vocab=VOCAB, dim=DIM):
    vectors = np.random.default_rng(seed).normal(size=(vocab, dim)).astype("float32")
    vectors[0] = 0.0  # PAD
    return vectors


def unit(rows):
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return np.where(norms > 0, rows / np.maximum(norms, 1e-12), 0.0)


@pytest.mark.parametrize("hidden_units", [None, 5], ids=["linear", "mlp"])
def test_layer_contract(hidden_units):
    run_layer_test(
        lambda: ContinuousOutputHead(VOCAB, DIM, target_vectors=table(),
                                     hidden_units=hidden_units),
        np.random.default_rng(1).normal(size=(2, 3, HIDDEN)).astype("float32"),
        (2, 3, DIM),
        expected_num_trainable_weights=2 if hidden_units is None else 4,
        expected_num_non_trainable_weights=1,
    )


def test_target_table_is_frozen_unit_norm_and_saved(tmp_path):
    head = ContinuousOutputHead(VOCAB, DIM, target_vectors=3.0 * table())
    head.build((None, HIDDEN))
    vectors = head.target_vectors().numpy()
    np.testing.assert_allclose(np.linalg.norm(vectors[1:], axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors[0], 0.0)
    assert not head.target_table.trainable
    assert all(w is not head.target_table for w in head.trainable_weights)
    # Restored by weights, not config.
    assert "target_vectors" not in head.get_config()
    clone = ContinuousOutputHead.from_config(head.get_config())
    clone.build((None, HIDDEN))
    clone.set_weights(head.get_weights())
    np.testing.assert_array_equal(clone.target_vectors().numpy(), vectors)


@pytest.mark.parametrize("scoring", ["posterior", "log_likelihood", "cosine"])
def test_scores_formulas_and_nearest_neighbour_argmax(scoring):
    head = ContinuousOutputHead(VOCAB, DIM, target_vectors=table(), scoring=scoring)
    h = np.random.default_rng(2).normal(size=(4, HIDDEN)).astype("float32")
    scores = head.scores(h).numpy().astype("float64")
    predicted = head(h).numpy().astype("float64")
    e = unit(table().astype("float64"))
    dots = predicted @ e.T
    kappa = np.linalg.norm(predicted, axis=1)
    if scoring == "posterior":
        expected = dots - np.log(np.exp(dots).sum(1, keepdims=True))
    elif scoring == "cosine":
        expected = dots / kappa[:, None]
    else:
        v = DIM / 2 - 1
        log_c = [float(v * mpmath.log(k) - (DIM / 2) * mpmath.log(2 * mpmath.pi)
                       - mpmath.log(mpmath.besseli(v, k))) for k in kappa]
        expected = dots + np.array(log_c)[:, None]
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    # Nearest neighbour by cosine is the arg-max of every scoring.
    np.testing.assert_array_equal(scores.argmax(1), (dots / kappa[:, None]).argmax(1))


def test_greedy_decoding_with_the_head_is_nearest_neighbour():
    head = ContinuousOutputHead(VOCAB, DIM, target_vectors=table())
    head.build((None, HIDDEN))
    cache = head.inference_cache()
    states = tf.constant(np.random.default_rng(3).normal(size=(3, 5, HIDDEN)).astype("float32"))

    def step_fn(ids_t, state):
        t = state["t"]
        h_t = tf.gather(states, t[0], axis=1)
        return head.scores(h_t, cache), {"t": t + 1}

    result = greedy_search(step_fn, {"t": tf.zeros((3,), tf.int32)}, batch_size=3,
                           max_length=4, min_length=4)
    predicted = head(states[:, :4]).numpy()
    cosine = unit(predicted) @ unit(table()).T
    cosine[..., EOS_ID] = -np.inf  # min_length blocks EOS
    np.testing.assert_array_equal(result.ids.numpy()[:, :4], cosine.argmax(-1))


def test_invalid_arguments():
    with pytest.raises(ValueError, match="output_dim"):
        ContinuousOutputHead(VOCAB, 0)
    with pytest.raises(ValueError, match="scoring"):
        ContinuousOutputHead(VOCAB, DIM, scoring="dot")
    with pytest.raises(ValueError, match=r"\(17, 6\)"):
        ContinuousOutputHead(VOCAB, DIM, target_vectors=np.zeros((VOCAB, DIM + 1)))
    bad = table()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        ContinuousOutputHead(VOCAB, DIM, target_vectors=bad)


def test_capacity_counts_trainable_weights_only():
    head = ContinuousOutputHead(1000, 300, target_vectors=None)
    head.build((None, 512))
    capacity = head.output_capacity()
    assert capacity["parameters"] == 512 * 300 + 300


def test_in_lstm_model_by_spec_with_keras_round_trip(tmp_path):
    spec = {"class_name": "continuous", "config": {"output_dim": DIM}}
    model = LSTMSeq2Seq(11, VOCAB, embedding_dim=8, hidden_dim=HIDDEN, num_layers=1,
                        dropout=0.0, head=spec)
    model.head.set_target_vectors(table())
    inputs = {"source_ids": np.array([[4, 5, 3]], "int32"),
              "target_in": np.array([[2, 7, 8]], "int32")}
    assert model(inputs).shape == (1, 3, DIM)
    assert head_to_spec(model.head)["class_name"] == "tf_outheads>ContinuousOutputHead"
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(loaded(inputs).numpy(), model(inputs).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(loaded.head.target_vectors().numpy(),
                                  model.head.target_vectors().numpy())
    rebuilt = build_head(head_to_spec(model.head), VOCAB, None)
    assert isinstance(rebuilt, ContinuousOutputHead) and rebuilt.output_dim == DIM
