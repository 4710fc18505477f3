"""Tests for `tf_outheads.ReWEHead` (ReWE, Jauregi Unanue et al. 2019, Eq. 5)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import run_layer_test
from tf_outheads import ReWEHead
from tf_outheads.layers.rewe_head import build_rewe_head, rewe_to_spec

VOCAB = 13
DIM = 6      # m, the embedding size regressed
HIDDEN = 10  # d_h, the decoder output size
UNITS = 5    # the ReLU layer (the paper: 200)


def make_embedding(vocab=VOCAB, dim=DIM, seed=0):
    embedding = keras.layers.Embedding(vocab, dim, name="target_embedding")
    embedding.build((None,))
    embedding.embeddings.assign(
        np.random.default_rng(seed).normal(size=(vocab, dim)).astype("float32"))
    return embedding


def table(seed=3):
    return np.random.default_rng(seed).normal(size=(VOCAB, DIM)).astype("float32") * 3.0


def hidden_states(seed=1, shape=(2, 4, HIDDEN)):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize("targets", ["input_embedding", "pretrained"])
def test_layer_contract(targets):
    embedding = make_embedding()

    def factory():
        if targets == "pretrained":
            return ReWEHead(DIM, hidden_dim=UNITS, targets="pretrained", vocabulary_size=VOCAB,
                            target_vectors=table())
        return ReWEHead(DIM, hidden_dim=UNITS, embedding=embedding)

    run_layer_test(factory, hidden_states(), (2, 4, DIM), expected_num_trainable_weights=4,
                   expected_num_non_trainable_weights=1 if targets == "pretrained" else 0)


def test_output_is_eq5_two_linear_layers_with_relu_between():
    head = ReWEHead(DIM, hidden_dim=UNITS, embedding=make_embedding())
    h = hidden_states()
    head.build(h.shape)
    rng = np.random.default_rng(7)
    for weight in head.weights:  # non-zero biases too
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    w1, b1 = head.hidden_layer.kernel.numpy(), head.hidden_layer.bias.numpy()
    w2, b2 = head.output_layer.kernel.numpy(), head.output_layer.bias.numpy()
    assert w1.shape == (HIDDEN, UNITS) and w2.shape == (UNITS, DIM)
    h64 = h.astype("float64")
    expected = np.maximum(h64 @ w1 + b1, 0.0) @ w2 + b2  # W2·ReLU(W1·s + b1) + b2
    assert (h64 @ w1 + b1 < 0).any()  # the ReLU is exercised
    np.testing.assert_allclose(head(h).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_input_embedding_targets_are_the_embedding_under_stop_gradient():
    embedding = make_embedding()
    head = ReWEHead(DIM, hidden_dim=UNITS, embedding=embedding)
    head.build((None, HIDDEN))
    with tf.GradientTape() as tape:
        vectors = head.target_vectors()
        total = tf.reduce_sum(vectors * 2.0)
    np.testing.assert_array_equal(vectors.numpy(), embedding.embeddings.numpy())
    assert vectors.dtype == tf.float32
    assert tape.gradient(total, embedding.embeddings) is None
    # Read, not owned: the embedding is no weight of the head.
    assert all(w is not embedding.embeddings for w in head.weights)
    assert len(head.weights) == 4
    embedding.embeddings.assign(embedding.embeddings * 2.0)  # follows the live table
    np.testing.assert_array_equal(head.target_vectors().numpy(), embedding.embeddings.numpy())


def test_pretrained_table_is_frozen_as_given_and_saved_with_weights():
    vectors = table()
    head = ReWEHead(DIM, hidden_dim=UNITS, targets="pretrained", vocabulary_size=VOCAB)
    head.build((None, HIDDEN))
    np.testing.assert_array_equal(head.target_vectors().numpy(), 0.0)
    head.set_target_vectors(vectors)
    # Not normalised: MSE regresses the rows as given.
    np.testing.assert_array_equal(head.target_vectors().numpy(), vectors)
    assert not head.target_table.trainable
    assert all(w is not head.target_table for w in head.trainable_weights)
    assert "target_vectors" not in head.get_config()
    clone = ReWEHead.from_config(head.get_config())
    clone.build((None, HIDDEN))
    clone.set_weights(head.get_weights())
    np.testing.assert_array_equal(clone.target_vectors().numpy(), vectors)


def test_predicted_word_is_the_input_embedding_of_the_argmax_word():
    # Contrastive A (supplementary C): e = E[argmax logits], no weights of its own.
    embedding = make_embedding()
    head = ReWEHead(DIM, embedding=embedding, prediction="predicted_word")
    head.build((None, None, HIDDEN))
    assert head.weights == [] and head.needs_logits
    predicted = np.array([[3, 7, 7], [1, 12, 0]])
    logits = tf.one_hot(predicted, VOCAB) * 5.0 + 0.1
    with tf.GradientTape() as tape:
        vectors = head(hidden_states(shape=(2, 3, HIDDEN)), logits=logits)
        total = tf.reduce_sum(vectors)
    np.testing.assert_array_equal(vectors.numpy(), embedding.embeddings.numpy()[predicted])
    # The only gradient path: the rows of E of the predicted words.
    gradient = tf.convert_to_tensor(tape.gradient(total, embedding.embeddings)).numpy()
    rows_with_gradient = np.flatnonzero(np.abs(gradient).sum(1))
    np.testing.assert_array_equal(rows_with_gradient, np.unique(predicted))
    with pytest.raises(ValueError, match="Received: logits=None"):
        head(hidden_states())


def test_mixed_precision_outputs_float16_table_float32():
    head = ReWEHead(DIM, hidden_dim=UNITS, embedding=make_embedding(), dtype="mixed_float16")
    output = head(hidden_states())
    assert output.dtype == tf.float16
    assert head.hidden_layer.kernel.dtype == tf.float32
    assert head.target_vectors().dtype == tf.float32


@pytest.mark.parametrize("kwargs, message", [
    ({"embedding_dim": 0}, "Received: embedding_dim=0"),
    ({"hidden_dim": 2.5}, "Received: hidden_dim=2.5"),
    ({"targets": "output_embedding"}, "Received: targets='output_embedding'"),
    ({"prediction": "sampled"}, "Received: prediction='sampled'"),
    ({"embedding": None}, "Received: embedding=None"),
    ({"embedding_dim": DIM + 1}, rf"embedding_dim={DIM + 1}, embedding.output_dim={DIM}"),
    ({"targets": "pretrained", "embedding": None}, "Received: vocabulary_size=None"),
    ({"targets": "pretrained", "prediction": "predicted_word"},
     "Received: prediction='predicted_word', targets='pretrained'"),
    ({"target_vectors": np.zeros((VOCAB, DIM))}, "Received: targets='input_embedding'"),
    ({"targets": "pretrained", "target_vectors": np.zeros((VOCAB, DIM + 1))},
     r"Received: target_vectors of shape \(13, 7\)"),
    ({"targets": "pretrained", "target_vectors": np.full((VOCAB, DIM), np.nan)},
     "non-finite"),
], ids=["dim_zero", "hidden_float", "targets", "prediction", "no_embedding", "dim_mismatch",
        "pretrained_no_vocabulary", "predicted_word_pretrained", "vectors_wrong_targets",
        "vectors_shape", "vectors_nan"])
def test_invalid_arguments(kwargs, message):
    arguments = {"embedding_dim": DIM, "hidden_dim": UNITS, "embedding": make_embedding()}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ReWEHead(**arguments)


def test_set_target_vectors_needs_the_pretrained_table():
    head = ReWEHead(DIM, embedding=make_embedding())
    with pytest.raises(ValueError, match="Received: targets='input_embedding'"):
        head.set_target_vectors(table())


# -- how a model builds it ---------------------------------------------------------------

@pytest.mark.parametrize("spec", [None, False])
def test_build_rewe_head_none(spec):
    assert build_rewe_head(spec, VOCAB, make_embedding()) is None


def test_build_rewe_head_defaults_regress_the_model_embedding():
    embedding = make_embedding()
    head = build_rewe_head(True, VOCAB, embedding)
    assert (head.embedding_dim, head.hidden_dim, head.targets, head.prediction) == (
        DIM, 200, "input_embedding", "regression")
    assert head.embedding is embedding and head.name == "rewe"


def test_build_rewe_head_from_config_and_spec_round_trip():
    embedding = make_embedding()
    head = build_rewe_head({"hidden_dim": UNITS, "targets": "pretrained", "embedding_dim": 4},
                           VOCAB, embedding)
    assert (head.hidden_dim, head.embedding_dim, head.vocabulary_size) == (UNITS, 4, VOCAB)
    spec = rewe_to_spec(head)
    assert spec["class_name"] == "tf_outheads>ReWEHead" and "embedding" not in spec["config"]
    rebuilt = build_rewe_head(spec, VOCAB, embedding)
    assert rewe_to_spec(rebuilt) == spec


def test_build_rewe_head_refuses_a_head_reading_another_embedding():
    with pytest.raises(ValueError, match="config or spec dict"):
        build_rewe_head(ReWEHead(DIM, embedding=make_embedding()), VOCAB, make_embedding())
    with pytest.raises(ValueError, match="Received: rewe='yes'"):
        build_rewe_head("yes", VOCAB, make_embedding())


def test_spec_refusals_name_the_argument_for_both_auxiliary_heads():
    """The ReWE and selection builders read their specs with one helper
    (`tf_outheads.validation.spec_class_and_config`): bad values are refused by name,
    the class's own name is an alias, and an unknown class name is refused."""
    from tf_outheads.layers.selection_head import build_selection_head

    embedding = make_embedding()
    with pytest.raises(ValueError, match=r"`rewe` must be None, True, a ReWEHead config"):
        build_rewe_head("cosine", VOCAB, embedding)
    with pytest.raises(ValueError, match=r"Unknown ReWE head 'nope'\. Received: rewe="):
        build_rewe_head({"class_name": "nope"}, VOCAB, embedding)
    assert isinstance(build_rewe_head({"class_name": "rewe", "config": {"hidden_dim": UNITS}},
                                      VOCAB, embedding), ReWEHead)
    with pytest.raises(ValueError, match=r"`selection` must be None, True, a "
                                         r"VocabularySelectionHead config"):
        build_selection_head(3, VOCAB)
    with pytest.raises(ValueError, match=r"Unknown selection head 'ReWEHead'\. "
                                         r"Received: selection="):
        build_selection_head({"class_name": "ReWEHead"}, VOCAB)
    head = build_selection_head({"class_name": "VocabularySelectionHead",
                                 "config": {"pooling": "state_max"}}, VOCAB)
    assert (head.vocabulary_size, head.pooling) == (VOCAB, "state_max")
