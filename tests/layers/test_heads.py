"""Tests for `tf_outheads.layers.heads`: the softmax and tied heads, build_head."""

import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tests.testing import run_layer_test
from tf_outheads.layers.heads import CategoricalHead
from tf_outheads.layers.heads import SoftmaxHead
from tf_outheads.layers.heads import TiedSoftmaxHead
from tf_outheads.layers.heads import build_head
from tf_outheads.layers.heads import head_to_spec

VOCAB_SIZE = 13
HIDDEN_DIM = 8
PROJECTED_EMBEDDING_DIM = 5  # != HIDDEN_DIM: the tied head needs a projection

# A random bias so that every check also sees the bias (zeros would hide it).
HEAD_KINDS = ["softmax", "softmax_no_bias", "tied", "tied_projected"]


def make_head(kind, **kwargs):
    """A new, unbuilt head of `kind` (tied heads with their own new embedding)."""
    if kind == "softmax":
        return SoftmaxHead(VOCAB_SIZE, bias_initializer="random_normal", **kwargs)
    if kind == "softmax_no_bias":
        return SoftmaxHead(VOCAB_SIZE, use_bias=False, **kwargs)
    embedding_dim = HIDDEN_DIM if kind == "tied" else PROJECTED_EMBEDDING_DIM
    embedding = keras.layers.Embedding(VOCAB_SIZE, embedding_dim)
    return TiedSoftmaxHead(embedding, bias_initializer="random_normal", **kwargs)


def built_head(kind, **kwargs):
    head = make_head(kind, **kwargs)
    head.build((None, None, HIDDEN_DIM))
    return head


