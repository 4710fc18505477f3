"""Random sampling in the greedy loop: temperature, top-k and nucleus (top-p).

At every step a sampled sentence draws its next piece from the head's
distribution over the vocabulary, sharpened or flattened by a temperature T,
cut to its k most probable pieces (top-k, Fan et al. 2018) and to the smallest
set of pieces whose probability reaches p (nucleus sampling, Holtzman et al.
2020), in that order, as fairseq and Hugging Face apply them:

    scaled = log_scores / T
    keep the pieces ranked < k (k = 0: all) whose probability mass ranked
    before them, under softmax(scaled), is < p
    piece  = argmax(scaled[kept] + Gumbel noise)          (the Gumbel-max trick)

The score a sampled sentence carries is the model's own: the sum of the
unscaled log-scores of the pieces it drew (what forced decoding gives the
same output), whatever T, k and p shaped the draw; it ranks or filters
samples (back-translations) by the model's probability.

**The noise is a function of (the sentence's seed, the step, the piece)**: a
counter-based hash (`_hash32`, "lowbias32"), not a random-number state. A
sentence's sample therefore depends on its own seed only, never on the batch it
was decoded in, its position in that batch, the batches before it, or the
host (up to the float rounding a batch's shape brings to the log-scores, as
for greedy search: a near-tie may then fall the other way): `Translator` (length-sorted batches), the CLI and the exported
SavedModel (one request) draw the same sample for the same source, seed and
index. Each host gives the source at position i of a call (a request) the seed
`row_seeds(seed, i)`.

Sampling needs a distribution: a head whose decoding scores are not
log-probabilities (a continuous head with `scoring="cosine"` or
`"log_likelihood"`) is refused by the hosts; the continuous head's default,
`scoring="posterior"`, samples from its posterior over the vocabulary.
"""

from typing import NamedTuple

import tensorflow as tf

# lowbias32's constants (Chris Wellons' integer hash prospector): a bijection of
# uint32 with a bias of 0.17 (a strong avalanche) in two multiplies.
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_GOLDEN = 0x9E3779B9


class Sampling(NamedTuple):
    """How the rows of a greedy search draw their pieces.

    Every field is a Python value (the same for every row) or a `(batch,)`
    tensor (one per row: the exported signature's per-request options).

    Args:
        seeds: uint32 `(batch,)`, each row's seed (`row_seeds`).
        topk: int, pieces kept (0: the whole vocabulary).
        topp: float in (0, 1], the nucleus' probability mass (1: no cut).
        temperature: float > 0.
        enabled: `None` (every row samples) or bool `(batch,)`: rows that
            do not sample take the arg-max, as plain greedy search does.
    """

    seeds: tf.Tensor
    topk: object = 0
    topp: object = 1.0
    temperature: object = 1.0
    enabled: object = None

    def gather(self, rows):
        """The fields of the rows `rows` (indices into the batch): what a compacted
        search reads at a step."""
        def pick(value):
            return tf.gather(value, rows) if isinstance(value, tf.Tensor) else value
        return Sampling(*(pick(value) for value in self))


def _hash32(x):
    """lowbias32 of a uint32 tensor (element-wise)."""
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(16, tf.uint32)))
    x = x * tf.constant(_M1, tf.uint32)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(15, tf.uint32)))
    x = x * tf.constant(_M2, tf.uint32)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(16, tf.uint32)))


def row_seeds(seed, indices):
    """uint32 `(B,)` seeds of the sources at positions `indices` of a call made with `seed`.

    Args:
        seed: int64 scalar or `(B,)` tensor (or a Python int in `[0, 2**63)`).
        indices: int `(B,)`, each source's position in its call or request.
    """
    seed = tf.cast(seed, tf.int64)
    low = tf.cast(tf.bitwise.bitwise_and(seed, 0xFFFFFFFF), tf.uint32)
    high = tf.cast(tf.bitwise.right_shift(seed, 32), tf.uint32)
    index = tf.cast(tf.cast(indices, tf.int64), tf.uint32)
    mixed = _hash32(tf.bitwise.bitwise_xor(_hash32(high + tf.constant(_GOLDEN, tf.uint32)),
                                           low))
    return _hash32(tf.bitwise.bitwise_xor(mixed, _hash32(index)))


