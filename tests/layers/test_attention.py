"""Tests for `tf_outheads.layers.attention`: `LuongAttention` and `MultiHeadAttention`."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tests.testing import run_layer_test
from tf_outheads.layers.attention import LuongAttention, MultiHeadAttention

BATCH = 3
SOURCE_LENGTH = 5
QUERY_DIM = 6
UNITS = 7
# Row 0: two padding positions; row 1: none; row 2: only one real token.
MEMORY_MASK = np.array(
    [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], "float32"
)


def attention_inputs(memory_dim=QUERY_DIM, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(BATCH, QUERY_DIM)).astype("float32")
    memory = rng.normal(size=(BATCH, SOURCE_LENGTH, memory_dim)).astype("float32")
    return query, memory


def built_attention(score, memory_dim=QUERY_DIM, scaled=False):
    attention = LuongAttention(UNITS, score=score, scaled=scaled)
    attention.build((None, QUERY_DIM), (None, None, memory_dim))
    return attention


def call_attention(attention, query, memory, memory_mask=MEMORY_MASK):
    keys = attention.memory_keys(memory)
    return attention(query, memory, keys, memory_mask)


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)


@contextlib.contextmanager
def global_dtype_policy(name):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


# The layer takes precomputed `keys`, so the fit step (which feeds keys as an
# input) gives no gradient to the "general" memory kernel.
@pytest.mark.filterwarnings("ignore:Gradients do not exist")
@pytest.mark.parametrize("score", ["general", "dot"])
def test_run_layer_test(score):
    query, memory = attention_inputs()
    run_layer_test(
        lambda: LuongAttention(UNITS, score=score),
        {"query": query, "memory": memory, "keys": memory, "memory_mask": MEMORY_MASK},
        ((BATCH, UNITS), (BATCH, SOURCE_LENGTH)),
        expected_num_trainable_weights=2 if score == "general" else 1,
        atol=1e-5,
    )


@pytest.mark.parametrize("score", ["general", "dot"])
def test_output_shapes(score):
    query, memory = attention_inputs()
    attentional, alignment = call_attention(built_attention(score), query, memory)
    assert tuple(attentional.shape) == (BATCH, UNITS)
    assert tuple(alignment.shape) == (BATCH, SOURCE_LENGTH)
    assert keras.backend.standardize_dtype(alignment.dtype) == "float32"


@pytest.mark.parametrize("score", ["general", "dot"])
def test_alignment_sums_to_one_and_is_zero_at_padding(score):
    query, memory = attention_inputs()
    # Large values at padding: they must not get any weight anyway.
    memory[MEMORY_MASK == 0] = 50.0
    _, alignment = call_attention(built_attention(score), query, memory)
    alignment = ops.convert_to_numpy(alignment)
    np.testing.assert_allclose(alignment.sum(axis=-1), 1.0, rtol=1e-6)
    assert np.all(alignment[MEMORY_MASK == 0] == 0.0)
    assert np.all(alignment[MEMORY_MASK == 1] > 0.0)
    np.testing.assert_allclose(alignment[2], [1.0, 0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("score", ["general", "dot"])
def test_padding_content_does_not_change_outputs(score):
    attention = built_attention(score)
    query, memory = attention_inputs()
    reference = [ops.convert_to_numpy(x) for x in call_attention(attention, query, memory)]
    memory[MEMORY_MASK == 0] = np.random.default_rng(9).normal(size=memory[MEMORY_MASK == 0].shape)
    changed = call_attention(attention, query, memory)
    for got, want in zip(changed, reference):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("score", ["general", "dot"])
def test_fully_masked_row_is_finite(score):
    query, memory = attention_inputs()
    mask = MEMORY_MASK.copy()
    mask[0] = 0.0
    attentional, alignment = call_attention(built_attention(score), query, memory, mask)
    assert np.all(np.isfinite(ops.convert_to_numpy(attentional)))
    assert np.all(np.isfinite(ops.convert_to_numpy(alignment)))


@pytest.mark.parametrize("scaled", [False, True], ids=["luong", "scaled"])
@pytest.mark.parametrize(
    "score, memory_dim", [("general", 4), ("general", QUERY_DIM), ("dot", QUERY_DIM)]
)
def test_matches_numpy_reference(score, memory_dim, scaled):
    """Luong et al. 2015, Eq. 5, 7, 8, computed independently with numpy; `scaled`
    divides the scores by √d_q (Vaswani et al. 2017, Eq. 1)."""
    attention = built_attention(score, memory_dim, scaled)
    query, memory = attention_inputs(memory_dim)
    attentional, alignment = call_attention(attention, query, memory)
    output_kernel = ops.convert_to_numpy(attention.output_kernel)
    if score == "general":
        memory_kernel = ops.convert_to_numpy(attention.memory_kernel)
        assert memory_kernel.shape == (memory_dim, QUERY_DIM)
        scores = np.einsum("bq,bsm,mq->bs", query, memory, memory_kernel)
    else:
        assert attention.memory_kernel is None
        scores = np.einsum("bq,bsq->bs", query, memory)
    if scaled:
        scores = scores / np.sqrt(QUERY_DIM)
    scores = np.where(MEMORY_MASK == 1, scores, -np.inf)
    expected_alignment = softmax(scores)
    context = np.einsum("bs,bsm->bm", expected_alignment, memory)
    expected = np.tanh(np.concatenate([context, query], axis=-1) @ output_kernel)
    np.testing.assert_allclose(alignment, expected_alignment, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(attentional, expected, rtol=1e-5, atol=1e-5)


def test_dot_and_general_differ():
    query, memory = attention_inputs()
    _, dot = call_attention(built_attention("dot"), query, memory)
    _, general = call_attention(built_attention("general"), query, memory)
    assert not np.allclose(dot, general, atol=1e-3)


@pytest.mark.parametrize("score", ["general", "dot"])
def test_memory_keys(score):
    attention = built_attention(score)
    _, memory = attention_inputs()
    keys = ops.convert_to_numpy(attention.memory_keys(memory))
    if score == "dot":
        np.testing.assert_array_equal(keys, memory)
    else:
        expected = memory @ ops.convert_to_numpy(attention.memory_kernel)
        np.testing.assert_allclose(keys, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_alignment_in_float32_under_mixed_policy(policy):
    query, memory = attention_inputs()
    with global_dtype_policy(policy):
        attention = built_attention("general")
        attentional, alignment = call_attention(attention, query, memory)
    assert keras.config.dtype_policy().name == "float32"
    assert keras.backend.standardize_dtype(alignment.dtype) == "float32"
    assert keras.backend.standardize_dtype(attentional.dtype) == policy.split("_")[1]
    alignment = ops.convert_to_numpy(alignment)
    np.testing.assert_allclose(alignment.sum(axis=-1), 1.0, rtol=1e-5)
    assert np.all(alignment[MEMORY_MASK == 0] == 0.0)


def test_dot_needs_equal_query_and_memory_sizes():
    attention = LuongAttention(UNITS, score="dot")
    with pytest.raises(ValueError, match="Received: query_dim=6, memory_dim=4"):
        attention.build((None, QUERY_DIM), (None, None, 4))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"units": UNITS, "score": "concat"}, "Received: score=concat"),
        ({"units": 0}, "Received: units=0"),
        ({"units": -2}, "Received: units=-2"),
        ({"units": 2.5}, "Received: units=2.5"),
        ({"units": None}, "Received: units=None"),
        ({"units": UNITS, "scaled": "yes"}, "Received: scaled='yes'"),
    ],
    ids=["score_unknown", "units_zero", "units_negative", "units_float", "units_none",
         "scaled_not_bool"],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LuongAttention(**kwargs)


# -- MultiHeadAttention ------------------------------------------------------------------
HEADS = 2
MODEL_DIM = 8


def multi_head_inputs(query_length=3, seed=0):
    """Queries `(B, T, d)`, memory `(B, S, d)` and its mask as `(B, 1, 1, S)`."""
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(BATCH, query_length, MODEL_DIM)).astype("float32")
    memory = rng.normal(size=(BATCH, SOURCE_LENGTH, MODEL_DIM)).astype("float32")
    return query, memory, MEMORY_MASK.astype(bool)[:, None, None, :]


def built_multi_head():
    attention = MultiHeadAttention(HEADS, MODEL_DIM)
    attention.build(MODEL_DIM)
    return attention


def test_multi_head_matches_numpy_reference():
    attention = built_multi_head()
    query, memory, mask = multi_head_inputs()
    output, weights = attention.attend(query, *attention.keys_values(memory), mask)

    def project(dense, x):
        y = x @ ops.convert_to_numpy(dense.kernel) + ops.convert_to_numpy(dense.bias)
        return y.reshape(BATCH, -1, HEADS, MODEL_DIM // HEADS).transpose(0, 2, 1, 3)

    q = project(attention.query_dense, query)
    k, v = project(attention.key_dense, memory), project(attention.value_dense, memory)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(MODEL_DIM // HEADS)
    expected_weights = softmax(np.where(mask, logits, -np.inf))
    context = (expected_weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, -1, MODEL_DIM)
    expected = (context @ ops.convert_to_numpy(attention.output_dense.kernel)
                + ops.convert_to_numpy(attention.output_dense.bias))
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    np.testing.assert_allclose(output, expected, atol=1e-5)


def test_multi_head_one_position_form_equals_a_length_one_query():
    """A decoding step's `(B, d)` query (2-D projections, its own batch matmul) gives
    what the same query as `(B, 1, d)` gives, values and gradients."""
    attention = built_multi_head()
    query, memory, mask = multi_head_inputs(query_length=1, seed=1)
    keys, values = attention.keys_values(memory)
    step_keys, step_values = attention.keys_values(memory[:, 0])  # one position
    assert tuple(step_keys.shape) == (BATCH, HEADS, 1, MODEL_DIM // HEADS)
    np.testing.assert_allclose(step_keys, ops.convert_to_numpy(keys)[:, :, :1], atol=1e-6)
    np.testing.assert_allclose(step_values, ops.convert_to_numpy(values)[:, :, :1], atol=1e-6)

    def attend(q):
        with tf.GradientTape() as tape:
            tape.watch(q)
            output, weights = attention.attend(q, keys, values, mask)
            loss = tf.reduce_sum(output * np.arange(MODEL_DIM, dtype="float32"))
        return output, weights, tape.gradient(loss, [q, *attention.trainable_variables])

    output, weights, gradients = attend(tf.constant(query))
    step_output, step_weights, step_gradients = attend(tf.constant(query[:, 0]))
    assert tuple(step_output.shape) == (BATCH, MODEL_DIM)
    assert tuple(step_weights.shape) == (BATCH, HEADS, 1, SOURCE_LENGTH)
    np.testing.assert_allclose(step_output, ops.convert_to_numpy(output)[:, 0], atol=1e-6)
    np.testing.assert_allclose(step_weights, weights, atol=1e-7)
    np.testing.assert_allclose(step_gradients[0], ops.convert_to_numpy(gradients[0])[:, 0],
                               atol=1e-6)
    for step_gradient, gradient in zip(step_gradients[1:], gradients[1:]):
        if gradient is None:  # the key and value projections: keys are given
            assert step_gradient is None
        else:
            np.testing.assert_allclose(step_gradient, gradient, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_multi_head_one_position_under_mixed_policies(policy):
    with global_dtype_policy(policy):
        attention = built_multi_head()
    query, memory, mask = multi_head_inputs(query_length=1, seed=2)
    keys, values = attention.keys_values(memory)
    output, weights = attention.attend(query, keys, values, mask)
    step_output, step_weights = attention.attend(query[:, 0], keys, values, mask)
    assert step_weights.dtype == "float32"
    np.testing.assert_allclose(ops.convert_to_numpy(ops.cast(step_output, "float32")),
                               ops.convert_to_numpy(ops.cast(output, "float32"))[:, 0],
                               atol=1e-2)