def hidden_states(shape=(2, 3, HIDDEN_DIM), seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@contextlib.contextmanager
def global_dtype_policy(name):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


# -- the shared layer checks -------------------------------------------------


@pytest.mark.parametrize(
    "kind, num_trainable_weights",
    [("softmax", 2), ("softmax_no_bias", 1), ("tied", 2), ("tied_projected", 3)],
    ids=HEAD_KINDS,
)
def test_run_layer_test(kind, num_trainable_weights):
    run_layer_test(
        lambda: make_head(kind),
        hidden_states(),
        (2, 3, VOCAB_SIZE),
        expected_num_trainable_weights=num_trainable_weights,
        expected_num_non_trainable_weights=0,
        fit_loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        fit_targets=np.array([[1, 4, 12], [0, 7, 7]], "int32"),
        atol=1e-5,
    )


@pytest.mark.parametrize("kind", HEAD_KINDS)
@pytest.mark.parametrize(
    "input_shape", [(4, HIDDEN_DIM), (2, 3, HIDDEN_DIM), (2, 1, 3, HIDDEN_DIM)],
    ids=["rank2", "rank3", "rank4"],
)
def test_output_shape(kind, input_shape):
    head = make_head(kind)
    logits = head(hidden_states(input_shape))
    assert tuple(logits.shape) == input_shape[:-1] + (VOCAB_SIZE,)
    assert head.compute_output_shape(input_shape) == input_shape[:-1] + (VOCAB_SIZE,)


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_is_a_categorical_head(kind):
    head = make_head(kind)
    assert isinstance(head, CategoricalHead)
    assert head.vocabulary_size == VOCAB_SIZE


# -- mixed precision -----------------------------------------------------------


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_logits_are_float32_under_mixed_policy(kind, policy):
    compute_dtype = policy.split("_")[1]
    h = hidden_states()
    with global_dtype_policy(policy):
        head = make_head(kind)
        logits = head(h)
        candidate_logits = head.logits_for(ops.cast(h, compute_dtype), np.array([1, 5]))
        scores = head.scores(ops.cast(h[:, 0], compute_dtype))
    assert keras.config.dtype_policy().name == "float32"  # restored
    assert head.compute_dtype == compute_dtype
    assert all(w.dtype == "float32" for w in head.weights)
    for output in (logits, candidate_logits, scores):
        assert keras.backend.standardize_dtype(output.dtype) == "float32"
    # Computed in the low precision, but the same function as in float32.
    projected = ops.convert_to_numpy(ops.cast(head.project_hidden(h), "float32"))
    reference = projected @ ops.convert_to_numpy(ops.cast(head.output_weights(), "float32")).T
    if head.output_bias is not None:
        reference = reference + ops.convert_to_numpy(head.output_bias)
    tolerance = 0.05 if compute_dtype == "float16" else 0.2
    np.testing.assert_allclose(logits, reference, atol=tolerance, rtol=tolerance)


# -- weight tying --------------------------------------------------------------


def test_tied_head_uses_the_embedding_variable_itself():
    embedding = keras.layers.Embedding(VOCAB_SIZE, HIDDEN_DIM)
    head = TiedSoftmaxHead(embedding)
    head.build((None, HIDDEN_DIM))
    assert head.embedding is embedding
    assert any(w is embedding.embeddings for w in head.weights)
    # Not a copy: a new value of the embedding is the new output weight matrix.
    new_table = np.random.default_rng(1).normal(size=(VOCAB_SIZE, HIDDEN_DIM))
    embedding.embeddings.assign(new_table.astype("float32"))
    np.testing.assert_array_equal(head.output_weights(), new_table.astype("float32"))


def test_tied_gradient_step_changes_the_embedding():
    embedding = keras.layers.Embedding(VOCAB_SIZE, HIDDEN_DIM)
    head = TiedSoftmaxHead(embedding)
    h = hidden_states()
    head(h)
    before = ops.convert_to_numpy(embedding.embeddings)
    labels = np.array([[1, 2, 3], [4, 5, 6]])
    with tf.GradientTape() as tape:
        loss = keras.losses.sparse_categorical_crossentropy(labels, head(h), from_logits=True)
        loss = ops.mean(loss)
    gradients = tape.gradient(loss, head.trainable_weights)
    keras.optimizers.SGD(1.0).apply(gradients, head.trainable_weights)
    after = ops.convert_to_numpy(embedding.embeddings)
    changed_rows = np.flatnonzero(np.any(before != after, axis=1))
    assert len(changed_rows) == VOCAB_SIZE  # every row is in the softmax


@pytest.mark.parametrize(
    "kind, expected_weights, expected_parameters",
    [
        ("softmax", 3, VOCAB_SIZE * HIDDEN_DIM * 2 + VOCAB_SIZE),
        ("tied", 2, VOCAB_SIZE * HIDDEN_DIM + VOCAB_SIZE),
    ],
    ids=["untied", "tied"],
)
def test_tied_model_holds_one_embedding_matrix(kind, expected_weights, expected_parameters):
    embedding = keras.layers.Embedding(VOCAB_SIZE, HIDDEN_DIM)
    if kind == "tied":
        head = TiedSoftmaxHead(embedding)
    else:
        head = SoftmaxHead(VOCAB_SIZE)
    ids = keras.Input((None,), dtype="int32")
    model = keras.Model(ids, head(embedding(ids)))
    unique = {id(w): w for w in model.weights}
    assert len(unique) == len(model.weights) == expected_weights
    assert sum(int(np.prod(w.shape)) for w in unique.values()) == expected_parameters


@pytest.mark.parametrize(
    "embedding_dim, projection, expect_projection",
    [
        (HIDDEN_DIM, None, False),
        (PROJECTED_EMBEDDING_DIM, None, True),
        (HIDDEN_DIM, True, True),
        (HIDDEN_DIM, False, False),
    ],
    ids=["auto_same_size", "auto_other_size", "forced_on", "forced_off"],
)
def test_projection_created_iff_needed_or_forced(embedding_dim, projection, expect_projection):
    embedding = keras.layers.Embedding(VOCAB_SIZE, embedding_dim)
    head = TiedSoftmaxHead(embedding, projection=projection)
    logits = head(hidden_states())
    assert tuple(logits.shape) == (2, 3, VOCAB_SIZE)
    if expect_projection:
        assert head.projection_layer is not None
        assert tuple(head.projection_layer.kernel.shape) == (HIDDEN_DIM, embedding_dim)
        assert len(head.trainable_weights) == 3
    else:
        assert head.projection_layer is None
        assert len(head.trainable_weights) == 2


def test_projection_false_with_other_size_raises():
    embedding = keras.layers.Embedding(VOCAB_SIZE, PROJECTED_EMBEDDING_DIM)
    head = TiedSoftmaxHead(embedding, projection=False)
    with pytest.raises(ValueError, match="Received: hidden_dim=8, embedding_dim=5"):
        head.build((None, None, HIDDEN_DIM))


# -- logits_for ----------------------------------------------------------------


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_logits_for_shared_candidates_match_call(kind):
    head = built_head(kind)
    h = hidden_states()
    candidates = np.array([12, 0, 5, 5, 3], "int32")  # ends of the range, a repeat
    logits = ops.convert_to_numpy(head(h))
    candidate_logits = head.logits_for(h, candidates)
    assert tuple(candidate_logits.shape) == (2, 3, 5)
    assert keras.backend.standardize_dtype(candidate_logits.dtype) == "float32"
    np.testing.assert_allclose(candidate_logits, logits[..., candidates], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_logits_for_per_position_candidates_match_call(kind):
    head = built_head(kind)
    h = hidden_states()
    candidates = np.random.default_rng(3).integers(0, VOCAB_SIZE, size=(2, 3, 4)).astype("int32")
    logits = ops.convert_to_numpy(head(h))
    candidate_logits = head.logits_for(h, candidates)
    assert tuple(candidate_logits.shape) == (2, 3, 4)
    expected = np.take_along_axis(logits, candidates, axis=-1)
    np.testing.assert_allclose(candidate_logits, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["softmax", "tied"])
def test_logits_for_gradient_touches_only_candidate_rows(kind):
    head = built_head(kind)
    table = head.kernel if kind == "softmax" else head.embedding.embeddings
    with tf.GradientTape() as tape:
        total = ops.sum(head.logits_for(hidden_states(), np.array([1, 4], "int32")))
    gradient = tape.gradient(total, table)
    assert isinstance(gradient, tf.IndexedSlices)  # sparse: no (V, d) dense gradient
    assert sorted(set(gradient.indices.numpy().tolist())) == [1, 4]


# -- scores and the inference cache -------------------------------------------


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_scores_are_log_softmax_of_call(kind):
    head = built_head(kind)
    h_t = hidden_states((4, HIDDEN_DIM))
    expected = ops.log_softmax(head(h_t), axis=-1)
    for cache in (None, head.inference_cache()):
        scores = head.scores(h_t, cache)
        assert tuple(scores.shape) == (4, VOCAB_SIZE)
        np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ops.logsumexp(scores, axis=-1), 0.0, atol=1e-5)


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_cache_reuse_gives_identical_scores(kind):
    head = built_head(kind)
    cache = head.inference_cache()
    h_t = hidden_states((4, HIDDEN_DIM))
    first = ops.convert_to_numpy(head.scores(h_t, cache))
    second = ops.convert_to_numpy(head.scores(h_t, cache))
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_scores_read_the_weights_from_the_cache(kind):
    head = built_head(kind)
    cache = head.inference_cache()
    h_t = hidden_states((4, HIDDEN_DIM))
    before = ops.convert_to_numpy(head.scores(h_t, cache))
    table = head.kernel if kind.startswith("softmax") else head.embedding.embeddings
    table.assign(table * 3.0 + 1.0)
    # A cache is computed once per model: it is what the scores see.
    np.testing.assert_allclose(head.scores(h_t, cache), before, rtol=1e-6, atol=1e-6)
    assert not np.allclose(head.scores(h_t, head.inference_cache()), before, atol=1e-3)


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_inference_cache_contents(kind):
    head = built_head(kind)
    cache = head.inference_cache()
    assert set(cache) == {"output_kernel", "output_bias"}
    output_dim = PROJECTED_EMBEDDING_DIM if kind == "tied_projected" else HIDDEN_DIM
    assert tuple(cache["output_kernel"].shape) == (output_dim, VOCAB_SIZE)
    assert tuple(cache["output_bias"].shape) == (VOCAB_SIZE,)
    table = head.kernel if kind.startswith("softmax") else head.embedding.embeddings
    np.testing.assert_array_equal(np.transpose(cache["output_kernel"]), table)
    if kind == "softmax_no_bias":
        np.testing.assert_array_equal(cache["output_bias"], np.zeros(VOCAB_SIZE))
    else:
        np.testing.assert_array_equal(cache["output_bias"], head.bias)


# -- XLA -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_jit_compiled_matches_eager(kind):
    head = built_head(kind)
    h = tf.constant(hidden_states())
    shared = tf.constant([2, 0, 12], tf.int32)
    per_position = tf.constant(
        np.random.default_rng(4).integers(0, VOCAB_SIZE, size=(2, 3, 2)), tf.int32
    )
    cache = head.inference_cache()

    @tf.function(jit_compile=True)
    def compiled(h, shared, per_position):
        return (
            head(h),
            head.logits_for(h, shared),
            head.logits_for(h, per_position),
            head.scores(h[:, 0], cache),
        )

    eager = (
        head(h),
        head.logits_for(h, shared),
        head.logits_for(h, per_position),
        head.scores(h[:, 0], cache),
    )
    for got, want in zip(compiled(h, shared, per_position), eager):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- constructor arguments -------------------------------------------------------


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SoftmaxHead(0), "Received: vocabulary_size=0"),
        (lambda: SoftmaxHead(-3), "Received: vocabulary_size=-3"),
        (lambda: SoftmaxHead(2.5), "Received: vocabulary_size=2.5"),
        (lambda: SoftmaxHead("10"), "Received: vocabulary_size='10'"),
        (lambda: SoftmaxHead(True), "Received: vocabulary_size=True"),
        (lambda: TiedSoftmaxHead(keras.layers.Dense(4)), "Received: embedding=<Dense"),
        (lambda: TiedSoftmaxHead(None), "Received: embedding=None"),
        (
            lambda: TiedSoftmaxHead(keras.layers.Embedding(5, 4), projection="auto"),
            "Received: projection=auto",
        ),
    ],
    ids=[
        "vocabulary_zero",
        "vocabulary_negative",
        "vocabulary_float",
        "vocabulary_str",
        "vocabulary_bool",
        "embedding_not_embedding",
        "embedding_none",
        "projection_not_bool",
    ],
)
def test_invalid_constructor_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_numpy_int_vocabulary_size_is_accepted():
    head = SoftmaxHead(np.int64(VOCAB_SIZE))
    assert type(head.vocabulary_size) is int
    assert head(hidden_states()).shape == (2, 3, VOCAB_SIZE)
    assert head.get_config()["vocabulary_size"] == VOCAB_SIZE


