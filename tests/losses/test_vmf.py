"""Tests for `tf_outheads.losses.vmf` (NLLvMF function + `VMFLoss`).

Expected values are independent of the library: log C_m from mpmath's
`besseli` (30 digits), the rest in numpy float64.
"""

import keras
import mpmath
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.losses.objective import Objective, StepOutputs
from tf_outheads.losses.vmf import VMFLoss
from tf_outheads.losses.vmf import vmf_loss
from tf_outheads.losses.vmf import vmf_negative_log_likelihood
from tf_outheads.ops import log_vmf_normalizer
from tests.testing import step_loss

M = 300
VOCAB_SIZE = 6
# Row 0 has two padding positions, row 1 one.
Y_TRUE = np.array([[4, 2, 0, 0], [1, 3, 4, 0]], "int32")
MASK = Y_TRUE != 0
# κ = ‖ê‖ per position (padding ones are garbage and never read).
KAPPAS = np.array([[5.0, 40.0, 7.0, 7.0], [150.0, 2.0, 600.0, 7.0]])
# Both regularisers of Kumar & Tsvetkov §4, at their paper values.
REGULARISED = [(0.02, 1.0), (0.0, 0.1), (0.02, 0.1)]
REGULARISED_IDS = ["reg1_norm_penalty", "reg2_dot_scale", "both"]


def reference_log_c(kappa, dim=M):
    """log C_m(κ) = (m/2 − 1)·log κ − (m/2)·log 2π − log I_{m/2−1}(κ), mpmath."""
    with mpmath.workdps(30):
        order = mpmath.mpf(dim) / 2 - 1
        kappa = mpmath.mpf(float(kappa))
        value = (order * mpmath.log(kappa) - (order + 1) * mpmath.log(2 * mpmath.pi)
                 - mpmath.log(mpmath.besseli(order, kappa)))
    return float(value)


def reference_ratio(kappa, dim=M):
    """I_{m/2}(κ) / I_{m/2−1}(κ), mpmath: −d/dκ log C_m(κ)."""
    with mpmath.workdps(30):
        order = mpmath.mpf(dim) / 2 - 1
        kappa = mpmath.mpf(float(kappa))
        return float(mpmath.besseli(order + 1, kappa) / mpmath.besseli(order, kappa))


def unit(vectors):
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def make_table(seed=0):
    """(V, m) float32 rows of random norms (the loss normalises them)."""
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(VOCAB_SIZE, M)) * rng.uniform(0.5, 3.0, size=(VOCAB_SIZE, 1))
    return table.astype("float32")


def make_predictions(kappas=KAPPAS, seed=1, table=None, alignment=0.5):
    """ê `(B, T, m)` float32 of norms `kappas`, partly aligned with the gold vectors."""
    rng = np.random.default_rng(seed)
    direction = unit(rng.normal(size=kappas.shape + (M,)))
    if table is not None:
        direction = unit(direction + alignment * unit(table.astype("float64"))[Y_TRUE] * 10.0)
    return (direction * kappas[..., None]).astype("float32")


def reference_per_token(y_pred, table, y_true=Y_TRUE, norm_penalty=0.0, dot_scale=1.0):
    """(B, T) float64 NLLvMF, padding set to 0: −log C_m(κ) − λ2·ê·e + λ1·κ."""
    y_pred = np.asarray(y_pred, "float64")
    targets = unit(np.asarray(table, "float64"))[y_true]
    kappa = np.linalg.norm(y_pred, axis=-1)
    log_c = np.vectorize(reference_log_c)(np.where(y_true != 0, kappa, 1.0))
    dot = np.sum(y_pred * targets, axis=-1)
    loss = -log_c - dot_scale * dot + norm_penalty * kappa
    return np.where(y_true != 0, loss, 0.0)


@pytest.fixture(scope="module")
def table():
    return make_table()


@pytest.fixture(scope="module")
def y_pred(table):
    return make_predictions(table=table)


@pytest.fixture(scope="module")
def expected_per_token(y_pred, table):
    return reference_per_token(y_pred, table)


# -- values -----------------------------------------------------------------------

@pytest.mark.parametrize("kappa", [5.0, 150.0, 600.0], ids=["kappa=5", "kappa=150", "kappa=600"])
def test_per_token_value_against_mpmath(kappa):
    rng = np.random.default_rng(3)
    target = unit(rng.normal(size=M))
    prediction = kappa * unit(rng.normal(size=M) + 8.0 * target)
    value = vmf_negative_log_likelihood(target.astype("float32"), prediction.astype("float32"))
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    expected = -reference_log_c(kappa) - prediction @ target
    # |value| ~ 430: float32 resolution is ~3e-5 there.
    np.testing.assert_allclose(float(value), expected, rtol=1e-6, atol=1e-4)


