"""Tests for `tf_outheads.JointEmbeddingHead`: every variant of Pappas et al. Table 3."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tests.layers.test_heads import global_dtype_policy
from tests.layers.test_heads import hidden_states
from tests.testing import run_layer_test
from tf_outheads import JointEmbeddingHead
from tf_outheads import TiedSoftmaxHead
from tf_outheads.layers.heads import build_head
from tf_outheads.layers.heads import head_to_spec

VOCAB_SIZE = 13
HIDDEN_DIM = 8
EMBEDDING_DIM = 5  # != HIDDEN_DIM, so every projection has a real shape
JOINT_DIM = 6

# name -> (constructor arguments, embedding size, trainable weights incl. E)
VARIANTS = {
    "full": ({"joint_dim": JOINT_DIM}, EMBEDDING_DIM, 6),
    "full_default_dim": ({}, EMBEDDING_DIM, 6),
    "output_structure_7a": ({"context_structure": False}, EMBEDDING_DIM, 4),
    "context_structure_7b": ({"output_structure": False}, EMBEDDING_DIM, 4),
    "bilinear_6": (
        {"output_structure": False, "activation": "linear", "projection_bias": False},
        EMBEDDING_DIM,
        3,
    ),
    "no_projection_18": (
        {"output_structure": False, "context_structure": False}, HIDDEN_DIM, 2
    ),
    "no_bias": ({"joint_dim": JOINT_DIM, "use_bias": False}, EMBEDDING_DIM, 5),
}


def make_head(variant, **kwargs):
    arguments, embedding_dim, _ = VARIANTS[variant]
    embedding = keras.layers.Embedding(VOCAB_SIZE, embedding_dim)
    arguments = dict(arguments, **kwargs)
    arguments.setdefault("bias_initializer", "random_normal")  # biases visible in checks
    return JointEmbeddingHead(embedding, **arguments)


def built_head(variant, **kwargs):
    head = make_head(variant, **kwargs)
    head.build((None, None, HIDDEN_DIM))
    return head


def numpy_logits(head, h):
    """Eq. 14/15 written out in numpy from the head's variables."""
    name = keras.activations.serialize(head.activation)
    name = name if isinstance(name, str) else name["config"]
    sigma = {"tanh": np.tanh, "linear": lambda x: x}[name]
    table = ops.convert_to_numpy(head.embedding.embeddings)
    if head.output_projection is not None:
        table = table @ ops.convert_to_numpy(head.output_projection.kernel)
        if head.output_projection.bias is not None:
            table = table + ops.convert_to_numpy(head.output_projection.bias)
        table = sigma(table)
    projected = h
    if head.context_projection is not None:
        projected = h @ ops.convert_to_numpy(head.context_projection.kernel)
        if head.context_projection.bias is not None:
            projected = projected + ops.convert_to_numpy(head.context_projection.bias)
        projected = sigma(projected)
    logits = projected @ table.T
    if head.bias is not None:
        logits = logits + ops.convert_to_numpy(head.bias)
    return logits


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_run_layer_test(variant):
    # config round trip, fit step, `.keras` (safe_mode) and SavedModel reloads
    run_layer_test(
        lambda: make_head(variant),
        hidden_states(),
        (2, 3, VOCAB_SIZE),
        expected_num_trainable_weights=VARIANTS[variant][2],
        expected_num_non_trainable_weights=0,
        fit_loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        fit_targets=np.array([[1, 4, 12], [0, 7, 7]], "int32"),
        atol=1e-5,
    )


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_follow_the_paper_formula(variant):
    head = built_head(variant)
    h = hidden_states()
    np.testing.assert_allclose(head(h), numpy_logits(head, h), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "variant, joint_dim",
    [("full", JOINT_DIM), ("full_default_dim", EMBEDDING_DIM),
     ("output_structure_7a", HIDDEN_DIM), ("context_structure_7b", EMBEDDING_DIM),
     ("bilinear_6", EMBEDDING_DIM), ("no_projection_18", HIDDEN_DIM)],
)
def test_joint_space_size(variant, joint_dim):
    head = built_head(variant)
    assert tuple(head.output_weights().shape) == (VOCAB_SIZE, joint_dim)
    assert tuple(head.project_hidden(hidden_states()).shape) == (2, 3, joint_dim)


def test_the_embedding_variable_is_shared_not_copied():
    head = built_head("full")
    table = head.embedding.embeddings
    assert sum(w is table for w in head.weights) == 1
    before = ops.convert_to_numpy(head(hidden_states()))
    table.assign(table * 2.0)
    assert not np.allclose(head(hidden_states()), before, atol=1e-4)


# -- Eq. 18: weight tying is the degenerate joint head ------------------------


