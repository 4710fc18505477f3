"""Tests for `tf_outheads.losses.embedding_regression` (cosine / squared-error
regression of the gold word's vector, and the shared masking and reductions).

Expected values are computed independently with numpy in float64.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.losses.embedding_regression import CosineEmbeddingLoss
from tf_outheads.losses.embedding_regression import EmbeddingTargetLoss
from tf_outheads.losses.embedding_regression import MSEEmbeddingLoss
from tf_outheads.losses.embedding_regression import cosine_embedding_loss
from tf_outheads.losses.embedding_regression import mse_embedding_loss
from tests.testing import step_loss

DIM = 8
VOCAB_SIZE = 6
Y_TRUE = np.array([[4, 2, 0, 0], [1, 3, 4, 0]], "int32")
MASK = Y_TRUE != 0
LOSSES = {"cosine": CosineEmbeddingLoss, "mse": MSEEmbeddingLoss}
LOSS_IDS = list(LOSSES)


def make_table(seed=0):
    """(V, m) float32 rows of assorted norms (MSE uses them as given)."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(VOCAB_SIZE, DIM)) * rng.uniform(0.5, 2.0, (VOCAB_SIZE, 1))
            ).astype("float32")


def make_predictions(seed=1, shape=(2, 4, DIM)):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def reference_per_token(kind, y_pred, table, y_true=Y_TRUE):
    """(B, T) float64 losses, padding set to 0."""
    y_pred = np.asarray(y_pred, "float64")
    targets = np.asarray(table, "float64")[y_true]
    if kind == "cosine":
        cosine = np.sum(y_pred * targets, -1) / (
            np.linalg.norm(y_pred, axis=-1) * np.linalg.norm(targets, axis=-1))
        loss = 1.0 - cosine
    else:
        loss = np.sum((y_pred - targets) ** 2, axis=-1)
    return np.where(y_true != 0, loss, 0.0)


TABLE = make_table()
Y_PRED = make_predictions()


# -- the per-token functions ------------------------------------------------------------

def test_cosine_hand_computed():
    target = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]], "float32")
    prediction = np.array([[5.0, 0.0], [1.0, 1.0], [-3.0, -4.0]], "float32")
    # cos = 1, 1/√2, −1.
    expected = [0.0, 1.0 - 1.0 / np.sqrt(2.0), 2.0]
    value = cosine_embedding_loss(target, prediction)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-7)


def test_mse_is_summed_over_features():
    target = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], "float32")
    prediction = np.array([[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]], "float32")
    value = mse_embedding_loss(target, prediction)
    # ‖ê − e‖²: 1 + 1 + 1 and 4 + 4 + 4 — the ReWE code's sum, not the mean (1, 4).
    np.testing.assert_allclose(value, [3.0, 12.0], rtol=1e-6)


