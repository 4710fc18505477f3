"""The finished hypotheses of a beam search: their pool, the stopping rule, the n-best.

A hypothesis that ends (EOS, or its sentence's limit) among the top `k`
candidates of a step joins a pool of the `k` best finished hypotheses of its
sentence, ranked by normalised score (`tf_outheads.decoding.penalties`). A
sentence stops once no alive hypothesis can beat the pool's `n`-th best
(`best_reachable_scores`, `sentences_done`); `n_best` reads the result.
"""

import math
from typing import NamedTuple

import tensorflow as tf

from tf_outheads.data.special_tokens import PAD_ID

# The log-probability of a dead beam, an empty slot, a forbidden word. A
# Python float, so that each graph gets its own constant (a module-level
# tensor would be captured as an input).
_NEG_INF = -math.inf


class BeamResult(NamedTuple):
    """What `beam_search` returns: the n-best hypotheses of every sentence.

    A named tuple, so that it passes through `tf.nest` and can be returned
    from a `tf.function`. `n` is `num_hypotheses`; hypotheses are sorted by
    `scores`, best first.

    Args:
        ids: int32 tensor `(batch, n, max_steps)`, the emitted tokens without
            the leading BOS, each row ending with its EOS (when it emitted
            one) and padded with `PAD_ID`. `max_steps` is the loop bound, as
            in `GreedyResult`.
        lengths: int32 tensor `(batch, n)`, tokens up to and including EOS,
            or the sentence's own `max_length` for a hypothesis cut there.
        scores: float32 tensor `(batch, n)`, normalised scores
            `log_probs / lp(length) + cp`, sorted descending.
        log_probs: float32 tensor `(batch, n)`, the raw sums of the emitted
            tokens' log-scores (EOS included).

    A slot that holds no hypothesis (a sentence with fewer than `n`
    hypotheses, e.g. a tiny vocabulary) has length 0, `PAD_ID` ids and
    `-inf` scores and log-probabilities.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    log_probs: tf.Tensor


class FinishedPool(NamedTuple):
    """The `k` best finished hypotheses of every sentence, best first.

    Args:
        ids: int32 `(batch, k, max_steps)`, tokens after BOS, `PAD_ID` beyond
            each hypothesis' length.
        scores: float32 `(batch, k)`, normalised scores, sorted descending;
            `-inf` for an empty slot.
        log_probs: float32 `(batch, k)`, the raw sums of log-scores.
        lengths: int32 `(batch, k)`, tokens including the final EOS.
    """

    ids: tf.Tensor
    scores: tf.Tensor
    log_probs: tf.Tensor
    lengths: tf.Tensor


def merge_finished(pool, beam_size, ids, log_probs, scores, ends, length):
    """Admit the candidates that finish now into the pool of finished hypotheses.

    A candidate finishes when it ends (EOS, or the sentence's limit) *and*
    ranks in the top `k` of the `2k` by log-probability: admitting EOS only
    from the top `k` (fairseq `sequence_generator.py`, OpenNMT-py) makes
    `beam_size=1` exactly `greedy_search`. The pool keeps the best `k` of the
    old pool and the newcomers by normalised score; the old pool comes first,
    so it wins ties.

    Args:
        pool: `FinishedPool` with `k` slots per sentence.
        beam_size: int `k`.
        ids: int32 `(batch, 2k, max_steps)`, the candidates' tokens.
        log_probs: float32 `(batch, 2k)`, sorted descending.
        scores: float32 `(batch, 2k)`, their normalised scores.
        ends: bool `(batch, 2k)`, the candidates that end at this step.
        length: int32 scalar, the candidates' length.

    Returns:
        The new `FinishedPool`.
    """
    k = beam_size
    in_top_k = tf.range(2 * k) < k  # (2k,)
    newly_finished = tf.logical_and(ends, in_top_k)
    scores = tf.where(newly_finished, scores, _NEG_INF)
    pool_scores, pool_order = tf.math.top_k(
        tf.concat([pool.scores, scores], axis=1), k=k
    )  # (B, k)

    def pick(pooled, candidates):
        merged = tf.concat([pooled, candidates], axis=1)
        return tf.gather(merged, pool_order, batch_dims=1)

    return FinishedPool(
        ids=pick(pool.ids, ids),
        scores=pool_scores,
        log_probs=pick(pool.log_probs, log_probs),
        lengths=pick(pool.lengths, tf.fill(tf.shape(log_probs), length)),
    )


def best_reachable_scores(best_alive, length, limits, end_lengths, end_penalties,
                          max_step_score, max_eos_bias=0.0):
    """An upper bound on every final score an alive hypothesis can still reach.

    With every future log-score at most `u = max_step_score` (EOS's at most
    `u + e`, `e = max_eos_bias`) and `cp <= 0`, an alive hypothesis of length
    `t` and log-probability `A` (it holds no EOS) that ends at length `L`
    (`t < L <= limit`) scores at most `(A + (L - t) u + e) / lp(L)`; the bound
    is the maximum of that over `L` for the best alive `A`, exact for any `α`.
    For log-probabilities (`u = 0`, `e = 0`, `α >= 0`) it is GNMT's
    `A / lp(limit)` (tensor2tensor `_is_not_finished`); for `α = 0`, `A`.

    Args:
        best_alive: float32 `(batch,)`, the best alive log-probability.
        length: int32 scalar, the alive hypotheses' length `t`.
        limits: int32 `(batch,)`, each sentence's `max_length`.
        end_lengths: int32 `(max_steps,)`, `1 .. max_steps`.
        end_penalties: float32 `lp(end_lengths)`, `(max_steps,)` or
            `(batch, max_steps)` for one `α` per sentence.
        max_step_score: float `u`.
        max_eos_bias: float `e >= 0`, or float32 `(batch, 1)`. Defaults to 0.0.

    Returns:
        float32 `(batch,)`, `-inf` for a sentence at its limit.
    """
    extra_steps = tf.cast(end_lengths - length, tf.float32)
    reachable = tf.logical_and(
        end_lengths[tf.newaxis, :] > length,
        end_lengths[tf.newaxis, :] <= limits[:, tf.newaxis],
    )  # (B, max_steps)
    final_scores = (
        best_alive[:, tf.newaxis] + extra_steps * max_step_score + max_eos_bias
    ) / end_penalties
    return tf.reduce_max(tf.where(reachable, final_scores, _NEG_INF), axis=1)


def sentences_done(done, at_limit, best_alive, finished_scores, num_hypotheses,
                   best_reachable=None):
    """Which sentences stop: `beam_search`'s stopping rule.

    A sentence is done once it was done, when it reaches its limit, when it
    has no alive hypothesis left, or (given `best_reachable`) when its
    `num_hypotheses`-th best finished score is at least the best score an
    alive hypothesis can reach: what stays alive never depends on the
    finished pool, so stopping then changes nothing in the n-best (ties go
    to the hypothesis that finished first).

    Args:
        done: bool `(batch,)`, the sentences already done.
        at_limit: bool `(batch,)`, the sentences at their `max_length`.
        best_alive: float32 `(batch,)`, `-inf` without an alive hypothesis.
        finished_scores: float32 `(batch, k)`, sorted descending.
        num_hypotheses: int `n`.
        best_reachable: optional float32 `(batch,)`, from
            `best_reachable_scores`; `None` when no bound is known.

    Returns:
        bool `(batch,)`.
    """
    done = tf.logical_or(done, at_limit)
    done = tf.logical_or(done, tf.equal(best_alive, _NEG_INF))
    if best_reachable is not None:
        cannot_improve = finished_scores[:, num_hypotheses - 1] >= best_reachable
        done = tf.logical_or(done, cannot_improve)
    return done


def n_best(finished, num_hypotheses):
    """The `BeamResult` of the top `num_hypotheses` of a finished pool.

    An empty slot (`-inf` log-probability) gets length 0 and `PAD_ID` ids;
    every hypothesis' ids are `PAD_ID` beyond its length.
    """
    n = num_hypotheses
    scores = finished.scores[:, :n]
    log_probs = finished.log_probs[:, :n]
    found = log_probs > _NEG_INF  # (B, n): False for an empty slot
    lengths = tf.where(found, finished.lengths[:, :n], 0)
    positions = tf.range(tf.shape(finished.ids)[-1])  # (max_steps,)
    ids = tf.where(
        positions < lengths[:, :, tf.newaxis],
        finished.ids[:, :n],
        PAD_ID,
    )
    return BeamResult(ids=ids, lengths=lengths, scores=scores, log_probs=log_probs)


__all__ = ["BeamResult", "FinishedPool", "best_reachable_scores", "merge_finished",
           "n_best", "sentences_done"]
