"""Tests for `tf_outheads.LazyAdam`."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_outheads import LazyAdam, SampledSoftmaxLoss, compile_for_translation
from tests.losses.test_sampled_softmax import _seq2seq_data, _small_model


def numpy_adam(rows, grads, lr=0.1, b1=0.9, b2=0.999, eps=1e-7):
    """Adam on the given rows only, over a list of per-step dense gradients."""
    m = np.zeros_like(rows)
    v = np.zeros_like(rows)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        alpha = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        rows = rows - alpha * m / (np.sqrt(v) + eps)
    return rows


def test_dense_gradients_are_plain_adam():
    start = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    variables = [keras.Variable(start.copy()), keras.Variable(start.copy())]
    lazy, adam = LazyAdam(0.1), keras.optimizers.Adam(0.1)
    for step in range(3):
        gradient = tf.constant(np.random.default_rng(step).normal(size=(5, 3)).astype("float32"))
        lazy.apply_gradients([(gradient, variables[0])])
        adam.apply_gradients([(gradient, variables[1])])
    np.testing.assert_allclose(variables[0].numpy(), variables[1].numpy(), rtol=1e-6)


def test_sparse_gradients_update_only_their_rows():
    rng = np.random.default_rng(1)
    start = rng.normal(size=(6, 2)).astype("float32")
    variable = keras.Variable(start.copy())
    optimizer = LazyAdam(0.1)
    # Step 1 touches rows 1 and 4 (row 4 twice: summed); step 2 touches rows 4 and 5.
    steps = [([1, 4, 4], rng.normal(size=(3, 2))), ([4, 5], rng.normal(size=(2, 2)))]
    for indices, values in steps:
        gradient = tf.IndexedSlices(tf.constant(values, tf.float32), tf.constant(indices),
                                    tf.constant([6, 2]))
        optimizer.apply_gradients([(gradient, variable)])
    result = variable.numpy()
    np.testing.assert_array_equal(result[[0, 2, 3]], start[[0, 2, 3]])
    # Row 1: one Adam step. Row 4: two steps, first with the summed duplicates.
    np.testing.assert_allclose(result[1], numpy_adam(start[1], [steps[0][1][0]]), rtol=1e-5, atol=1e-6)
    row4 = [steps[0][1][1] + steps[0][1][2], steps[1][1][0]]
    np.testing.assert_allclose(result[4], numpy_adam(start[4], row4), rtol=1e-5, atol=1e-6)
    # Row 5 first moves at step 2, with step 2's bias correction (as lazy Adam does).
    m, v = 0.1 * steps[1][1][1], 0.001 * steps[1][1][1] ** 2
    alpha = 0.1 * np.sqrt(1 - 0.999 ** 2) / (1 - 0.9 ** 2)
    np.testing.assert_allclose(result[5], start[5] - alpha * m / (np.sqrt(v) + 1e-7), rtol=1e-5, atol=1e-6)


def test_amsgrad_refused():
    with pytest.raises(ValueError, match="amsgrad"):
        LazyAdam(amsgrad=True)


def test_sampled_training_with_lazy_adam_leaves_unsampled_rows():
    keras.utils.set_random_seed(3)
    x, y = _seq2seq_data()
    model = _small_model("softmax")
    compile_for_translation(model, learning_rate=1e-2, optimizer="lazy_adam",
                            loss=SampledSoftmaxLoss(fraction=0.3, seed=1))
    assert isinstance(model.optimizer, LazyAdam)
    kernel_before = model.head.kernel.numpy().copy()
    history = model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])
    changed = np.flatnonzero(np.any(model.head.kernel.numpy() != kernel_before, axis=1))
    # One step over the 16 sentences: the candidate set of that batch, no more.
    targets = set(np.unique(y).tolist())
    assert targets <= set(changed.tolist())
    assert len(changed) == max(18, len(targets))  # K = ceil(0.3 · 60) = 18


def test_lazy_adam_serializes():
    optimizer = LazyAdam(learning_rate=2e-3, clipnorm=5.0)
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(clone, LazyAdam)
    assert clone.get_config() == optimizer.get_config()