@pytest.mark.parametrize("kind", LOSS_IDS)
def test_per_token_functions_match_numpy(kind):
    function = cosine_embedding_loss if kind == "cosine" else mse_embedding_loss
    targets = TABLE[Y_TRUE].astype("float64")
    predictions = Y_PRED.astype("float64")
    if kind == "cosine":
        expected = 1.0 - np.sum(predictions * targets, -1) / (
            np.linalg.norm(predictions, axis=-1) * np.linalg.norm(targets, axis=-1))
    else:
        expected = np.sum((predictions - targets) ** 2, axis=-1)
    np.testing.assert_allclose(function(TABLE[Y_TRUE], Y_PRED), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("zero", ["prediction", "target", "both"])
def test_cosine_is_safe_at_zero_vectors(zero):
    target = np.array([[0.6, 0.8]], "float32") * (zero == "prediction")
    prediction = tf.Variable(np.array([[3.0, -1.0]], "float32") * (zero == "target"))
    with tf.GradientTape() as tape:
        value = cosine_embedding_loss(target, prediction)
    gradient = tape.gradient(value, prediction).numpy()
    np.testing.assert_allclose(value, [1.0])  # cos taken as 0
    assert np.all(np.isfinite(gradient))


def test_cosine_gradient_matches_numerical_differentiation():
    target = np.array([0.3, -1.2, 2.0, 0.5])
    point = np.array([1.0, 0.4, -0.7, 2.2])

    def reference(prediction):
        return 1.0 - tf.reduce_sum(prediction * target) / (tf.norm(prediction) * np.linalg.norm(
            target))

    _, (numerical,) = tf.test.compute_gradient(reference, [tf.constant(point)])
    variable = tf.Variable(point.astype("float32"))
    with tf.GradientTape() as tape:
        value = cosine_embedding_loss(target.astype("float32"), variable)
    np.testing.assert_allclose(tape.gradient(value, variable).numpy(), numerical[0],
                               rtol=1e-4, atol=1e-6)


# -- the Keras classes: values, padding, reductions ---------------------------------------

@pytest.mark.parametrize("kind", LOSS_IDS)
def test_unweighted_is_token_mean(kind):
    value = LOSSES[kind](target_embeddings=TABLE)(Y_TRUE, Y_PRED)
    assert tuple(value.shape) == ()
    expected = reference_per_token(kind, Y_PRED, TABLE)
    np.testing.assert_allclose(float(value), expected.sum() / MASK.sum(), rtol=1e-6)
    # The per-token mean (÷ 5 real tokens), not the per-padded-slot mean (÷ 8).
    assert not np.isclose(float(value), expected.sum() / MASK.size, rtol=1e-3)


def test_mse_uses_the_table_as_given_cosine_ignores_scale():
    rescaled = TABLE * np.array([1.0, 3.0, 0.2, 5.0, 0.5, 1.0], "float32")[:, None]
    cosine = CosineEmbeddingLoss
    np.testing.assert_allclose(float(cosine(target_embeddings=rescaled)(Y_TRUE, Y_PRED)),
                               float(cosine(target_embeddings=TABLE)(Y_TRUE, Y_PRED)), rtol=1e-6)
    value = float(MSEEmbeddingLoss(target_embeddings=rescaled)(Y_TRUE, Y_PRED))
    expected = reference_per_token("mse", Y_PRED, rescaled).sum() / MASK.sum()
    np.testing.assert_allclose(value, expected, rtol=1e-6)


def garbage_at_padding(y_pred):
    garbage = y_pred.copy()
    garbage[0, 2] = 1e6
    garbage[0, 3] = np.nan
    garbage[1, 3, :3] = -np.inf
    return garbage


@pytest.mark.parametrize("kind", LOSS_IDS)
def test_padding_contributes_nothing_and_gets_zero_gradient(kind):
    loss = LOSSES[kind](target_embeddings=TABLE)
    variable = tf.Variable(garbage_at_padding(Y_PRED))
    with tf.GradientTape() as tape:
        value = loss(Y_TRUE, variable)
    np.testing.assert_allclose(float(value), float(loss(Y_TRUE, Y_PRED)), rtol=1e-7)
    gradient = tape.gradient(value, variable).numpy()
    assert np.all(gradient[~MASK] == 0.0)
    assert np.all(np.abs(gradient[MASK]).sum(axis=-1) > 0.0)


@pytest.mark.parametrize("kind", LOSS_IDS)
@pytest.mark.parametrize("reduction", ["sum", "none", "sum_over_batch_size"])
def test_reduction_modes(kind, reduction):
    loss = LOSSES[kind](reduction=reduction, target_embeddings=TABLE)
    value = keras.ops.convert_to_numpy(loss(Y_TRUE, Y_PRED))
    per_token = reference_per_token(kind, Y_PRED, TABLE)
    expected = {
        "sum": per_token.sum(),
        "none": per_token,
        "sum_over_batch_size": per_token.sum() / MASK.sum(),
    }[reduction]
    np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-6)


SENTENCE_WEIGHT = np.array([0.5, 2.0])
TOKEN_WEIGHT = np.array([[0.5, 3.0, 9.0, 9.0], [2.0, 0.0, 1.5, 9.0]])


@pytest.mark.parametrize("kind", LOSS_IDS)
@pytest.mark.parametrize(
    "sample_weight, token_weight",
    [(SENTENCE_WEIGHT, SENTENCE_WEIGHT[:, None]),
     (SENTENCE_WEIGHT[:, None], SENTENCE_WEIGHT[:, None]),
     (TOKEN_WEIGHT, TOKEN_WEIGHT)],
    ids=["per_sentence", "per_sentence_2d", "per_token"])