# -- build_head / head_to_spec ---------------------------------------------------


@pytest.fixture
def target_embedding():
    embedding = keras.layers.Embedding(VOCAB_SIZE, HIDDEN_DIM, name="target_embedding")
    embedding.build((None,))
    return embedding


def test_build_head_by_name_softmax(target_embedding):
    head = build_head("softmax", VOCAB_SIZE, target_embedding, dtype="mixed_bfloat16")
    assert type(head) is SoftmaxHead
    assert head.vocabulary_size == VOCAB_SIZE
    assert head.name == "head"
    assert head.dtype_policy.name == "mixed_bfloat16"


def test_build_head_by_name_tied_gets_the_model_embedding(target_embedding):
    head = build_head("tied", VOCAB_SIZE, target_embedding)
    assert type(head) is TiedSoftmaxHead
    assert head.embedding is target_embedding
    assert head.vocabulary_size == VOCAB_SIZE


@pytest.mark.parametrize("kind", ["softmax", "tied"])
def test_build_head_from_spec_round_trip(kind, target_embedding):
    if kind == "softmax":
        head = SoftmaxHead(VOCAB_SIZE, use_bias=False, name="head")
    else:
        head = TiedSoftmaxHead(target_embedding, projection=True, use_bias=False, name="head")
    spec = head_to_spec(head)
    assert spec["class_name"].startswith("tf_outheads>")
    assert not {"embedding", "dtype", "trainable"} & set(spec["config"])
    rebuilt = build_head(spec, VOCAB_SIZE, target_embedding)
    assert type(rebuilt) is type(head)
    assert rebuilt is not head
    assert head_to_spec(rebuilt) == spec
    if isinstance(rebuilt, TiedSoftmaxHead):
        assert rebuilt.embedding is target_embedding


