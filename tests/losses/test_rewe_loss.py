"""Tests for `tf_outheads.losses.rewe` (ReWE_loss, Eq. 6; λ of Eq. 7 is Keras' loss_weights).

Hand-computed examples first, then numpy references in float64.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads import ReWEHead, ReWELoss, rewe_loss
from tf_outheads.losses.objective import Objective, StepOutputs
from tests.testing import step_loss

# Hand-computed: a (V = 6, m = 2) table; gold ids 4, 2, then padding; 1 and 3.
HAND_TABLE = np.array([[0.0, 0.0], [0.6, 0.8], [0.0, 2.0], [-1.0, 0.0], [3.0, 0.0],
                       [1.0, 1.0]], "float32")
HAND_IDS = np.array([[4, 2, 0], [1, 3, 0]], "int32")
# Per token, with e(4) = (3, 0), e(2) = (0, 2), e(1) = (.6, .8), e(3) = (−1, 0):
#   ê = (5, 0):     cos 1,     1 − cos = 0;          ‖ê − e‖² = 4
#   ê = (1, 1):     cos 1/√2,  1 − cos = 1 − 1/√2;   1 + 1 = 2
#   ê = (−.6, −.8): cos −1,    1 − cos = 2;          1.44 + 2.56 = 4
#   ê = (0, 3):     cos 0,     1 − cos = 1;          1 + 9 = 10
# and anything at the padded slots.
HAND_PREDICTIONS = np.array([[[5.0, 0.0], [1.0, 1.0], [7.0, -7.0]],
                             [[-0.6, -0.8], [0.0, 3.0], [2.0, 2.0]]], "float32")
HAND_COSINE = [0.0, 1.0 - 1.0 / np.sqrt(2.0), 2.0, 1.0]
HAND_SQUARED = [4.0, 2.0, 4.0, 10.0]

DIM = 8
VOCAB = 9
Y_TRUE = np.array([[4, 2, 8, 0, 0], [1, 3, 4, 7, 0]], "int32")
MASK = Y_TRUE != 0
DISTANCES = ["cosine", "mse"]


def make_table(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(VOCAB, DIM)) * rng.uniform(0.5, 2.0, (VOCAB, 1))).astype("float32")


TABLE = make_table()
Y_PRED = np.random.default_rng(1).normal(size=(2, 5, DIM)).astype("float32")


def reference_per_token(distance, y_pred, table, y_true=Y_TRUE):
    y_pred = np.asarray(y_pred, "float64")
    targets = np.asarray(table, "float64")[y_true]
    if distance == "cosine":
        loss = 1.0 - np.sum(y_pred * targets, -1) / (
            np.linalg.norm(y_pred, axis=-1) * np.linalg.norm(targets, axis=-1))
    else:
        loss = np.sum((y_pred - targets) ** 2, axis=-1)
    return np.where(y_true != 0, loss, 0.0)


# -- hand-computed values ----------------------------------------------------------------

@pytest.mark.parametrize("distance, per_token", [("cosine", HAND_COSINE), ("mse", HAND_SQUARED)],
                         ids=DISTANCES)
def test_hand_computed_mean_over_real_tokens(distance, per_token):
    expected = sum(per_token) / 4.0  # 4 real tokens; the 2 padded slots count for nothing
    loss = ReWELoss(distance, target_embeddings=HAND_TABLE)
    np.testing.assert_allclose(float(loss(HAND_IDS, HAND_PREDICTIONS)), expected, rtol=1e-6)
    np.testing.assert_allclose(float(rewe_loss(HAND_IDS, HAND_PREDICTIONS, HAND_TABLE, distance)),
                               expected, rtol=1e-6)


@pytest.mark.parametrize("distance, per_token", [("cosine", HAND_COSINE), ("mse", HAND_SQUARED)],
                         ids=DISTANCES)
def test_hand_computed_sentence_reduction(distance, per_token):
    # Sum over each sentence's tokens, mean over the 2 sentences.
    value = rewe_loss(HAND_IDS, HAND_PREDICTIONS, HAND_TABLE, distance, reduction="sentence")
    np.testing.assert_allclose(float(value), sum(per_token) / 2.0, rtol=1e-6)


def test_eq7_is_keras_loss_weights():
    # NLL + λ·ReWE through compile(loss_weights=...): the weighted sum, λ = 20.
    from keras.src.trainers.compile_utils import CompileLoss

    from tf_outheads import MaskedSequenceCrossEntropy
    logits = np.random.default_rng(2).normal(size=(2, 3, 6)).astype("float32")
    losses = {"logits": MaskedSequenceCrossEntropy(), "rewe": ReWELoss(target_embeddings=HAND_TABLE)}
    compiled = CompileLoss(losses, {"logits": 1.0, "rewe": 20.0})
    y_pred = {"logits": logits, "rewe": HAND_PREDICTIONS}
    total = compiled({"logits": HAND_IDS, "rewe": HAND_IDS}, y_pred)
    nll = float(MaskedSequenceCrossEntropy()(HAND_IDS, logits))
    np.testing.assert_allclose(float(total), nll + 20.0 * sum(HAND_COSINE) / 4.0, rtol=1e-6)


# -- numpy references, padding -------------------------------------------------------------

@pytest.mark.parametrize("distance", DISTANCES)
def test_matches_numpy(distance):
    value = ReWELoss(distance, target_embeddings=TABLE)(Y_TRUE, Y_PRED)
    expected = reference_per_token(distance, Y_PRED, TABLE).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


@pytest.mark.parametrize("distance", DISTANCES)
def test_padding_contributes_nothing_and_gets_zero_gradient(distance):
    garbage = Y_PRED.copy()
    garbage[0, 3] = 1e6
    garbage[0, 4] = np.nan
    garbage[1, 4, :3] = -np.inf
    loss = ReWELoss(distance, target_embeddings=TABLE)
    variable = tf.Variable(garbage)
    with tf.GradientTape() as tape:
        value = loss(Y_TRUE, variable)
    np.testing.assert_allclose(float(value), float(loss(Y_TRUE, Y_PRED)), rtol=1e-7)
    gradient = tape.gradient(value, variable).numpy()
    assert np.all(gradient[~MASK] == 0.0)
    assert np.all(np.abs(gradient[MASK]).sum(-1) > 0.0)


@pytest.mark.parametrize("distance", DISTANCES)
def test_sample_weight_per_sentence(distance):
    weights = np.array([0.5, 2.0], "float32")
    value = ReWELoss(distance, target_embeddings=TABLE)(Y_TRUE, Y_PRED, sample_weight=weights)
    expected = (reference_per_token(distance, Y_PRED, TABLE) * weights[:, None]).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


@pytest.mark.parametrize("distance", DISTANCES)
def test_float16_predictions_computed_in_float32(distance):
    y_pred = keras.ops.cast(Y_PRED, "float16")
    upcast = keras.ops.convert_to_numpy(keras.ops.cast(y_pred, "float32"))
    value = ReWELoss(distance, target_embeddings=TABLE)(Y_TRUE, y_pred)
    assert value.dtype == tf.float32
    expected = reference_per_token(distance, upcast, TABLE).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)


# -- where the table comes from ------------------------------------------------------------

def embedding_head():
    embedding = keras.layers.Embedding(VOCAB, DIM)
    embedding.build((None,))
    embedding.embeddings.assign(TABLE)
    head = ReWEHead(DIM, hidden_dim=4, embedding=embedding)
    head.build((None, 3))
    return head, embedding


@pytest.mark.parametrize("distance", DISTANCES)
def test_in_a_model_the_head_supplies_the_table_without_gradient_into_it(distance):
    head, embedding = embedding_head()
    loss = ReWELoss(distance)
    prediction = tf.Variable(Y_PRED)
    with tf.GradientTape(persistent=True) as tape:
        outputs = StepOutputs(None, head, head_output=prediction)
        total, tokens = Objective(loss, None, {"logits": head})(Y_TRUE, outputs)
        value = total / tokens
    expected = reference_per_token(distance, Y_PRED, TABLE).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)
    assert tape.gradient(value, embedding.embeddings) is None  # stop-gradient targets
    assert np.abs(tape.gradient(value, prediction).numpy()).sum() > 0
    # The live table: a new embedding value gives a new loss.
    embedding.embeddings.assign(TABLE[::-1])
    total, tokens = step_loss(loss, Y_TRUE, head, head_output=Y_PRED)
    assert not np.isclose(total / tokens, expected, rtol=1e-4)


def test_as_the_only_loss_of_a_continuous_output_is_contrastive_b():
    # ReWE without the categorical output: the loss of the model's own head.
    head, _ = embedding_head()
    total, tokens = step_loss(ReWELoss("cosine"), Y_TRUE, head, head_output=Y_PRED)
    expected = reference_per_token("cosine", Y_PRED, TABLE).sum() / MASK.sum()
    np.testing.assert_allclose(total / tokens, expected, rtol=1e-6)


def test_missing_table_is_a_clear_error():
    with pytest.raises(ValueError, match="compile a model.*Received: target_embeddings=None"):
        ReWELoss()(Y_TRUE, Y_PRED)


def test_invalid_distance():
    with pytest.raises(ValueError, match="Received: distance='l1'"):
        ReWELoss("l1")
    with pytest.raises(ValueError, match="Received: distance='l1'"):
        rewe_loss(Y_TRUE, Y_PRED, TABLE, distance="l1")


@pytest.mark.parametrize("distance", DISTANCES)
def test_config_round_trip(distance):
    loss = ReWELoss(distance, pad_id=3, target_embeddings=TABLE, reduction="sum", name="aux")
    config = loss.get_config()
    assert config == {"name": "aux", "reduction": "sum", "pad_id": 3, "distance": distance}
    serialized = keras.saving.serialize_keras_object(loss)
    assert serialized["registered_name"] == "tf_outheads>ReWELoss"
    revived = keras.saving.deserialize_keras_object(serialized)
    assert type(revived) is ReWELoss and revived.get_config() == config
    assert revived.target_embeddings is None  # data, not config
    assert ReWELoss().name == "rewe_loss" and ReWELoss().distance == "cosine"
