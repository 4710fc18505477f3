"""GNMT's length and coverage penalties: how a beam search ranks finished hypotheses.

    score(Y) = log P(Y) / lp(Y) + cp(Y)
    lp(Y)    = ((5 + |Y|) / 6) ** α
    cp(Y)    = β · Σ_i log(min(Σ_j p_ij, 1))

(Wu et al. 2016, "Google's Neural Machine Translation System", Eq. 14.) α = 0
and β = 0 rank by log-probability alone.
"""

import numpy as np
import tensorflow as tf

# Smallest coverage the coverage penalty takes a log of: a source word that
# no attention ever reached costs a finite `log(tiny) = -87.3` (times beta)
# instead of `-inf`, so hypotheses that all miss a word stay comparable.
_MIN_COVERAGE = float(np.finfo(np.float32).tiny)


def length_penalty_factor(lengths, alpha):
    """GNMT length penalty `lp(Y) = ((5 + |Y|) / 6) ** alpha`.

    Args:
        lengths: int or float tensor, hypothesis lengths (EOS included).
        alpha: float, the strength `α`; `0` gives `1` (no normalisation).

    Returns:
        float32 tensor of the same shape.

    References:
        Wu et al. 2016, "Google's Neural Machine Translation System", Eq. 14.
    """
    lengths = tf.cast(lengths, tf.float32)
    return tf.pow((5.0 + lengths) / 6.0, alpha)


def coverage_penalty_term(coverage, beta, source_mask=None):
    """GNMT coverage penalty `cp = β · Σ_i log(min(Σ_j p_ij, 1))`.

    Args:
        coverage: float tensor `(..., source)`, the attention each source
            word received, summed over the target steps (`Σ_j p_ij`).
        beta: float, the strength `β ≥ 0`.
        source_mask: optional bool/float tensor broadcastable to `coverage`;
            padded source positions (`0` / `False`) are left out of the sum.

    Returns:
        float32 tensor `coverage.shape[:-1]`, at most `0`. Coverage is
        floored at the smallest normal float32 so that an unattended word
        costs a finite `β · log(1.2e-38) ≈ -87.3 β`.

    References:
        Wu et al. 2016, "Google's Neural Machine Translation System", Eq. 14.
    """
    coverage = tf.cast(coverage, tf.float32)
    log_coverage = tf.math.log(
        tf.clip_by_value(coverage, _MIN_COVERAGE, 1.0)
    )
    if source_mask is not None:
        source_mask = tf.cast(source_mask, tf.bool)
        log_coverage = tf.where(source_mask, log_coverage, 0.0)
    return beta * tf.reduce_sum(log_coverage, axis=-1)


def normalised_scores(log_probs, length, length_penalty, coverage=None,
                      coverage_penalty=0.0, source_mask=None):
    """GNMT's score `log P(Y) / lp(Y) + cp(Y)` of hypotheses of one length.

    Args:
        log_probs: float32 `(batch, c)`.
        length: int32 scalar or tensor broadcastable to `log_probs`, tokens
            including EOS.
        length_penalty: float `α`, or a float tensor broadcastable to
            `(batch, 1)`.
        coverage: optional float32 `(batch, c, source)`; `None` leaves `cp`
            out.
        coverage_penalty: float `β`.
        source_mask: optional, broadcastable to `coverage`.

    Returns:
        float32 `(batch, c)`.

    References:
        Wu et al. 2016, "Google's Neural Machine Translation System", Eq. 14.
    """
    scores = log_probs / length_penalty_factor(length, length_penalty)
    if coverage is not None:
        scores += coverage_penalty_term(coverage, coverage_penalty, source_mask)
    return scores


__all__ = ["coverage_penalty_term", "length_penalty_factor", "normalised_scores"]