def test_loss_is_token_mean(y_pred, table, expected_per_token):
    value = vmf_loss(Y_TRUE, y_pred, table)
    assert tuple(value.shape) == ()
    np.testing.assert_allclose(float(value), expected_per_token.sum() / MASK.sum(),
                               rtol=1e-6, atol=1e-4)


def test_sentence_reduction_averages_over_nonempty_sentences(table):
    # A third sentence is all padding: it must not count as a sentence.
    y_true = np.array([[4, 2, 0, 0], [1, 3, 4, 0], [0, 0, 0, 0]], "int32")
    kappas = np.concatenate([KAPPAS, np.full((1, 4), 9.0)])
    y_pred = make_predictions(kappas, seed=5)
    per_token = reference_per_token(y_pred, table, y_true=y_true)
    sentence = vmf_loss(y_true, y_pred, table, reduction="sentence")
    token = vmf_loss(y_true, y_pred, table, reduction="token")
    np.testing.assert_allclose(float(sentence), per_token.sum() / 2.0, rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(float(token), per_token.sum() / 5.0, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("norm_penalty, dot_scale", REGULARISED, ids=REGULARISED_IDS)
def test_regularised_variants_follow_the_formula(y_pred, table, norm_penalty, dot_scale):
    targets = unit(table.astype("float64"))[Y_TRUE]
    predictions = y_pred.astype("float64")
    kappa = np.linalg.norm(predictions, axis=-1)
    dot = np.sum(predictions * targets, axis=-1)
    plain = vmf_negative_log_likelihood(targets, y_pred)
    regularised = vmf_negative_log_likelihood(targets, y_pred, norm_penalty=norm_penalty,
                                              dot_scale=dot_scale)
    # The change is exactly + λ1·κ − (λ2 − 1)·ê·e, token by token.
    change = norm_penalty * kappa - (dot_scale - 1.0) * dot
    assert np.all(np.abs(change[MASK]) > 1e-2)
    np.testing.assert_allclose(np.asarray(regularised) - np.asarray(plain), change, atol=2e-4)
    expected = reference_per_token(y_pred, table, norm_penalty=norm_penalty,
                                   dot_scale=dot_scale)
    np.testing.assert_allclose(
        float(vmf_loss(Y_TRUE, y_pred, table, norm_penalty=norm_penalty, dot_scale=dot_scale)),
        expected.sum() / MASK.sum(), rtol=1e-6, atol=1e-4)
    loss = VMFLoss(norm_penalty=norm_penalty, dot_scale=dot_scale, target_embeddings=table)
    np.testing.assert_allclose(float(loss(Y_TRUE, y_pred)), expected.sum() / MASK.sum(),
                               rtol=1e-6, atol=1e-4)


def test_target_rows_are_normalised(y_pred, table):
    rescaled = table * np.array([0.0, 7.0, 0.01, 3.0, 100.0, 1.0], "float32")[:, None]
    # Row 0 (PAD) is now zero; the others point the same way at other lengths.
    np.testing.assert_allclose(float(vmf_loss(Y_TRUE, y_pred, rescaled)),
                               float(vmf_loss(Y_TRUE, y_pred, table)), rtol=1e-6)


def test_zero_prediction_is_finite():
    # At ê = 0: −log C_m(0) = log of the sphere's area 2π^{m/2}/Γ(m/2), gradient −λ2·e.
    target = unit(np.random.default_rng(4).normal(size=(1, M))).astype("float32")
    prediction = tf.Variable(np.zeros((1, M), "float32"))
    with tf.GradientTape() as tape:
        value = vmf_negative_log_likelihood(target, prediction, norm_penalty=0.02, dot_scale=0.1)
    log_area = float(np.log(2.0) + (M / 2) * np.log(np.pi) - mpmath.loggamma(M / 2))
    np.testing.assert_allclose(float(value[0]), log_area, rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(value, prediction).numpy(), -0.1 * target,
                               rtol=1e-6)


# -- gradients ----------------------------------------------------------------------

GRADIENT_CASES = [(0.0, 1.0), (0.02, 0.1)]
GRADIENT_IDS = ["plain", "regularised"]


def gradient_at(point, target, norm_penalty, dot_scale):
    prediction = tf.Variable(point.astype("float32"))
    with tf.GradientTape() as tape:
        value = vmf_negative_log_likelihood(target.astype("float32"), prediction,
                                            norm_penalty=norm_penalty, dot_scale=dot_scale)
    return tape.gradient(value, prediction).numpy()


@pytest.mark.parametrize("norm_penalty, dot_scale", GRADIENT_CASES, ids=GRADIENT_IDS)
def test_gradient_matches_numerical_differentiation(norm_penalty, dot_scale):
    # m = 24 keeps tf.test.compute_gradient's 2·m evaluations cheap; the
    # m = 300 gradient is checked against the analytic form below.
    dim = 24
    rng = np.random.default_rng(6)
    target = unit(rng.normal(size=dim))
    point = 30.0 * unit(rng.normal(size=dim) + 2.0 * target)

    def reference(prediction):  # float64 throughout, composed independently
        kappa = tf.norm(prediction)
        return (-log_vmf_normalizer(kappa, dim) - dot_scale * tf.reduce_sum(prediction * target)
                + norm_penalty * kappa)

    _, (numerical,) = tf.test.compute_gradient(reference, [tf.constant(point)])
    np.testing.assert_allclose(gradient_at(point, target, norm_penalty, dot_scale), numerical[0],
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("norm_penalty, dot_scale", GRADIENT_CASES, ids=GRADIENT_IDS)
@pytest.mark.parametrize("kappa", [0.5, 80.0, 2000.0])
def test_gradient_matches_analytic_form(kappa, norm_penalty, dot_scale):
    rng = np.random.default_rng(8)
    target = unit(rng.normal(size=M))
    point = kappa * unit(rng.normal(size=M) + 5.0 * target)
    # ∂/∂ê = (I_{m/2}/I_{m/2−1} + λ1)·ê/κ − λ2·e with the ratio from mpmath.
    analytic = (reference_ratio(kappa) + norm_penalty) * point / kappa - dot_scale * target
    np.testing.assert_allclose(gradient_at(point, target, norm_penalty, dot_scale), analytic,
                               rtol=1e-4, atol=1e-6)


def test_lower_bound_gradient_has_the_exact_direction():
    rng = np.random.default_rng(7)
    kappas = np.array([10.0, 30.0, 100.0, 300.0, 1000.0])
    targets = unit(rng.normal(size=(len(kappas), 3, M)))
    # Predictions from unrelated to nearly aligned with the target.
    alignment = np.array([0.0, 0.1, 1.0])[None, :, None]
    directions = unit(rng.normal(size=targets.shape) / np.sqrt(M) + alignment * targets)
    predictions = (directions * kappas[:, None, None]).astype("float32")
    gradients = {}
    for normalizer in ("exact", "lower_bound"):
        variable = tf.Variable(predictions)
        with tf.GradientTape() as tape:
            value = vmf_negative_log_likelihood(targets, variable, normalizer=normalizer)
        assert np.all(np.isfinite(value.numpy()))
        gradients[normalizer] = tape.gradient(value, variable).numpy().astype("float64")
    exact, bound = gradients["exact"], gradients["lower_bound"]
    cosine = np.sum(exact * bound, axis=-1) / (
        np.linalg.norm(exact, axis=-1) * np.linalg.norm(bound, axis=-1))
    assert np.all(cosine > 0.99), cosine
    # Not the same function: the bound's value is offset (a pseudo-loss).
    value_exact = vmf_loss(Y_TRUE, make_predictions(), make_table())
    value_bound = vmf_loss(Y_TRUE, make_predictions(), make_table(), normalizer="lower_bound")
    assert np.isfinite(float(value_bound)) and abs(float(value_bound - value_exact)) > 100.0


# -- padding ------------------------------------------------------------------------

def garbage_at_padding(y_pred):
    garbage = y_pred.copy()
    garbage[0, 2] = 1e4
    garbage[0, 3] = np.nan
    garbage[1, 3, :5] = np.inf
    return garbage


@pytest.mark.parametrize("loss", ["function", "class"])
def test_padding_contributes_nothing(loss, y_pred, table):
    compute = (lambda y, p: vmf_loss(y, p, table)) if loss == "function" else VMFLoss(
        target_embeddings=table)
    np.testing.assert_allclose(float(compute(Y_TRUE, garbage_at_padding(y_pred))),
                               float(compute(Y_TRUE, y_pred)), rtol=1e-7)


@pytest.mark.parametrize("normalizer", ["exact", "lower_bound"])
@pytest.mark.parametrize("loss", ["function", "class"])
def test_gradient_is_exactly_zero_at_padding(loss, normalizer, y_pred, table):
    compute = (lambda y, p: vmf_loss(y, p, table, normalizer=normalizer)) if loss == "function" \
        else VMFLoss(normalizer=normalizer, target_embeddings=table)
    variable = tf.Variable(garbage_at_padding(y_pred))
    with tf.GradientTape() as tape:
        value = compute(Y_TRUE, variable)
    gradient = tape.gradient(value, variable).numpy()
    assert np.all(gradient[~MASK] == 0.0)
    assert np.all(np.isfinite(gradient)) and np.all(np.abs(gradient[MASK]).sum(axis=-1) > 0.0)


@pytest.mark.parametrize("loss", ["function", "class"])
def test_all_padding_batch_gives_zero(loss, table):
    y_true = np.zeros((2, 3), "int32")
    variable = tf.Variable(make_predictions(np.full((2, 3), 5.0)))
    compute = (lambda y, p: vmf_loss(y, p, table)) if loss == "function" else VMFLoss(
        target_embeddings=table)
    with tf.GradientTape() as tape:
        value = compute(y_true, variable)
    assert float(value) == 0.0
    assert np.all(tape.gradient(value, variable).numpy() == 0.0)


def test_custom_pad_id(y_pred, table):
    y_true = np.where(Y_TRUE == 0, 5, Y_TRUE)  # 5 is padding here, 0 never occurs
    expected = reference_per_token(y_pred, table, y_true=np.where(Y_TRUE == 0, 0, Y_TRUE))
    np.testing.assert_allclose(float(vmf_loss(y_true, y_pred, table, pad_id=5)),
                               expected.sum() / MASK.sum(), rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(float(VMFLoss(pad_id=5, target_embeddings=table)(y_true, y_pred)),
                               expected.sum() / MASK.sum(), rtol=1e-6, atol=1e-4)


# -- Keras reductions and sample weights ----------------------------------------------

@pytest.mark.parametrize("reduction", ["sum", "none", "sum_over_batch_size"])
def test_reduction_modes(reduction, y_pred, table, expected_per_token):
    value = keras.ops.convert_to_numpy(
        VMFLoss(reduction=reduction, target_embeddings=table)(Y_TRUE, y_pred))
    expected = {
        "sum": expected_per_token.sum(),
        "none": expected_per_token,
        "sum_over_batch_size": expected_per_token.sum() / MASK.sum(),
    }[reduction]
    np.testing.assert_allclose(value, expected, rtol=1e-6, atol=2e-4)


SENTENCE_WEIGHT = np.array([0.5, 2.0])
TOKEN_WEIGHT = np.array([[0.5, 3.0, 9.0, 9.0], [2.0, 0.0, 1.5, 9.0]])


@pytest.mark.parametrize(
    "sample_weight, token_weight",
    [(SENTENCE_WEIGHT, SENTENCE_WEIGHT[:, None]),
     (SENTENCE_WEIGHT[:, None], SENTENCE_WEIGHT[:, None]),
     (TOKEN_WEIGHT, TOKEN_WEIGHT)],
    ids=["per_sentence", "per_sentence_2d", "per_token"])
def test_sample_weight(sample_weight, token_weight, y_pred, table, expected_per_token):
    loss = VMFLoss(target_embeddings=table)
    value = loss(Y_TRUE, y_pred, sample_weight=sample_weight.astype("float32"))
    # Keras semantics: weighted sum ÷ number of real tokens.
    expected = (expected_per_token * token_weight).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6, atol=1e-4)


def test_zero_sample_weight_removes_a_sentence(y_pred, table, expected_per_token):
    value = VMFLoss(target_embeddings=table)(Y_TRUE, y_pred, sample_weight=np.array([0.0, 1.0]))
    np.testing.assert_allclose(float(value), expected_per_token[1].sum() / MASK.sum(),
                               rtol=1e-6, atol=1e-4)
    zero = VMFLoss(target_embeddings=table)(Y_TRUE, y_pred, sample_weight=np.zeros(2))
    assert float(zero) == 0.0


# -- dtypes -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("loss", ["function", "class"])
def test_low_precision_inputs_computed_in_float32(dtype, loss, table):
    y_pred = keras.ops.cast(make_predictions(table=table), dtype)
    upcast = keras.ops.convert_to_numpy(keras.ops.cast(y_pred, "float32"))
    compute = (lambda y, p: vmf_loss(y, p, table)) if loss == "function" else VMFLoss(
        target_embeddings=table)
    value = compute(Y_TRUE, y_pred)
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    # As close to the float32 inputs' loss as float32 arithmetic allows: the
    # error of half-precision arithmetic on values ~400 would be ≳ 0.1.
    np.testing.assert_allclose(float(value), float(compute(Y_TRUE, upcast)), rtol=0, atol=1e-4)
    expected = reference_per_token(upcast, table).sum() / MASK.sum()
    np.testing.assert_allclose(float(value), expected, rtol=1e-6, atol=1e-4)


# -- the head protocol ----------------------------------------------------------------

class FakeHead:
    """The only thing a loss asks of a continuous head: its unit-norm table."""

    def __init__(self, table):
        self.table = unit(np.asarray(table, "float64")).astype("float32")

    def target_vectors(self):
        return tf.constant(self.table)


@pytest.mark.parametrize("normalizer", ["exact", "lower_bound"])
def test_in_a_model_step_equals_function(normalizer, y_pred, table):
    total, tokens = step_loss(VMFLoss(normalizer=normalizer, norm_penalty=0.02), Y_TRUE,
                              FakeHead(table), head_output=y_pred)
    expected = vmf_loss(Y_TRUE, y_pred, table, normalizer=normalizer, norm_penalty=0.02)
    np.testing.assert_allclose(total / tokens, float(expected), rtol=1e-6)


@pytest.mark.parametrize("sample_weight", [None, SENTENCE_WEIGHT, TOKEN_WEIGHT],
                         ids=["unweighted", "per_sentence", "per_token"])
def test_in_a_model_step_reduces_like_call(sample_weight, y_pred, table):
    total, tokens = step_loss(VMFLoss(), Y_TRUE, FakeHead(table), head_output=y_pred,
                              sample_weight=sample_weight)
    for reduction, value in (("sum_over_batch_size", total / tokens), ("sum", total)):
        loss = VMFLoss(reduction=reduction, target_embeddings=table)
        np.testing.assert_allclose(value, float(loss(Y_TRUE, y_pred, sample_weight=sample_weight)),
                                   rtol=1e-6, atol=1e-5)


def test_in_a_model_step_gradient_is_zero_at_padding(y_pred, table):
    variable = tf.Variable(garbage_at_padding(y_pred))
    with tf.GradientTape() as tape:
        outputs = StepOutputs(None, FakeHead(table), head_output=variable)
        total, _ = Objective(VMFLoss(), None, {"logits": outputs.head})(Y_TRUE, outputs)
    gradient = tape.gradient(total, variable).numpy()
    assert np.isfinite(float(total)) and np.all(gradient[~MASK] == 0.0)


def test_missing_table_is_a_clear_error(y_pred):
    with pytest.raises(ValueError, match="target_embeddings=.*compile a model"):
        VMFLoss()(Y_TRUE, y_pred)


def test_dimension_mismatch_is_a_clear_error(table):
    with pytest.raises(ValueError, match="same size m"):
        vmf_loss(Y_TRUE, np.ones((2, 4, M + 1), "float32"), table)


# -- configuration --------------------------------------------------------------------

def test_config_round_trip(table):
    loss = VMFLoss(normalizer="lower_bound", norm_penalty=0.02, dot_scale=0.1, pad_id=3,
                   target_embeddings=table, reduction="sum", name="vmf")
    config = loss.get_config()
    assert config == {
        "name": "vmf",
        "reduction": "sum",
        "normalizer": "lower_bound",
        "norm_penalty": 0.02,
        "dot_scale": 0.1,
        "pad_id": 3,
    }  # the table is data, not configuration
    revived = VMFLoss.from_config(config)
    assert revived.get_config() == config and revived.target_embeddings is None
    serialized = keras.saving.serialize_keras_object(loss)
    assert serialized["registered_name"] == "tf_outheads>VMFLoss"
    deserialized = keras.saving.deserialize_keras_object(serialized)
    assert type(deserialized) is VMFLoss
    assert deserialized.get_config() == config


@pytest.mark.parametrize(
    "kwargs, match",
    [({"normalizer": "series"}, "normalizer='series'"),
     ({"norm_penalty": -0.1}, "norm_penalty=-0.1"),
     ({"dot_scale": 0.0}, "dot_scale=0.0"),
     ({"target_embeddings": np.ones(5)}, "target_embeddings of shape")],
    ids=["normalizer", "norm_penalty", "dot_scale", "table_rank"])
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VMFLoss(**kwargs)


def test_invalid_function_reduction(y_pred, table):
    with pytest.raises(ValueError, match="reduction='mean'"):
        vmf_loss(Y_TRUE, y_pred, table, reduction="mean")
