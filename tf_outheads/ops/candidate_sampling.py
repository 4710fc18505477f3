"""Candidate sets for sampled softmax training: pure tensor math, no Keras state.

Two ways to pick the words a training step scores (the losses live in
`tf_outheads.losses.sampled_softmax`):

- :func:`batch_candidates` — Pappas et al. (2018) §3.2: one set per batch,
  shared by every position: all the batch's target words plus uniformly drawn
  negatives, `K = ⌈p·|V|⌉` words in all (more when the batch has more distinct
  targets than `K`: positives are never dropped).
- :func:`sample_candidates` + :func:`log_expected_count` — the standard
  sampled-softmax estimator (Jean et al. 2015; TensorFlow's
  `tf.nn.sampled_softmax_loss`): `S` negatives drawn *with replacement* from a
  proposal `Q` (uniform, log-uniform/Zipfian, or unigram counts), shared by the
  batch, each position adding its own gold word; logits are corrected by
  `−log(S·Q(w))`, the expected count of `w` among the draws.

Randomness is stateless (`tf.random.stateless_*` with an explicit `(2,)` seed), so
a step's candidates depend only on the seed and the step number: reproducible,
identical after a resume from a checkpoint, and compilable with XLA.
"""

import math

import numpy as np
import tensorflow as tf

SAMPLERS = ("uniform", "log_uniform", "unigram")


