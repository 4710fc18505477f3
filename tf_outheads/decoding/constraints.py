"""Decoding constraints: a bias on EOS, and no piece right after itself.

Both act on the scores a step function returns, so every search applies them
unchanged (greedy, compacting greedy, sampling, beam), for every head:

- `eos_bias` b is added to EOS's score at every step: b > 0 makes ending more
  likely (shorter outputs), b < 0 less likely (longer outputs). Its unit is the
  head's step score: nats for log-probabilities (every categorical head, and a
  continuous head with `scoring="posterior"`, its default), a cosine in
  [-1, 1] for `scoring="cosine"`, a vMF log-density for `"log_likelihood"`; so
  a sensible value differs from head to head.
- `block_repeats`: the piece fed at a step (the previous output) scores -inf,
  so a piece never follows itself. BOS (fed first) and PAD (fed to finished
  rows and dead beams) are not outputs and block nothing.

    step_fn, state = with_constraints(step_fn, state, batch_size, eos_bias=-1.0,
                                      block_repeats=True)

The values travel in the search state, one per row (leading batch dimension),
so beam tiling and reordering and the greedy search's compaction carry them as
they carry the model's state, and each row of a request may have its own.

**Scores.** The search ranks with the biased scores (an n-best list is in the
biased order), but the scores it reports are the model's: `remove_eos_bias`
takes the bias back out of every hypothesis that ended with EOS (its one EOS,
its last piece). A greedy output's score stays the forced-decoding score of
that output (`tf_outheads.decoding.Scorer`); a beam hypothesis' normalised
score loses `b / lp(|Y|)` (GNMT's length penalty; the coverage penalty is
added after the division, so it is untouched). Blocking never changes a
chosen piece's score: it only removes one candidate. Forced decoding itself
(`Scorer`, the `score` signature) scores given outputs and ignores both
options.

**Target prefixes.** Apply these constraints to the model's step function
*before* `tf_outheads.decoding.prefix.with_target_prefix` wraps it, and give
the prefix lengths: a row is not blocked while its prefix is forced (a prefix
may repeat a piece), and from the first free step on the last prefix piece is
blocked like any output.
"""

import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding.penalties import length_penalty_factor

_KEY = "constraints"


def with_constraints(step_fn, state, batch_size, eos_bias=0.0, block_repeats=False,
                     prefix_lengths=None, bos_id=BOS_ID, eos_id=EOS_ID):
    """A step function and initial state that bias EOS and block immediate repeats.

    Args:
        step_fn: `(ids_t, state) -> (log_scores (B, V), new_state)`.
        state: its initial state (leading batch dimension B).
        batch_size: int or int32 scalar tensor, B.
        eos_bias: float, or float `(B,)` (one per row), added to EOS's score at
            every step (see the module docstring for its unit). Defaults to 0.0.
        block_repeats: bool, or bool `(B,)`: the piece fed at a step (but BOS
            and PAD) scores -inf. Defaults to `False`.
        prefix_lengths: `None`, or int32 `(B,)`: pieces of each row's target
            prefix, forced by `with_target_prefix` around the returned step
            function; no piece is blocked during them. Defaults to `None`.
        bos_id: int, the first piece fed (never blocked). Defaults to `BOS_ID`.
        eos_id: int, the piece biased. Defaults to `EOS_ID`.

    Returns:
        `(step_fn, state)` to give the search in place of the originals. The
        scores the search reports include the bias: `remove_eos_bias` takes
        it back out.
    """
    values = {"eos_bias": tf.broadcast_to(tf.cast(eos_bias, tf.float32), [batch_size]),
              "block_repeats": tf.broadcast_to(tf.cast(block_repeats, tf.bool), [batch_size])}
    if prefix_lengths is not None:
        # Steps each row still has to force (counts down to 0).
        values["forced"] = tf.cast(prefix_lengths, tf.int32)
    wrapped = {"model": state, _KEY: values}
    # Whether any row asks for either, decided once (not per step): a request whose
    # rows ask for neither runs the model's scores through untouched. Rows dropped by
    # compaction only make this a superset, and constraining with zeros changes nothing.
    requested = constraints_requested(values["eos_bias"], values["block_repeats"])

    def constrained_step_fn(ids_t, state):
        log_scores, model_state = step_fn(ids_t, state["model"])
        log_scores = tf.cast(log_scores, tf.float32)
        values = state[_KEY]

        def constrain():
            block = tf.logical_and(values["block_repeats"], tf.logical_and(
                tf.not_equal(ids_t, bos_id), tf.not_equal(ids_t, PAD_ID)))  # (B,)
            if "forced" in values:
                block = tf.logical_and(block, values["forced"] <= 0)
            # Two entries per row, never the whole (B, V): EOS += bias, the fed piece
            # += -inf (+0 where not blocked). Adding 0 leaves a score as it was.
            rows = tf.range(tf.shape(ids_t)[0])
            columns = tf.concat([tf.fill(tf.shape(ids_t), tf.constant(eos_id, tf.int32)),
                                 tf.cast(ids_t, tf.int32)], axis=0)
            indices = tf.stack([tf.concat([rows, rows], axis=0), columns], axis=1)  # (2B, 2)
            updates = tf.concat([values["eos_bias"],
                                 tf.where(block, float("-inf"), 0.0)], axis=0)  # (2B,)
            return tf.tensor_scatter_nd_add(log_scores, indices, updates)

        log_scores = tf.cond(requested, constrain, lambda: log_scores)
        if "forced" in values:
            # A new dict only for the entry that changed: the others are the very
            # tensors given, which beam search then does not reorder.
            values = dict(values, forced=tf.maximum(values["forced"] - 1, 0))
        return log_scores, {"model": model_state, _KEY: values}

    return constrained_step_fn, wrapped


