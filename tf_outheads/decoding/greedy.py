"""Greedy search over a step function.

A decoder knows a model only through its step function::

    step_fn(ids_t, state) -> (log_scores, new_state)

- `ids_t`: int32 `(batch,)`, the tokens fed at this step (`BOS_ID` first).
- `state`: a nested structure (dict / list / tuple) of tensors, each with a
  leading batch dimension. Every tensor keeps its shape from step to step.
- `log_scores`: float `(batch, vocab)`, per-word log-scores: a log-softmax for
  categorical heads, a vMF log-likelihood or a cosine for continuous heads.

Greedy search takes the arg-max at every step; it never looks at the scores'
normalisation, so every head decodes with the same search.
"""

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding.sampling import sample_words


class GreedyResult(NamedTuple):
    """What `greedy_search` returns.

    A named tuple, so that it passes through `tf.nest` and can be returned
    from a `tf.function`.

    Args:
        ids: int32 tensor `(batch, max_steps)`, the emitted tokens without the
            leading BOS. Each row ends with its EOS (when it emitted one) and
            is padded with `PAD_ID` afterwards. `max_steps` is the loop bound:
            `max_length` when it is an int, `max(max_length)` when it is a
            per-sentence tensor.
        lengths: int32 tensor `(batch,)`, tokens up to and including EOS, or
            the sentence's own `max_length` when it emitted no EOS.
        scores: float32 tensor `(batch,)`, the sum of the log-scores of the
            emitted tokens (EOS included, padding excluded).
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor


def max_length_from_source(source_lengths, ratio=1.5, offset=10, cap=None):
    """Per-sentence decoding limit from the source lengths.

    `ceil(ratio * source_length) + offset`, clipped to `cap`. The limit grows
    with the source so that a short sentence does not run a long loop, and the
    offset leaves room for sentences whose translation is longer than usual.

    Args:
        source_lengths: int tensor or sequence `(batch,)`, source lengths in
            tokens.
        ratio: float, target tokens allowed per source token. Defaults to
            `1.5`.
        offset: int, tokens added to every limit. Defaults to `10`.
        cap: int or `None`, largest limit returned. Defaults to `None` (no
            cap).

    Returns:
        int32 tensor `(batch,)`, usable as `max_length` of `greedy_search`.

    Example:

    ```python
    from tf_outheads.decoding import max_length_from_source
    max_length_from_source([4, 20], ratio=1.5, offset=10, cap=30)
    # -> [16, 30]
    ```
    """
    if ratio <= 0:
        raise ValueError(f"`ratio` must be positive. Received: ratio={ratio}")
    if offset < 0:
        raise ValueError(
            f"`offset` must be non-negative. Received: offset={offset}"
        )
    if cap is not None and cap < 1:
        raise ValueError(f"`cap` must be at least 1. Received: cap={cap}")
    source_lengths = tf.cast(source_lengths, tf.float32)
    limits = tf.cast(tf.math.ceil(source_lengths * ratio), tf.int32) + offset
    if cap is not None:
        limits = tf.minimum(limits, cap)
    return limits


def decoding_limits(max_length, batch_size):
    """Per-sentence limits `(batch,)` and the loop bound of a search.

    A Python int is a static bound (XLA sizes the loop's tensors with it); a
    tensor of per-sentence limits gives `max(limits)`, a compile-time constant
    under XLA.

    Raises:
        ValueError: a negative int `max_length`.
    """
    if isinstance(max_length, (int, np.integer)):
        max_length = int(max_length)
        if max_length < 0:
            raise ValueError(
                "`max_length` must be non-negative. "
                f"Received: max_length={max_length}"
            )
        return tf.fill([batch_size], tf.constant(max_length, tf.int32)), max_length
    limits = tf.broadcast_to(tf.cast(max_length, tf.int32), [batch_size])
    return limits, tf.maximum(tf.reduce_max(limits), 0)


def greedy_search(
    step_fn,
    initial_state,
    batch_size,
    max_length,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    min_length=0,
    compact=False,
    sampling=None,
):
    """Decode by taking the highest-scoring word at every step.

    Built on `tf.while_loop` and a `tf.TensorArray`, so the same call runs
    eagerly, inside `tf.function` and inside `tf.function(jit_compile=True)`.
    The loop stops as soon as every sentence has emitted EOS or reached its
    own `max_length`, and never runs more than `max(max_length)` steps (the
    static bound XLA needs). `ids` is always that bound wide, in every mode,
    so eager and compiled results have the same shape. Under XLA a tensor
    `max_length` is treated as a compile-time constant: each distinct
    `max(max_length)` compiles once. When every limit is 0 nothing is
    decoded: `ids` is `(batch, 0)`, lengths and scores are 0.

    A sentence that has finished stops growing: its later ids are `PAD_ID`
    and its score and length no longer change. `step_fn` is still called on
    the whole batch, and finished rows are fed `PAD_ID` (from the step after
    their EOS on): that is what teacher forcing feeds at the padded positions
    of `target_in`, so the model sees no input it was not trained on. Their
    log-scores are ignored.

    Args:
        step_fn: callable `(ids_t, state) -> (log_scores, new_state)`, see the
            module docstring. `log_scores` is cast to float32.
        initial_state: nested structure of tensors with leading dimension
            `batch_size`, passed to the first call of `step_fn`. May be empty
            (`()` or `{}`).
        batch_size: int or int32 scalar tensor.
        max_length: int, or int32 tensor `(batch,)` of per-sentence limits
            (see `max_length_from_source`), counting tokens after BOS, EOS
            included. A sentence reaching its limit stops without EOS.
        bos_id: int, the first token fed to `step_fn`. Defaults to `BOS_ID`.
        eos_id: int, the token that finishes a sentence. Defaults to
            `EOS_ID`.
        min_length: int, tokens a sentence must emit before EOS may be
            chosen: EOS is scored `-inf` at the first `min_length` steps.
            Defaults to `0`.
        compact: bool or `None`. True drops finished sentences from the batch
            that `step_fn` computes: once at least a quarter of the rows still
            in it have finished, the state is gathered down to the others (as
            OpenNMT-py's search does), so a batch whose sentences end at
            different steps stops paying for the ended ones. The results are
            the same; `step_fn` must accept any batch size, and every state
            tensor must have the batch as its leading dimension (the contract
            above: a step function that closes over batch-sized tensors cannot
            compact). Not under XLA (it needs static shapes): `None` means True
            except inside an XLA-compiled function. Defaults to `False`;
            `tf_outheads.decoding.TranslationGraph` (the Translator, the CLI
            and the exported SavedModel) passes `None`.
        sampling: `None` (the arg-max) or a
            `tf_outheads.decoding.sampling.Sampling`: each row draws its pieces
            from the step's log-scores (temperature, top-k, nucleus) with the
            noise of its own seed, so a row's sample does not depend on its
            batch. `scores` stay the model's: the sum of the unscaled
            log-scores of the drawn pieces. Needs log-probabilities
            (categorical heads, a continuous head with `scoring="posterior"`).
            Defaults to `None`.

    Returns:
        `GreedyResult(ids, lengths, scores)`.

    Example:

    ```python
    import tensorflow as tf
    from tf_outheads.decoding import greedy_search

    vocab_size = 8

    def step_fn(ids_t, state):
        # Always prefer token 5, then EOS (3) from the third step on.
        step = state["step"]
        preferred = tf.where(step >= 2, 3, 5)
        log_scores = tf.math.log(
            tf.one_hot(preferred, vocab_size, on_value=0.9, off_value=0.01)
        )
        return log_scores, {"step": step + 1}

    result = greedy_search(
        step_fn, {"step": tf.zeros([2], tf.int32)}, batch_size=2, max_length=6
    )
    result.ids      # [[5, 5, 3, 0, 0, 0], [5, 5, 3, 0, 0, 0]]
    result.lengths  # [3, 3]
    ```
    """
    if min_length < 0:
        raise ValueError(
            "`min_length` must be non-negative. "
            f"Received: min_length={min_length}"
        )
    limits, max_steps = decoding_limits(max_length, batch_size)
    if compact is None:
        from tf_outheads.compat import in_xla_context

        compact = not in_xla_context()
    ids, lengths, scores = _search(step_fn, initial_state, batch_size, limits, max_steps,
                                   bos_id, eos_id, min_length, bool(compact), sampling)
    return GreedyResult(ids=ids, lengths=lengths, scores=scores)


def _emitted_ids(emitted, max_steps, batch_size, lengths):
    """The `(batch, max_steps)` ids from the per-step TensorArray, PAD after each length.

    With a loop bound of 0 (every row's limit is 0: sources without a subword piece)
    nothing was written, and a TensorArray whose element shape is not static (a batch
    size only known at run time) cannot stack zero elements: the ids are then the
    empty `(batch, 0)`.
    """

    def stacked():
        return tf.transpose(emitted.stack())  # (batch, max_steps)

    def no_steps():
        return tf.zeros([batch_size, 0], tf.int32)

    if isinstance(max_steps, int):
        ids = stacked() if max_steps > 0 else no_steps()
    else:
        ids = tf.cond(max_steps > 0, stacked, no_steps)
    positions = tf.range(tf.shape(ids)[1])[tf.newaxis, :]
    return tf.where(positions < lengths[:, tf.newaxis], ids, PAD_ID)


def _block_eos(log_scores, step, min_length, eos_id):
    """EOS scored -inf during the first `min_length` steps."""
    if min_length <= 0:
        return log_scores
    is_eos = tf.equal(tf.range(tf.shape(log_scores)[-1]), eos_id)  # (vocab,)
    block_eos = tf.logical_and(step < min_length, is_eos)
    return tf.where(block_eos[tf.newaxis, :], tf.constant(-math.inf, tf.float32), log_scores)


def _search(step_fn, initial_state, batch_size, limits, max_steps, bos_id, eos_id, min_length,
            compact, sampling=None):
    """The loop of `greedy_search`: `(ids, lengths, scores)` of the whole batch.

    The loop keeps the rows still decoded (`rows`: their index in the batch) and
    their state; the per-sentence results live in whole-batch tensors, updated by
    scatter. Without `compact`, every row stays to the end (static shapes, as XLA
    needs). With it, a row that finishes stays in the computed batch (fed PAD, its
    scores ignored) until a quarter of the rows in it have finished; then every
    finished row is gathered out at once.
    """
    rows = tf.range(batch_size)
    ids_t = tf.fill([batch_size], tf.constant(bos_id, tf.int32))
    finished = limits <= 0
    row_lengths = tf.zeros([batch_size], tf.int32)
    lengths = tf.zeros([batch_size], tf.int32)
    scores = tf.zeros([batch_size], tf.float32)
    emitted = tf.TensorArray(tf.int32, size=max_steps, element_shape=ids_t.shape)
    pad_row = tf.fill([batch_size], tf.constant(PAD_ID, tf.int32))

    def keep_going(step, rows, ids_t, state, finished, row_limits, row_lengths, *_):
        return tf.logical_not(tf.reduce_all(finished))

    def decode_step(step, rows, ids_t, state, finished, row_limits, row_lengths, lengths,
                    scores, emitted):
        log_scores, state = step_fn(ids_t, state)
        log_scores = _block_eos(tf.cast(log_scores, tf.float32), step, min_length, eos_id)
        if sampling is None:
            word = tf.argmax(log_scores, axis=-1, output_type=tf.int32)
            word_score = tf.reduce_max(log_scores, axis=-1)
        else:
            # `rows` maps the computed rows to the batch's (compaction drops rows).
            word = sample_words(log_scores, step, sampling.gather(rows))
            word_score = tf.gather(log_scores, word, batch_dims=1)
        active = tf.logical_not(finished)
        word = tf.where(active, word, PAD_ID)
        where = rows[:, tf.newaxis]
        emitted = emitted.write(step, tf.tensor_scatter_nd_update(pad_row, where, word))
        scores = tf.tensor_scatter_nd_add(scores, where, tf.where(active, word_score, 0.0))
        lengths = tf.tensor_scatter_nd_add(lengths, where, tf.cast(active, tf.int32))
        row_lengths += tf.cast(active, tf.int32)
        finished = tf.logical_or(
            finished, tf.logical_or(tf.equal(word, eos_id), row_lengths >= row_limits))
        ids_t = tf.where(finished, PAD_ID, word)

        if compact:
            def dropped():
                keep = tf.where(tf.logical_not(finished))[:, 0]
                return tf.nest.map_structure(
                    lambda x: tf.gather(x, keep),
                    (rows, ids_t, state, finished, row_limits, row_lengths))

            def kept():
                return rows, ids_t, state, finished, row_limits, row_lengths

            done = tf.reduce_sum(tf.cast(finished, tf.int32))
            # Once a quarter of the rows have finished (and while some have not).
            gather = tf.logical_and(4 * done >= tf.size(finished), done < tf.size(finished))
            rows, ids_t, state, finished, row_limits, row_lengths = tf.cond(gather, dropped,
                                                                            kept)
        return (step + 1, rows, ids_t, state, finished, row_limits, row_lengths, lengths,
                scores, emitted)

    def batch_free(x):
        return tf.TensorShape([None]).concatenate(x.shape[1:])

    loop_vars = (tf.constant(0, tf.int32), rows, ids_t, initial_state, finished, limits,
                 row_lengths, lengths, scores, emitted)
    invariants = (tf.TensorShape([]), *(tf.nest.map_structure(batch_free, v)
                                        for v in loop_vars[1:7]),
                  lengths.shape, scores.shape, tf.TensorShape(None))
    *_, lengths, scores, emitted = tf.while_loop(
        keep_going, decode_step, loop_vars, shape_invariants=invariants if compact else None,
        maximum_iterations=max_steps)
    # Steps the loop did not reach are left unwritten and stack as zeros; the mask
    # writes PAD_ID there explicitly (`_emitted_ids`).

    ids = _emitted_ids(emitted, max_steps, batch_size, lengths)
    return ids, lengths, scores