def num_candidates_for(fraction, vocabulary_size):
    """`K = ⌈p·|V|⌉`, the candidate count of a sampling percentage (Pappas Table 4).

    Raises:
        ValueError: `fraction` outside `(0, 1]`.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
        raise ValueError(f"`fraction` must be in (0, 1]. Received: fraction={fraction!r}")
    # Rounding guard: 0.25 · 128000 must give 32000, not 32001 through float error.
    return min(int(vocabulary_size), max(1, math.ceil(fraction * vocabulary_size - 1e-9)))


def batch_candidates(targets, vocabulary_size, num_candidates, seed, static_size=False):
    """One candidate set for a whole batch: its target words + uniform negatives.

    Positive words come first (in increasing id order), then negatives drawn
    uniformly *without replacement* from the words that are not targets of the
    batch, until the set has `max(num_candidates, #distinct targets)` words.
    Every id of `targets` is a positive, padding included when present (as in
    the authors' code; its column is harmless: padded positions are masked).

    Args:
        targets: int tensor of any shape, the gold ids of the batch.
        vocabulary_size: int `V`.
        num_candidates: int `K`, the set size to reach (`⌈p·V⌉`).
        seed: int tensor `(2,)`, the stateless seed of this step.
        static_size: bool. If `True` the set size is `max(K, min(V, N))` with `N`
            the number of target positions — it depends on shapes only, so
            XLA can compile it (a data-dependent size cannot be); the set then
            holds extra negatives when `N > K`. If `False` the size is exactly
            `max(K, #distinct targets)`. Defaults to `False`.

    Returns:
        `(candidate_ids (k,) int32, labels)`: `labels` has the shape of
        `targets`, the index of each target in `candidate_ids`.

    References:
        Pappas, Miculicich & Henderson 2018, §3.2 and Table 4. Their code
        crashes when a batch has more distinct targets than `K`; here the set
        grows instead.
    """
    targets = tf.cast(targets, tf.int32)
    flat = tf.reshape(targets, [-1])
    is_positive = tf.math.unsorted_segment_max(
        tf.ones_like(flat), flat, num_segments=vocabulary_size) > 0  # (V,)
    # Positives get priority 2 + id-rank tie breaker < 3; negatives U[0, 1).
    noise = tf.random.stateless_uniform((vocabulary_size,), seed=seed, dtype=tf.float32)
    order = tf.range(vocabulary_size, dtype=tf.float32) / float(vocabulary_size)
    priority = tf.where(is_positive, 3.0 - order, noise)
    if static_size:
        size = tf.minimum(vocabulary_size, tf.maximum(num_candidates, tf.size(flat)))
    else:
        size = tf.maximum(num_candidates, tf.reduce_sum(tf.cast(is_positive, tf.int32)))
    _, candidate_ids = tf.math.top_k(priority, k=size, sorted=True)
    # Position of every word in the set (−1: not a candidate) → labels.
    position = tf.tensor_scatter_nd_update(
        tf.fill([vocabulary_size], -1), candidate_ids[:, None],
        tf.range(tf.shape(candidate_ids)[0], dtype=tf.int32))
    labels = tf.gather(position, targets)
    return candidate_ids, labels


def _check_sampler(sampler, vocabulary_size, unigram_counts):
    if sampler not in SAMPLERS:
        raise ValueError(f"`sampler` must be one of {SAMPLERS}. Received: sampler={sampler!r}")
    if sampler == "unigram":
        if unigram_counts is None:
            raise ValueError("`sampler='unigram'` needs `unigram_counts` (one count per word). "
                             "Received: unigram_counts=None")
        if int(unigram_counts.shape[0]) != int(vocabulary_size):
            raise ValueError(
                f"`unigram_counts` must have one entry per word ({vocabulary_size}). "
                f"Received: unigram_counts of shape {tuple(unigram_counts.shape)}")


def unigram_log_probabilities(unigram_counts, distortion=1.0):
    """`log Q(w)` of the unigram proposal `Q(w) ∝ (count(w) + 1)^distortion`.

    Add-one smoothing keeps every word reachable: a gold word with `Q = 0`
    would get an infinite correction.
    """
    counts = tf.cast(unigram_counts, tf.float64) + 1.0
    logits = distortion * tf.math.log(counts)
    return tf.cast(logits - tf.reduce_logsumexp(logits), tf.float32)


def log_proposal(sampler, ids, vocabulary_size, unigram_log_probs=None):
    """`log Q(ids)` under a sampler's proposal distribution, float32.

    - `"uniform"`: `Q(w) = 1/V`;
    - `"log_uniform"`: `Q(w) = log((w + 2)/(w + 1)) / log(V + 1)` (Zipfian; right
      when ids are sorted by decreasing frequency, as SentencePiece's roughly are);
    - `"unigram"`: the table of :func:`unigram_log_probabilities`.
    """
    ids = tf.cast(ids, tf.int32)
    if sampler == "uniform":
        return tf.fill(tf.shape(ids), -math.log(vocabulary_size))
    if sampler == "log_uniform":
        ids64 = tf.cast(ids, tf.float64)
        q = tf.math.log1p(1.0 / (ids64 + 1.0)) / math.log(vocabulary_size + 1.0)
        return tf.cast(tf.math.log(q), tf.float32)
    return tf.gather(unigram_log_probs, ids)


def sample_candidates(sampler, num_sampled, vocabulary_size, seed, unigram_log_probs=None):
    """`num_sampled` ids drawn independently (with replacement) from `Q`.

    Args:
        sampler: `"uniform"`, `"log_uniform"` or `"unigram"`.
        num_sampled: int `S`.
        vocabulary_size: int `V`.
        seed: int tensor `(2,)`.
        unigram_log_probs: float `(V,)` from :func:`unigram_log_probabilities`,
            for `"unigram"`.

    Returns:
        int32 `(S,)`.
    """
    if sampler == "uniform":
        return tf.random.stateless_uniform(
            (num_sampled,), seed=seed, minval=0, maxval=vocabulary_size, dtype=tf.int32)
    if sampler == "log_uniform":
        # Inverse CDF of the Zipfian: F(w) = log(w + 2) / log(V + 1).
        u = tf.random.stateless_uniform((num_sampled,), seed=seed, dtype=tf.float64)
        ids = tf.floor(tf.exp(u * math.log(vocabulary_size + 1.0))) - 1.0
        return tf.clip_by_value(tf.cast(ids, tf.int32), 0, vocabulary_size - 1)
    return tf.reshape(tf.random.stateless_categorical(
        unigram_log_probs[None, :], num_sampled, seed=seed, dtype=tf.int32), [-1])


def log_expected_count(sampler, ids, num_sampled, vocabulary_size, unigram_log_probs=None):
    """`log(S·Q(ids))`: how often `ids` are expected among `S` draws with replacement."""
    return log_proposal(sampler, ids, vocabulary_size, unigram_log_probs) + math.log(num_sampled)


def step_seed(seed, step, replica_id=0):
    """The `(2,)` stateless seed of one training step (and replica).

    Different replicas of a distributed step draw different candidates.
    """
    seed = tf.cast(seed, tf.int64) + 1_000_003 * tf.cast(replica_id, tf.int64)
    return tf.stack([seed, tf.cast(step, tf.int64)])


def proposal_probabilities(sampler, vocabulary_size, unigram_counts=None, distortion=1.0):
    """`Q` over the whole vocabulary as a numpy array (for tests and docs)."""
    _check_sampler(sampler, vocabulary_size, unigram_counts)
    table = None
    if sampler == "unigram":
        table = unigram_log_probabilities(unigram_counts, distortion)
    ids = tf.range(vocabulary_size)
    return np.exp(log_proposal(sampler, ids, vocabulary_size, table).numpy().astype(np.float64))