def test_build_head_spec_config_overrides_defaults(target_embedding):
    spec = {"class_name": "softmax", "config": {"use_bias": False, "name": "output"}}
    head = build_head(spec, VOCAB_SIZE, target_embedding)
    assert head.use_bias is False
    assert head.name == "output"


def test_build_head_returns_an_instance_as_is(target_embedding):
    head = SoftmaxHead(VOCAB_SIZE)
    assert build_head(head, VOCAB_SIZE, target_embedding) is head
    tied = TiedSoftmaxHead(target_embedding)
    assert build_head(tied, VOCAB_SIZE, target_embedding) is tied


def test_build_head_rejects_a_tied_instance_with_another_embedding(target_embedding):
    other = keras.layers.Embedding(VOCAB_SIZE, HIDDEN_DIM)
    with pytest.raises(ValueError, match="must be given by name or spec.*Received: head="):
        build_head(TiedSoftmaxHead(other), VOCAB_SIZE, target_embedding)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_such_head", "Unknown head 'no_such_head'"),
        ({"class_name": "tf_outheads>NoSuchHead"}, "Unknown head"),
        (3, "Received: head=3"),
        ({"config": {}}, "Received: head="),
    ],
    ids=["unknown_name", "unknown_class", "not_a_spec", "spec_without_class"],
)
def test_build_head_invalid_spec(spec, message, target_embedding):
    with pytest.raises(ValueError, match=message):
        build_head(spec, VOCAB_SIZE, target_embedding)