def _uniform(seeds, step, vocab_size):
    """Uniform noise in (0, 1), `(B, V)` float32, from each row's seed, the step and the
    piece id: 24 bits of the hash, centred in their cell, so never 0 or 1."""
    step_key = _hash32(tf.cast(step, tf.uint32) * tf.constant(_GOLDEN, tf.uint32)
                       + tf.constant(1, tf.uint32))
    row_key = _hash32(tf.bitwise.bitwise_xor(seeds, step_key))  # (B,)
    pieces = tf.range(vocab_size, dtype=tf.int32)
    piece_key = tf.cast(pieces, tf.uint32) * tf.constant(_GOLDEN, tf.uint32)  # (V,)
    bits = _hash32(tf.bitwise.bitwise_xor(row_key[:, tf.newaxis], piece_key[tf.newaxis, :]))
    bits = tf.bitwise.right_shift(bits, tf.constant(8, tf.uint32))
    return (tf.cast(bits, tf.float32) + 0.5) * (1.0 / (1 << 24))


def _per_row(value, dtype):
    """A `(B, 1)` tensor of a per-row field, or the Python value as a tensor."""
    if isinstance(value, tf.Tensor):
        return tf.cast(value, dtype)[:, tf.newaxis]
    return tf.constant(value, dtype)


def filtered_scores(log_scores, sampling):
    """`log_scores / T` with every piece outside the top-k and the nucleus at -inf.

    Args:
        log_scores: float32 `(B, V)`.
        sampling: `Sampling` (per-row fields `(B,)`).
    """
    scaled = log_scores / _per_row(sampling.temperature, tf.float32)
    static = not isinstance(sampling.topk, tf.Tensor) and not isinstance(sampling.topp,
                                                                         tf.Tensor)
    if static and sampling.topk <= 0 and sampling.topp >= 1.0:
        return scaled  # the whole distribution: no sort
    vocab_size = tf.shape(scaled)[-1]
    ranked = tf.sort(scaled, axis=-1, direction="DESCENDING")  # (B, V)
    rank = tf.range(vocab_size)[tf.newaxis, :]
    topk = _per_row(sampling.topk, tf.int32)
    keep = tf.logical_or(rank < topk, topk <= 0)
    # Mass ranked before each piece (exclusive cumsum); the first piece is always kept.
    before = tf.math.cumsum(tf.nn.softmax(ranked, axis=-1), axis=-1, exclusive=True)
    keep = tf.logical_and(keep, before < _per_row(sampling.topp, tf.float32))
    keep = tf.logical_or(keep, rank == 0)
    threshold = tf.reduce_min(tf.where(keep, ranked, float("inf")), axis=-1, keepdims=True)
    return tf.where(scaled >= threshold, scaled, float("-inf"))


def sample_words(log_scores, step, sampling):
    """The pieces `(B,)` int32 the rows draw at `step` (`enabled` rows; the others the
    arg-max).

    Args:
        log_scores: float32 `(B, V)`, the head's log-probabilities (EOS already
            at -inf while `min_length` forbids it).
        step: int32 scalar, the step (0 for the first piece).
        sampling: `Sampling` of these rows.
    """
    noise = _uniform(sampling.seeds, step, tf.shape(log_scores)[-1])
    gumbel = -tf.math.log(-tf.math.log(noise))
    words = tf.argmax(filtered_scores(log_scores, sampling) + gumbel, axis=-1,
                      output_type=tf.int32)
    if sampling.enabled is None:
        return words
    return tf.where(sampling.enabled, words,
                    tf.argmax(log_scores, axis=-1, output_type=tf.int32))


__all__ = ["Sampling", "filtered_scores", "row_seeds", "sample_words"]
