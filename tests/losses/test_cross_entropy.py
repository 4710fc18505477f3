"""Tests for `tf_outheads.losses.cross_entropy` (function + Keras loss class).

Expected values are computed independently with numpy in float64.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import masked_sequence_cross_entropy

VOCAB_SIZE = 5
# Row 0 has two padding positions, row 1 one; ids 0 (= PAD) elsewhere never.
Y_TRUE = np.array([[4, 2, 0, 0], [1, 3, 4, 0]], "int32")
MASK = (Y_TRUE != 0).astype("float64")


def random_logits(shape=(2, 4, VOCAB_SIZE), seed=0, scale=1.0):
    return (scale * np.random.default_rng(seed).normal(size=shape)).astype("float32")


def reference_per_token(y_true, logits, label_smoothing=0.0):
    """(B, T) token losses in float64: (1 − ε)(−log p(y)) + ε · mean_v(−log p(v))."""
    logits = np.asarray(logits, "float64")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, y_true[..., None], axis=-1)[..., 0]
    return (1.0 - label_smoothing) * nll + label_smoothing * -log_probs.mean(axis=-1)


def reference_loss(y_true, logits, label_smoothing=0.0, sample_weight=None):
    """Σ w · mask · loss / Σ mask: the per-token mean over real tokens."""
    mask = (y_true != 0).astype("float64")
    weight = mask if sample_weight is None else mask * sample_weight
    per_token = reference_per_token(y_true, logits, label_smoothing)
    return (per_token * weight).sum() / mask.sum()


def test_hand_computed_value():
    # Two real tokens with uniform logits over 4 words, one with a sure win.
    y_true = np.array([[1, 2, 0]])
    logits = np.array(
        [[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 100.0, 0.0], [9.0, -9.0, 3.0, 1.0]]], "float32"
    )
    expected = (np.log(4.0) + 0.0) / 2.0  # the padded third position is ignored
    np.testing.assert_allclose(masked_sequence_cross_entropy(y_true, logits), expected, rtol=1e-6)
    np.testing.assert_allclose(MaskedSequenceCrossEntropy()(y_true, logits), expected, rtol=1e-6)


def test_matches_numpy_reference():
    logits = random_logits()
    value = masked_sequence_cross_entropy(Y_TRUE, logits)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    assert tuple(value.shape) == ()
    np.testing.assert_allclose(value, reference_loss(Y_TRUE, logits), rtol=1e-6)


@pytest.mark.parametrize("label_smoothing", [0.1, 0.3])
def test_label_smoothing_formula(label_smoothing):
    logits = random_logits()
    expected = reference_loss(Y_TRUE, logits, label_smoothing)
    assert not np.isclose(expected, reference_loss(Y_TRUE, logits))
    np.testing.assert_allclose(
        masked_sequence_cross_entropy(Y_TRUE, logits, label_smoothing), expected, rtol=1e-6
    )
    np.testing.assert_allclose(
        MaskedSequenceCrossEntropy(label_smoothing)(Y_TRUE, logits), expected, rtol=1e-6
    )


def test_label_smoothing_uniform_prior_over_whole_vocabulary():
    # With uniform logits every word has −log p = log V, smoothing changes nothing.
    logits = np.zeros((2, 4, VOCAB_SIZE), "float32")
    value = masked_sequence_cross_entropy(Y_TRUE, logits, label_smoothing=0.4)
    np.testing.assert_allclose(value, np.log(VOCAB_SIZE), rtol=1e-6)


@pytest.mark.parametrize("loss", ["function", "class"])
def test_padding_contributes_nothing(loss):
    logits = random_logits()
    garbage = logits.copy()
    garbage[Y_TRUE == 0] = random_logits(seed=7, scale=1e3)[Y_TRUE == 0]
    compute = masked_sequence_cross_entropy if loss == "function" else MaskedSequenceCrossEntropy()
    np.testing.assert_allclose(compute(Y_TRUE, garbage), compute(Y_TRUE, logits), rtol=1e-6)


@pytest.mark.parametrize("loss", ["function", "class"])
def test_non_finite_logits_at_padding_do_not_leak(loss):
    logits = random_logits()
    logits[0, 2:] = np.inf
    logits[1, 3, 0] = np.nan
    compute = masked_sequence_cross_entropy if loss == "function" else MaskedSequenceCrossEntropy()
    np.testing.assert_allclose(compute(Y_TRUE, logits), reference_loss(Y_TRUE, random_logits()), rtol=1e-6)


@pytest.mark.parametrize("loss", ["function", "class"])
def test_gradient_is_exactly_zero_at_padding(loss):
    logits = tf.Variable(random_logits(scale=3.0))
    compute = masked_sequence_cross_entropy if loss == "function" else MaskedSequenceCrossEntropy()
    with tf.GradientTape() as tape:
        value = compute(Y_TRUE, logits)
    gradient = tape.gradient(value, logits).numpy()
    assert np.all(gradient[Y_TRUE == 0] == 0.0)
    assert np.all(np.abs(gradient[Y_TRUE != 0]).sum(axis=-1) > 0.0)
    # d loss / d logits = (softmax − onehot) / #tokens at real positions.
    log_probs = np.asarray(ops.log_softmax(logits, axis=-1))
    expected = (np.exp(log_probs) - np.eye(VOCAB_SIZE)[Y_TRUE]) / MASK.sum()
    np.testing.assert_allclose(gradient[Y_TRUE != 0], expected[Y_TRUE != 0], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_class_equals_function_per_token_mean(label_smoothing):
    logits = random_logits()
    from_class = MaskedSequenceCrossEntropy(label_smoothing)(Y_TRUE, logits)
    from_function = masked_sequence_cross_entropy(Y_TRUE, logits, label_smoothing)
    np.testing.assert_allclose(from_class, from_function, rtol=1e-6)
    # The per-token mean (÷ 5 real tokens), not the per-padded-slot mean (÷ 8).
    per_token = reference_per_token(Y_TRUE, logits, label_smoothing)
    per_slot_mean = (per_token * MASK).sum() / MASK.size
    assert not np.isclose(from_class, per_slot_mean, rtol=1e-3)
    np.testing.assert_allclose(from_class, (per_token * MASK).sum() / MASK.sum(), rtol=1e-6)


@pytest.mark.parametrize(
    "reduction", ["sum", "none", "sum_over_batch_size"]
)
def test_reduction_modes(reduction):
    logits = random_logits()
    value = ops.convert_to_numpy(MaskedSequenceCrossEntropy(reduction=reduction)(Y_TRUE, logits))
    per_token = reference_per_token(Y_TRUE, logits) * MASK
    expected = {
        "sum": per_token.sum(),
        "none": per_token,
        "sum_over_batch_size": per_token.sum() / MASK.sum(),
    }[reduction]
    np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "weight_shape", [(2,), (2, 1), (2, 4)], ids=["per_sentence", "per_sentence_2d", "per_token"]
)
def test_sample_weight(weight_shape):
    logits = random_logits()
    sentence_weight = np.array([0.5, 2.0])
    sample_weight = np.broadcast_to(sentence_weight[:, None], (2, 4))
    sample_weight = sample_weight[:, : weight_shape[1]] if len(weight_shape) == 2 else sentence_weight
    value = MaskedSequenceCrossEntropy()(Y_TRUE, logits, sample_weight=sample_weight.astype("float32"))
    # Keras semantics: weighted sum ÷ number of real tokens.
    expected = reference_loss(Y_TRUE, logits, sample_weight=sentence_weight[:, None])
    np.testing.assert_allclose(value, expected, rtol=1e-6)


def test_zero_sample_weight_removes_a_sentence():
    logits = random_logits()
    value = MaskedSequenceCrossEntropy()(Y_TRUE, logits, sample_weight=np.array([0.0, 1.0]))
    per_token = reference_per_token(Y_TRUE, logits)
    np.testing.assert_allclose(value, (per_token[1] * MASK[1]).sum() / MASK.sum(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("loss", ["function", "class"])
def test_low_precision_logits_computed_in_float32(dtype, loss):
    # 64 words of close logits: float16/bfloat16 arithmetic would be off by ≫ 1e-6.
    y_true = np.array([[5, 17, 63, 0], [1, 2, 3, 4]], "int32")
    logits = ops.cast(random_logits((2, 4, 64), seed=2, scale=4.0), dtype)
    exact = reference_loss(y_true, ops.convert_to_numpy(ops.cast(logits, "float32")))
    compute = masked_sequence_cross_entropy if loss == "function" else MaskedSequenceCrossEntropy()
    value = compute(y_true, logits)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    np.testing.assert_allclose(value, exact, rtol=2e-6)


@pytest.mark.parametrize("loss", ["function", "class"])
def test_all_padding_batch_gives_zero(loss):
    y_true = np.zeros((2, 3), "int32")
    logits = tf.Variable(random_logits((2, 3, VOCAB_SIZE)))
    compute = masked_sequence_cross_entropy if loss == "function" else MaskedSequenceCrossEntropy()
    with tf.GradientTape() as tape:
        value = compute(y_true, logits)
    assert float(value) == 0.0
    assert np.all(tape.gradient(value, logits).numpy() == 0.0)


def test_custom_pad_id():
    y_true = np.array([[4, 2, 3, 3], [0, 3, 4, 3]], "int32")  # 3 is padding here
    logits = random_logits()
    mask = y_true != 3
    expected = (reference_per_token(y_true, logits) * mask).sum() / mask.sum()
    np.testing.assert_allclose(
        masked_sequence_cross_entropy(y_true, logits, pad_id=3), expected, rtol=1e-6
    )
    np.testing.assert_allclose(MaskedSequenceCrossEntropy(pad_id=3)(y_true, logits), expected, rtol=1e-6)


def test_config_round_trip():
    loss = MaskedSequenceCrossEntropy(label_smoothing=0.1, pad_id=3, reduction="sum", name="xent")
    config = loss.get_config()
    assert config == {
        "name": "xent",
        "reduction": "sum",
        "label_smoothing": 0.1,
        "pad_id": 3,
    }
    revived = MaskedSequenceCrossEntropy.from_config(config)
    assert revived.get_config() == config
    # By registered name too, as in a saved model's compile config.
    serialized = keras.saving.serialize_keras_object(loss)
    assert serialized["registered_name"] == "tf_outheads>MaskedSequenceCrossEntropy"
    deserialized = keras.saving.deserialize_keras_object(serialized)
    assert type(deserialized) is MaskedSequenceCrossEntropy
    assert deserialized.get_config() == config


@pytest.mark.parametrize("label_smoothing", [-0.1, 1.0, 1.5])
def test_invalid_label_smoothing(label_smoothing):
    with pytest.raises(ValueError, match=f"Received: label_smoothing={label_smoothing}"):
        MaskedSequenceCrossEntropy(label_smoothing=label_smoothing)


@pytest.mark.parametrize("name", ["MaskedSequenceCrossEntropy", "SampledSoftmaxLoss",
                                  "VMFLoss", "ReWELoss", "CosineEmbeddingLoss",
                                  "MSEEmbeddingLoss"])
def test_losses_refuse_a_dtype_they_would_not_use(name):
    """Every loss computes in float32: `dtype` other than that is refused, not dropped."""
    import tf_outheads

    cls = getattr(tf_outheads, name)
    assert cls(dtype="float32").dtype == "float32" and cls().dtype == "float32"
    with pytest.raises(ValueError, match=f"{name} computes in float32.*dtype='float64'"):
        cls(dtype="float64")
    loss = cls()
    assert type(loss).from_config(loss.get_config()).dtype == "float32"