def constraints_requested(eos_bias, block_repeats):
    """bool scalar: whether any row asks for an EOS bias or blocked repeats (either a
    Python value or a `(B,)` tensor)."""
    return tf.logical_or(tf.reduce_any(tf.not_equal(tf.cast(eos_bias, tf.float32), 0.0)),
                         tf.reduce_any(tf.cast(block_repeats, tf.bool)))


def ended_with_eos(ids, eos_id=EOS_ID):
    """bool `ids.shape[:-1]`: the hypotheses `ids (..., T)` that hold EOS (a search's
    outputs: EOS is a hypothesis' last piece, PAD follows)."""
    return tf.reduce_any(tf.equal(ids, eos_id), axis=-1)


def remove_eos_bias(result, eos_bias, length_penalty=0.0, eos_id=EOS_ID):
    """A search's result with the model's scores: the EOS bias taken back out.

    Args:
        result: `GreedyResult` (ids `(B, T)`, scores `(B,)`) or `BeamResult`
            (ids `(B, n, T)`, scores and log_probs `(B, n)`) of a search run
            with `with_constraints`.
        eos_bias: float, or float `(B,)`, as given to `with_constraints`.
        length_penalty: the beam search's GNMT α (float, or float `(B, 1)`).
            Ignored for a greedy result. Defaults to 0.0.
        eos_id: int. Defaults to `EOS_ID`.

    Returns:
        The same kind of result: for every hypothesis that ended with EOS, the
        bias subtracted from its sum of scores (`scores` of a greedy result,
        `log_probs` of a beam result) and `bias / lp(|Y|)` from a beam
        result's normalised `scores` (`log P / lp + cp`: exact, whatever the
        coverage penalty). A beam result stays in the order the search ranked
        it in (the biased one).
    """
    ended = tf.cast(ended_with_eos(result.ids, eos_id), tf.float32)
    bias = tf.cast(eos_bias, tf.float32)
    if bias.shape.rank == 1 and ended.shape.rank == 2:
        bias = bias[:, tf.newaxis]  # (B, 1): one per sentence, for its n hypotheses
    removed = bias * ended
    if not hasattr(result, "log_probs"):  # greedy: the sum of scores
        return result._replace(scores=result.scores - removed)
    return result._replace(
        log_probs=result.log_probs - removed,
        scores=result.scores - removed / length_penalty_factor(result.lengths, length_penalty))


__all__ = ["constraints_requested", "ended_with_eos", "remove_eos_bias", "with_constraints"]