def _tied_reference(embedding, bias):
    tied = TiedSoftmaxHead(embedding, projection=False)
    tied.build((None, None, HIDDEN_DIM))
    tied.bias.assign(bias)
    return tied


def test_identity_projections_equal_the_tied_head():
    embedding = keras.layers.Embedding(VOCAB_SIZE, HIDDEN_DIM)
    head = JointEmbeddingHead(
        embedding, joint_dim=HIDDEN_DIM, activation="linear",
        kernel_initializer="identity", bias_initializer="random_normal",
    )
    head.build((None, None, HIDDEN_DIM))
    head.output_projection.bias.assign(np.zeros(HIDDEN_DIM, "float32"))
    head.context_projection.bias.assign(np.zeros(HIDDEN_DIM, "float32"))
    tied = _tied_reference(embedding, head.bias)
    h = hidden_states(seed=3)
    np.testing.assert_allclose(head(h), tied(h), rtol=1e-6, atol=1e-6)
    candidates = np.array([0, 5, 12], "int32")
    np.testing.assert_allclose(
        head.logits_for(h, candidates), tied.logits_for(h, candidates), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(head.scores(h[:, 0]), tied.scores(h[:, 0]), rtol=1e-6, atol=1e-6)


def test_no_projections_is_exactly_the_tied_head():
    head = built_head("no_projection_18")
    tied = _tied_reference(head.embedding, head.bias)
    h = hidden_states(seed=4)
    np.testing.assert_array_equal(head(h), tied(h))


# -- the head contract ----------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_logits_for_shared_and_per_position_candidates_match_call(variant):
    head = built_head(variant)
    h = hidden_states()
    logits = ops.convert_to_numpy(head(h))
    shared = np.array([3, 0, 12, 3], "int32")
    np.testing.assert_allclose(head.logits_for(h, shared), logits[..., shared],
                               rtol=1e-5, atol=1e-6)
    per_position = np.random.default_rng(2).integers(0, VOCAB_SIZE, (2, 3, 4)).astype("int32")
    np.testing.assert_allclose(head.logits_for(h, per_position),
                               np.take_along_axis(logits, per_position, axis=-1),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["full", "output_structure_7a", "bilinear_6"])
def test_logits_for_projects_only_the_candidate_rows(variant):
    head = built_head(variant)
    calls = []
    project = head._project_outputs
    head._project_outputs = lambda rows: calls.append(tuple(rows.shape)) or project(rows)
    with tf.GradientTape() as tape:
        total = ops.sum(head.logits_for(hidden_states(), np.array([1, 4], "int32")))
    assert calls == [(2, head.embedding.output_dim)]  # 2 rows, not |V|
    gradient = tape.gradient(total, head.embedding.embeddings)
    assert isinstance(gradient, tf.IndexedSlices)
    assert sorted(set(gradient.indices.numpy().tolist())) == [1, 4]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_output_embedding_is_computed_once_per_call(variant):
    head = built_head(variant)
    calls = []
    project = head._project_outputs
    head._project_outputs = lambda rows: calls.append(tuple(rows.shape)) or project(rows)
    head(hidden_states((4, 7, HIDDEN_DIM)))  # 28 positions, one E'
    assert len(calls) == 1


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_scores_use_the_cached_output_embedding(variant):
    head = built_head(variant)
    cache = head.inference_cache()
    np.testing.assert_allclose(cache["output_kernel"], np.transpose(head.output_weights()),
                               rtol=1e-6, atol=1e-6)
    h_t = hidden_states((4, HIDDEN_DIM))
    expected = ops.convert_to_numpy(ops.log_softmax(head(h_t), axis=-1))
    np.testing.assert_allclose(head.scores(h_t, cache), expected, rtol=1e-5, atol=1e-5)
    # Once cached, E' is not recomputed at a step: changing E changes nothing.
    head.embedding.embeddings.assign(head.embedding.embeddings * 3.0 + 1.0)
    np.testing.assert_allclose(head.scores(h_t, cache), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_mixed_precision_gives_float32_logits(variant, policy):
    compute_dtype = policy.split("_")[1]
    h = hidden_states()
    with global_dtype_policy(policy):
        head = make_head(variant)
        logits = head(h)
        candidate_logits = head.logits_for(ops.cast(h, compute_dtype), np.array([1, 5]))
        scores = head.scores(ops.cast(h[:, 0], compute_dtype))
    assert head.compute_dtype == compute_dtype
    assert keras.backend.standardize_dtype(head.output_weights().dtype) == compute_dtype
    assert all(w.dtype == "float32" for w in head.weights)
    for output in (logits, candidate_logits, scores):
        assert keras.backend.standardize_dtype(output.dtype) == "float32"
    tolerance = 0.05 if compute_dtype == "float16" else 0.2
    np.testing.assert_allclose(logits, numpy_logits(head, h), atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_jit_compiled_matches_eager(variant):
    head = built_head(variant)
    h = tf.constant(hidden_states())
    shared = tf.constant([2, 0, 12], tf.int32)
    cache = head.inference_cache()

    @tf.function(jit_compile=True)
    def compiled(h, shared):
        return head(h), head.logits_for(h, shared), head.scores(h[:, 0], cache)

    eager = (head(h), head.logits_for(h, shared), head.scores(h[:, 0], cache))
    for got, want in zip(compiled(h, shared), eager):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# The full head and the plain projection in the default run, the other ablations in the
# slow set (~5 s each; issue 37).
@pytest.mark.parametrize("variant", [
    variant if variant in ("full", "no_projection_18") else pytest.param(variant, marks=pytest.mark.slow)
    for variant in sorted(VARIANTS)])
def test_jit_compiled_fit_step_trains(variant):
    embedding = keras.layers.Embedding(VOCAB_SIZE, VARIANTS[variant][1])
    inputs = keras.Input((3, HIDDEN_DIM))
    head = JointEmbeddingHead(embedding, **VARIANTS[variant][0])
    model = keras.Model(inputs, head(inputs))
    model.compile(optimizer=keras.optimizers.Adam(0.05), jit_compile=True,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    h = hidden_states((8, 3, HIDDEN_DIM))
    targets = np.arange(24).reshape(8, 3) % VOCAB_SIZE
    losses = model.fit(h, targets, epochs=15, verbose=0).history["loss"]
    assert losses[-1] < losses[0]


# -- capacity (Pappas et al. Eq. 8–10, 16) ------------------------------------


@pytest.mark.parametrize(
    "variant, expected",
    [
        # d·d_j + d_j·d_h + |V| + the two projection biases
        ("full", EMBEDDING_DIM * JOINT_DIM + JOINT_DIM * HIDDEN_DIM + VOCAB_SIZE + 2 * JOINT_DIM),
        # d·d_h + |V| (+ one projection bias)
        ("output_structure_7a", EMBEDDING_DIM * HIDDEN_DIM + VOCAB_SIZE + HIDDEN_DIM),
        ("context_structure_7b", HIDDEN_DIM * EMBEDDING_DIM + VOCAB_SIZE + EMBEDDING_DIM),
        ("bilinear_6", HIDDEN_DIM * EMBEDDING_DIM + VOCAB_SIZE),
        ("no_projection_18", VOCAB_SIZE),
    ],
)
def test_output_capacity_formula(variant, expected):
    capacity = built_head(variant).output_capacity()
    assert capacity["parameters"] == expected
    assert capacity["equation"].startswith(
        {"full": "Eq. 16", "no_projection_18": "Eq. 9"}.get(variant, "Eq. 10")
    )


# -- construction and build_head --------------------------------------------------


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"joint_dim": 0}, "Received: joint_dim=0"),
        ({"joint_dim": 2.5}, "Received: joint_dim=2.5"),
        ({"joint_dim": 4, "context_structure": False}, "joint_dim=4"),
        ({"output_structure": "yes"}, "Received: output_structure='yes'"),
        ({"use_bias": None}, "Received: use_bias=None"),
    ],
)
def test_invalid_arguments(arguments, message):
    embedding = keras.layers.Embedding(VOCAB_SIZE, EMBEDDING_DIM)
    with pytest.raises(ValueError, match=message):
        JointEmbeddingHead(embedding, **arguments)


def test_embedding_must_be_an_embedding_layer():
    with pytest.raises(ValueError, match="keras.layers.Embedding"):
        JointEmbeddingHead(keras.layers.Dense(4))


def test_no_projection_needs_equal_sizes():
    head = JointEmbeddingHead(keras.layers.Embedding(VOCAB_SIZE, EMBEDDING_DIM),
                              output_structure=False, context_structure=False)
    with pytest.raises(ValueError, match="hidden_dim=8, embedding_dim=5"):
        head.build((None, HIDDEN_DIM))


def test_build_head_by_name_and_spec():
    embedding = keras.layers.Embedding(VOCAB_SIZE, EMBEDDING_DIM, name="target_embedding")
    embedding.build((None,))
    head = build_head({"class_name": "joint", "config": {"joint_dim": 7}}, VOCAB_SIZE, embedding)
    assert type(head) is JointEmbeddingHead and head.embedding is embedding
    spec = head_to_spec(head)
    assert "embedding" not in spec["config"] and spec["config"]["joint_dim"] == 7
    again = build_head(spec, VOCAB_SIZE, embedding)
    assert again.get_config() == head.get_config()
