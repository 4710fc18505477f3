"""Products of one row per batch entry, on the CPU kernel that runs them fastest.

A decoding step (and each step of the fused LSTM's loops) multiplies one query
row per sentence (and head) by that sentence's keys or memory: `(1 × K)·(K × S)`
products, a few hundred at ~1 MFLOP each. oneDNN, which TensorFlow's graph
rewrite gives every `BatchMatMulV2` (`tf.linalg.matmul`, `matvec`, `einsum`),
runs these 1.4–5× slower on CPU than TensorFlow's own kernel, which it leaves
`BatchMatMulV3` to (benchmarks/docs/training.md, "one-position attention"). For T
rows at once (a training pass's attention) oneDNN's is ~3× faster, so only the
one-row products come here.
"""

import tensorflow as tf


def row_matmul(x, y, adj_y=False):
    """`x (..., 1, K) · y (..., K, N)`, or `· yᵀ` for `y (..., N, K)` with `adj_y`.

    The same values as `tf.linalg.matmul(x, y, transpose_b=adj_y)`, `y` read
    transposed in place. Float32 runs on `BatchMatMulV3` (the CPU has no float16
    kernel of it); other dtypes on `tf.linalg.matmul`.
    """
    if x.dtype == tf.float32:
        return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=x.dtype, adj_y=adj_y)
    return tf.linalg.matmul(x, y, transpose_b=adj_y)


def matvec(matrix, vector, transpose_a=False):
    """`tf.linalg.matvec`: `matrix (..., M, N) · vector (..., N)` → `(..., M)`, or
    `matrixᵀ · vector (..., M)` → `(..., N)` with `transpose_a`, by `row_matmul`."""
    rows = row_matmul(vector[..., None, :], matrix, adj_y=not transpose_a)
    return rows[..., 0, :]