def test_sample_weight(kind, sample_weight, token_weight):
    value = LOSSES[kind](target_embeddings=TABLE)(
        Y_TRUE, Y_PRED, sample_weight=sample_weight.astype("float32"))
    expected = (reference_per_token(kind, Y_PRED, TABLE) * token_weight).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


@pytest.mark.parametrize("kind", LOSS_IDS)
def test_zero_sample_weight(kind):
    loss = LOSSES[kind](target_embeddings=TABLE)
    value = loss(Y_TRUE, Y_PRED, sample_weight=np.array([0.0, 1.0]))
    per_token = reference_per_token(kind, Y_PRED, TABLE)
    np.testing.assert_allclose(float(value), per_token[1].sum() / MASK.sum(), rtol=1e-6)
    assert float(loss(Y_TRUE, Y_PRED, sample_weight=np.zeros(2))) == 0.0


@pytest.mark.parametrize("kind", LOSS_IDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_inputs_computed_in_float32(kind, dtype):
    y_pred = keras.ops.cast(Y_PRED * 10.0, dtype)
    upcast = keras.ops.convert_to_numpy(keras.ops.cast(y_pred, "float32"))
    loss = LOSSES[kind](target_embeddings=TABLE)
    value = loss(Y_TRUE, y_pred)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(float(value), float(loss(Y_TRUE, upcast)), rtol=1e-6)
    expected = reference_per_token(kind, upcast, TABLE).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


# -- the head protocol -------------------------------------------------------------------

class FakeHead:
    def target_vectors(self):
        return tf.constant(TABLE)


@pytest.mark.parametrize("kind", LOSS_IDS)
@pytest.mark.parametrize("sample_weight", [None, SENTENCE_WEIGHT, TOKEN_WEIGHT],
                         ids=["unweighted", "per_sentence", "per_token"])
def test_in_a_model_step_reduces_like_call(kind, sample_weight):
    # The table comes from the head; sum / tokens is the "sum_over_batch_size" mean
    # and the sum is the "sum" reduction of a standalone call.
    total, tokens = step_loss(LOSSES[kind](), Y_TRUE, FakeHead(), head_output=Y_PRED,
                              sample_weight=sample_weight)
    assert tokens == MASK.sum()
    standalone = LOSSES[kind](target_embeddings=TABLE)
    np.testing.assert_allclose(total / tokens, float(standalone(
        Y_TRUE, Y_PRED, sample_weight=sample_weight)), rtol=1e-6, atol=1e-7)
    summed = LOSSES[kind](target_embeddings=TABLE, reduction="sum")
    np.testing.assert_allclose(total, float(summed(Y_TRUE, Y_PRED, sample_weight=sample_weight)),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kind", LOSS_IDS)
def test_missing_table_is_a_clear_error(kind):
    with pytest.raises(ValueError, match="target_embeddings=.*compile a model"):
        LOSSES[kind]()(Y_TRUE, Y_PRED)


def test_base_class_needs_per_token():
    with pytest.raises(NotImplementedError):
        EmbeddingTargetLoss(target_embeddings=TABLE)(Y_TRUE, Y_PRED)


# -- configuration -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", LOSS_IDS)
def test_config_round_trip(kind):
    cls = LOSSES[kind]
    loss = cls(pad_id=3, target_embeddings=TABLE, reduction="sum", name="regression")
    config = loss.get_config()
    assert config == {"name": "regression", "reduction": "sum", "pad_id": 3}
    revived = cls.from_config(config)
    assert revived.get_config() == config and revived.target_embeddings is None
    serialized = keras.saving.serialize_keras_object(loss)
    assert serialized["registered_name"] == f"tf_outheads>{cls.__name__}"
    deserialized = keras.saving.deserialize_keras_object(serialized)
    assert type(deserialized) is cls
    assert deserialized.get_config() == config


def test_default_names():
    assert CosineEmbeddingLoss().name == "cosine_embedding_loss"
    assert MSEEmbeddingLoss().name == "mse_embedding_loss"
