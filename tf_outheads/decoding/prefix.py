"""Target prefixes: decoding that continues after given pieces.

A prefix is forced through the step function, so every search honours it
unchanged: while a row is inside its prefix, every piece but the prefix's
next one is scored -inf. Greedy search then takes it, sampling draws it (the
only piece with probability), and beam search keeps one live hypothesis
through the prefix and branches after it. The score a hypothesis carries
includes the prefix pieces' log-probabilities under the model (what forced
decoding gives the whole output), and the output holds the prefix, then its
continuation, as OpenNMT-py and fairseq return them.

    step_fn, state = with_target_prefix(step_fn, state, prefix_ids, prefix_lengths)

The prefix and each row's step count travel in the search state (leading
batch dimension), so beam tiling, reordering and the greedy search's
compaction carry them as they carry the model's state.
"""

import tensorflow as tf

from tf_outheads.data.special_tokens import PAD_ID

_KEY = "target_prefix"


def with_target_prefix(step_fn, state, prefix_ids, prefix_lengths):
    """A step function and initial state that force each row's prefix first.

    Args:
        step_fn: `(ids_t, state) -> (log_scores (B, V), new_state)`.
        state: its initial state (leading batch dimension B).
        prefix_ids: int32 `(B, P)`, each row's prefix pieces (no BOS, no EOS),
            padded with `PAD_ID`.
        prefix_lengths: int32 `(B,)`, pieces of each row's prefix (0: none).

    Returns:
        `(step_fn, state)` to give the search in place of the originals.
    """
    prefix_ids = tf.cast(prefix_ids, tf.int32)
    prefix_lengths = tf.cast(prefix_lengths, tf.int32)
    width = tf.shape(prefix_ids)[1]
    wrapped = {"model": state, _KEY: {"ids": prefix_ids, "lengths": prefix_lengths,
                                      "step": tf.zeros_like(prefix_lengths)}}

    def forced_step_fn(ids_t, state):
        log_scores, model_state = step_fn(ids_t, state["model"])
        prefix = state[_KEY]
        step = prefix["step"]
        inside = step < prefix["lengths"]  # (B,)

        def force():
            column = tf.minimum(step, tf.maximum(width - 1, 0))
            forced = tf.gather(tf.concat([prefix["ids"],
                                          tf.fill([tf.shape(step)[0], 1], PAD_ID)], axis=1),
                               column, batch_dims=1)  # (B,)
            vocab = tf.shape(log_scores)[-1]
            is_forced = tf.equal(tf.range(vocab)[tf.newaxis, :], forced[:, tf.newaxis])
            keep = tf.logical_or(tf.logical_not(inside)[:, tf.newaxis], is_forced)
            return tf.where(keep, log_scores, tf.constant(float("-inf"), log_scores.dtype))

        # Past every row's prefix (or without any), a step pays one reduction only.
        log_scores = tf.cond(tf.reduce_any(inside), force, lambda: log_scores)
        return log_scores, {"model": model_state,
                            _KEY: dict(prefix, step=step + 1)}

    return forced_step_fn, wrapped


def prefix_from_pieces(pieces):
    """A ragged int tensor of prefix pieces `(B, None)` → `(ids (B, P), lengths (B,))`."""
    return (tf.cast(pieces.to_tensor(PAD_ID), tf.int32),
            tf.cast(pieces.row_lengths(), tf.int32))


def check_prefix_lengths(lengths, limits, prefixes):
    """Refuse the first prefix with more target pieces than its source's output limit.

    Args:
        lengths, limits: ints per source, the prefix's pieces and the output limit (0
            for a source without a piece).
        prefixes: the prefixes as given, for the message.

    Raises:
        ValueError: naming the prefix's index, its length, the limit and the prefix.
    """
    for index, (length, limit) in enumerate(zip(lengths, limits)):
        if length > limit:
            raise ValueError(
                f"`target_prefix` {index} has {length} target pieces, more than its "
                f"source's output limit of {limit} (max_length_ratio × (source pieces + "
                "1) + max_length_offset; 0 for a source without a piece). Received: "
                f"target_prefix[{index}]={prefixes[index]!r}")


__all__ = ["check_prefix_lengths", "prefix_from_pieces", "with_target_prefix"]
