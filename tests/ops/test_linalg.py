"""`tf_outheads.ops.linalg`: one-row products on TensorFlow's own batch-matmul kernel give
what `tf.linalg.matmul` / `tf.linalg.matvec` give, values and gradients, in every dtype."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.ops.linalg import matvec, row_matmul

RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 2, 1, 5)).astype("float32")  # one row per (batch, head)
Y = RNG.normal(size=(3, 2, 5, 7)).astype("float32")
Y_T = RNG.normal(size=(3, 2, 7, 5)).astype("float32")


def graph_op_types(fn, *args):
    return [op.type for op in tf.function(fn).get_concrete_function(*args).graph.get_operations()]


@pytest.mark.parametrize("adj_y", [False, True])
def test_row_matmul_is_matmul(adj_y):
    y = tf.constant(Y_T if adj_y else Y)
    x = tf.constant(X)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, y])
        ours = row_matmul(x, y, adj_y=adj_y)
        reference = tf.linalg.matmul(x, y, transpose_b=adj_y)
        weights = np.arange(7, dtype="float32")
        ours_loss, reference_loss = (tf.reduce_sum(ours * weights),
                                     tf.reduce_sum(reference * weights))
    assert ours.shape == (3, 2, 1, 7)
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)
    for ours_gradient, gradient in zip(tape.gradient(ours_loss, [x, y]),
                                       tape.gradient(reference_loss, [x, y])):
        np.testing.assert_allclose(ours_gradient, gradient, rtol=1e-6, atol=1e-6)
    # Float32 runs on BatchMatMulV3, which oneDNN's graph rewrite leaves to TensorFlow.
    types = graph_op_types(lambda a, b: row_matmul(a, b, adj_y=adj_y), x, y)
    assert "BatchMatMulV3" in types and "Transpose" not in types


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_row_matmul_in_other_dtypes(dtype):
    x, y = tf.cast(X, dtype), tf.cast(Y_T, dtype)
    ours = row_matmul(x, y, adj_y=True)
    assert ours.dtype == dtype
    np.testing.assert_allclose(tf.cast(ours, "float32"),
                               tf.cast(tf.linalg.matmul(x, y, transpose_b=True), "float32"),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("transpose_a", [False, True])
def test_matvec_is_tf_matvec(transpose_a):
    matrix = tf.constant(RNG.normal(size=(4, 6, 3)).astype("float32"))
    vector = tf.constant(RNG.normal(size=(4, 6 if transpose_a else 3)).astype("float32"))
    ours = matvec(matrix, vector, transpose_a=transpose_a)
    reference = tf.linalg.matvec(matrix, vector, transpose_a=transpose_a)
    assert ours.shape == reference.shape == (4, 3 if transpose_a else 6)
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)
