"""Beam search over a step function, with GNMT length and coverage penalties.

The search sees a model only through the step function of
`tf_outheads.decoding.greedy`::

    step_fn(ids_t, state) -> (log_scores, new_state)

called on `batch_size * beam_size` rows: row `b * beam_size + j` is beam `j`
of sentence `b` (`tile_for_beam` lays a batch out this way, `gather_beams`
reorders it after every step).

Every step expands the `k` alive hypotheses of a sentence into `k * V`
candidates and takes the `2k` best by log-probability. Among them:

- the candidates that end with EOS *and* rank in the top `k` are finished:
  they stop growing and join a pool of `k` finished hypotheses per sentence,
  which keeps the best `k` by *normalised* score (length and coverage
  penalties);
- the best `k` candidates that do not end with EOS stay alive (there are at
  least `k` of them in the top `2k`: each alive hypothesis has one EOS).

Admitting an EOS candidate only from the top `k` (fairseq, OpenNMT-py) rather
than from the whole top `2k` (tensor2tensor) makes `beam_size=1` exactly
`greedy_search`: a hypothesis finishes when EOS is its best continuation,
not when EOS is merely the runner-up.

Parts of their own (exported here too): the state's beam-major layout (`beam_layout`),
GNMT's penalties (`penalties`), the finished hypotheses and stopping rule (`beam_pool`).
"""

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
# The search's parts in their own modules.
from tf_outheads.decoding.beam_layout import reorder_state, tile_for_beam
from tf_outheads.decoding.beam_pool import (_NEG_INF, FinishedPool,
                                            best_reachable_scores, merge_finished, n_best,
                                            sentences_done)
from tf_outheads.decoding.greedy import decoding_limits
from tf_outheads.decoding.penalties import (length_penalty_factor,
                                            normalised_scores)


class _LoopState(NamedTuple):
    step: tf.Tensor  # () int32: tokens emitted so far by every alive beam
    ids_t: tf.Tensor  # (batch * k,) int32: tokens fed at this step
    model_state: object  # nested, leading dim batch * k
    alive_ids: tf.Tensor  # (batch, k, max_steps) int32
    alive_log_probs: tf.Tensor  # (batch, k) float32, -inf for a dead beam
    alive_coverage: object  # (batch, k, source) float32, or () unused
    finished: FinishedPool  # (batch, k, ...) the best finished hypotheses
    done: tf.Tensor  # (batch,) bool


def _check_coverage_state(state, where):
    if not isinstance(state, dict) or "alignment" not in state:
        raise ValueError(
            "`coverage_penalty > 0` needs the attention weights: the decoding "
            "state must be a dict with key 'alignment' (batch, source), "
            "updated by `step_fn` at every step. "
            f"Received: {where} of type {type(state).__name__}"
            + (f" with keys {sorted(state)}" if isinstance(state, dict) else "")
        )


# -- The search, piece by piece ------------------------------------------------
#
# `beam_search` checks its arguments, builds the loop state with
# `initial_beams`, runs `_BeamStep` (one step of the search, made of the
# functions below) in a `tf.while_loop` and reads the result with `n_best`.
# Every piece works on the `(batch, k, ...)` tensors of the loop state and can
# be called alone, eagerly, on small hand-made tensors.


def _check_arguments(beam_size, num_hypotheses, min_length, coverage_penalty,
                     length_penalty, max_step_score, max_eos_bias=0.0):
    """`beam_search`'s argument checks; returns `(beam_size, num_hypotheses)` as ints.

    Raises:
        ValueError: an argument out of range, named with its value.
    """
    if isinstance(beam_size, bool) or not isinstance(
        beam_size, (int, np.integer)
    ) or beam_size < 1:
        raise ValueError(
            "`beam_size` must be a positive int. "
            f"Received: beam_size={beam_size!r}"
        )
    beam_size = int(beam_size)
    if isinstance(num_hypotheses, bool) or not isinstance(
        num_hypotheses, (int, np.integer)
    ) or not 1 <= num_hypotheses <= beam_size:
        raise ValueError(
            "`num_hypotheses` must be an int between 1 and `beam_size` "
            f"({beam_size}). Received: num_hypotheses={num_hypotheses!r}"
        )
    if min_length < 0:
        raise ValueError(
            "`min_length` must be non-negative. "
            f"Received: min_length={min_length}"
        )
    if coverage_penalty < 0:
        raise ValueError(
            "`coverage_penalty` must be non-negative. "
            f"Received: coverage_penalty={coverage_penalty}"
        )
    if isinstance(length_penalty, (int, float, np.number)) and not math.isfinite(
        length_penalty
    ):
        # NaN makes every normalised score NaN: nothing would ever finish.
        raise ValueError(
            "`length_penalty` must be finite. "
            f"Received: length_penalty={length_penalty}"
        )
    if max_step_score is not None and not math.isfinite(max_step_score):
        raise ValueError(
            "`max_step_score` must be a finite float or None. "
            f"Received: max_step_score={max_step_score}"
        )
    if isinstance(max_eos_bias, (int, float, np.number)) and not (
        math.isfinite(max_eos_bias) and max_eos_bias >= 0
    ):
        raise ValueError(
            "`max_eos_bias` must be a finite float >= 0. "
            f"Received: max_eos_bias={max_eos_bias}"
        )
    return beam_size, int(num_hypotheses)


def initial_beams(initial_state, batch_size, beam_size, limits, max_steps,
                  bos_id=BOS_ID, use_coverage=False):
    """The loop state before the first step.

    Only beam 0 of each sentence starts alive (log-probability 0, the other
    beams `-inf`), so the first step expands one hypothesis, not `k` copies
    of it. A sentence whose limit is 0 is done before it starts and holds the
    empty hypothesis (score 0), as `greedy_search` returns.

    Args:
        initial_state: nested structure with leading dimension `batch_size`;
            tiled to `batch_size * beam_size` rows (`tile_for_beam`). With
            `use_coverage`, a dict with an `"alignment"` `(batch, source)`.
        batch_size: int or int32 scalar tensor.
        beam_size: int `k`.
        limits: int32 `(batch,)`, each sentence's `max_length`.
        max_steps: int or int32 scalar, the loop bound (`max(limits)`).
        bos_id: int, the token every beam is fed first.
        use_coverage: bool, whether to track the attention each source word
            received (zeros `(batch, k, source)`).

    Returns:
        The `_LoopState` `beam_search` loops on.
    """
    k = beam_size
    if use_coverage:
        alignment = tf.cast(initial_state["alignment"], tf.float32)
        alive_coverage = tf.zeros_like(
            tf.repeat(alignment[:, tf.newaxis, :], k, axis=1)
        )  # (batch, k, source)
    else:
        alive_coverage = ()
    first_beam = tf.equal(tf.range(k), 0)[tf.newaxis, :]  # (1, k)
    started = (limits > 0)[:, tf.newaxis]  # (batch, 1)
    alive_log_probs = tf.where(
        tf.logical_and(first_beam, started), 0.0, _NEG_INF
    )  # (batch, k)
    empty = tf.logical_and(first_beam, tf.logical_not(started))
    finished_scores = tf.where(empty, 0.0, _NEG_INF)
    empty_ids = tf.fill([batch_size, k, max_steps], tf.constant(PAD_ID, tf.int32))
    return _LoopState(
        step=tf.constant(0, tf.int32),
        ids_t=tf.fill([batch_size * k], tf.constant(bos_id, tf.int32)),
        model_state=tile_for_beam(initial_state, k),
        alive_ids=empty_ids,
        alive_log_probs=alive_log_probs,
        alive_coverage=alive_coverage,
        finished=FinishedPool(
            ids=empty_ids,
            scores=finished_scores,
            log_probs=finished_scores,
            lengths=tf.zeros([batch_size, k], tf.int32),
        ),
        done=limits <= 0,
    )


def top_candidates(log_scores, alive_log_probs, batch_size, beam_size, step,
                   min_length=0, eos_id=EOS_ID):
    """The `2k` best one-token extensions of each sentence's alive hypotheses.

    A candidate's log-probability is its parent's plus the word's log-score.
    Adding a beam's log-probability keeps the order of its words, so the best
    `2k` overall are among the best `2k` words of each beam: take those per
    beam first (one pass over `V`, no `(batch, k, V)` sums), then the best
    `2k` of the `k * 2k`. Dead beams (`-inf`) stay `-inf` whatever their
    rows scored. During the first `min_length` steps EOS is forbidden: it is
    scored `-inf` among those `2k`, not over all `V`; no hypothesis can end by
    EOS then, so only the best `k` other words matter, and each beam's `2k`
    hold at least `k` of them.

    Taking `2k` (tensor2tensor `grow_topk`, fairseq) leaves at least `k`
    candidates that do not end with EOS, enough to refill the alive beams.

    Args:
        log_scores: float32 `(batch, k, V)`, this step's scores of every word
            for every beam.
        alive_log_probs: float32 `(batch, k)`, `-inf` for a dead beam.
        batch_size: int or int32 scalar tensor.
        beam_size: int `k`.
        step: int32 scalar, tokens emitted so far (the position being written).
        min_length: int, EOS is forbidden while `step < min_length`.
        eos_id: int.

    Returns:
        `(log_probs, parents, words)`, each `(batch, 2k)`, sorted by
        `log_probs` descending: ties go to the lower beam, then the lower
        word id. `parents` are beams in `[0, k)`.
    """
    k = beam_size
    vocab_size = tf.shape(log_scores)[-1]
    per_beam = tf.minimum(2 * k, vocab_size)
    beam_scores, beam_words = tf.math.top_k(log_scores, k=per_beam)  # (B, k, c)
    if min_length > 0:
        block_eos = tf.logical_and(step < min_length, tf.equal(beam_words, eos_id))
        beam_scores = tf.where(block_eos, _NEG_INF, beam_scores)
    alive = alive_log_probs > _NEG_INF  # (B, k)
    candidate_log_probs = tf.where(
        alive[:, :, tf.newaxis],
        alive_log_probs[:, :, tf.newaxis] + beam_scores,
        _NEG_INF,
    )  # (B, k, c)
    top_log_probs, top_indices = tf.math.top_k(
        tf.reshape(candidate_log_probs, [batch_size, -1]), k=2 * k
    )  # (B, 2k)
    parents = top_indices // per_beam  # (B, 2k)
    words = tf.gather(
        tf.reshape(beam_words, [batch_size, -1]), top_indices, batch_dims=1
    )  # (B, 2k)
    return top_log_probs, parents, words


def candidate_hypotheses(alive_ids, parents, words, step):
    """The candidates as full hypotheses: each parent's tokens, then its word.

    Args:
        alive_ids: int32 `(batch, k, max_steps)`.
        parents: int32 `(batch, c)`, beams in `[0, k)`.
        words: int32 `(batch, c)`.
        step: int32 scalar, the position the words are written at.

    Returns:
        int32 `(batch, c, max_steps)`.
    """
    positions = tf.range(tf.shape(alive_ids)[-1])  # (max_steps,)
    candidate_ids = tf.gather(alive_ids, parents, batch_dims=1)
    return tf.where(
        tf.equal(positions, step), words[:, :, tf.newaxis], candidate_ids
    )


def candidate_coverage(alive_coverage, step_alignment, parents):
    """The attention each candidate's source words received, this step included.

    Args:
        alive_coverage: float32 `(batch, k, source)`, summed over the alive
            hypotheses' past steps.
        step_alignment: float32 `(batch, k, source)`, this step's attention
            of every beam.
        parents: int32 `(batch, c)`, beams in `[0, k)`.

    Returns:
        float32 `(batch, c, source)`.
    """
    return tf.gather(alive_coverage + step_alignment, parents, batch_dims=1)


def select_alive(log_probs, ends, candidates, beam_size):
    """The best `k` candidates that do not end: the next step's alive beams.

    A candidate that ended (EOS or the limit), admitted to the finished pool
    or not, is never extended. The `2k` candidates hold at least `k` that do
    not end (each parent has one EOS), unless the sentence is at its limit.

    Args:
        log_probs: float32 `(batch, 2k)`.
        ends: bool `(batch, 2k)`.
        candidates: nested structure of `(batch, 2k, ...)` tensors that follow
            the candidates (ids, words, parents, coverage); `()` entries stay.
        beam_size: int `k`.

    Returns:
        `(alive_log_probs, alive)`: float32 `(batch, k)` sorted descending
        (`-inf` where fewer than `k` candidates are left), and `candidates`
        gathered to those `k`.
    """
    alive_log_probs, survivors = tf.math.top_k(
        tf.where(ends, _NEG_INF, log_probs), k=beam_size
    )  # (B, k)
    alive = tf.nest.map_structure(
        lambda tensor: tf.gather(tensor, survivors, batch_dims=1), candidates
    )
    return alive_log_probs, alive


class _BeamStep:
    """One step of the search: the body of `beam_search`'s `tf.while_loop`.

    Holds what does not change from step to step (the step function, the
    options, the limits, the length penalties the stopping bound needs) and
    turns a `_LoopState` into the next one: call `step_fn`, take the top `2k`
    candidates, admit those that finish to the pool, keep the best `k` others
    alive, reorder the model state after them, apply the stopping rule.
    """

    def __init__(self, step_fn, batch_size, beam_size, limits, max_steps,
                 length_penalty, coverage_penalty, source_mask, min_length,
                 num_hypotheses, eos_id, max_step_score, max_eos_bias=0.0):
        self.step_fn = step_fn
        self.batch_size = batch_size
        self.beam_size = beam_size
        self.limits = limits
        self.length_penalty = length_penalty
        self.coverage_penalty = coverage_penalty
        self.source_mask = source_mask
        self.min_length = min_length
        self.num_hypotheses = num_hypotheses
        self.eos_id = eos_id
        self.max_step_score = max_step_score
        self.max_eos_bias = max_eos_bias
        # Lengths a hypothesis may end at, and their length penalties, for the
        # stopping bound: computed once, outside the loop.
        self.end_lengths = tf.range(1, max_steps + 1)  # (max_steps,)
        self.end_penalties = length_penalty_factor(self.end_lengths, length_penalty)

    @staticmethod
    def keep_going(loop):
        return tf.logical_not(tf.reduce_all(loop.done))

    def __call__(self, loop):
        k, batch_size = self.beam_size, self.batch_size
        log_scores, new_state = self.step_fn(loop.ids_t, loop.model_state)
        log_scores = tf.reshape(
            tf.cast(log_scores, tf.float32), [batch_size, k, -1]
        )  # (B, k, V)
        log_probs, parents, words = top_candidates(
            log_scores, loop.alive_log_probs, batch_size, k, loop.step,
            self.min_length, self.eos_id,
        )  # (B, 2k)
        candidate_ids = candidate_hypotheses(loop.alive_ids, parents, words, loop.step)
        coverage = ()
        if self.coverage_penalty > 0:
            _check_coverage_state(new_state, "the state returned by step_fn")
            step_alignment = tf.reshape(
                tf.cast(new_state["alignment"], tf.float32), [batch_size, k, -1]
            )  # (B, k, S)
            coverage = candidate_coverage(loop.alive_coverage, step_alignment, parents)

        # A candidate ends with EOS, or with anything at its sentence's limit.
        length = loop.step + 1
        at_limit = (length >= self.limits)[:, tf.newaxis]  # (B, 1)
        ends = tf.logical_or(tf.equal(words, self.eos_id), at_limit)  # (B, 2k)
        scores = normalised_scores(
            log_probs, length, self.length_penalty,
            coverage if self.coverage_penalty > 0 else None,
            self.coverage_penalty, self.source_mask,
        )
        finished = merge_finished(
            loop.finished, k, candidate_ids, log_probs, scores, ends, length
        )
        alive_log_probs, (alive_ids, alive_words, alive_parents, alive_coverage) = (
            select_alive(log_probs, ends, (candidate_ids, words, parents, coverage), k)
        )
        model_state = reorder_state(new_state, loop.model_state, alive_parents, k)

        best_alive = alive_log_probs[:, 0]  # (B,)
        best_reachable = None
        if self.max_step_score is not None:
            best_reachable = best_reachable_scores(
                best_alive, length, self.limits, self.end_lengths,
                self.end_penalties, self.max_step_score, self.max_eos_bias,
            )
        done = sentences_done(
            loop.done, at_limit[:, 0], best_alive, finished.scores,
            self.num_hypotheses, best_reachable,
        )
        # Rows of a done sentence or a dead beam are fed PAD from now on.
        alive_log_probs = tf.where(done[:, tf.newaxis], _NEG_INF, alive_log_probs)
        ids_t = tf.where(alive_log_probs > _NEG_INF, alive_words, PAD_ID)

        new_loop = _LoopState(
            step=loop.step + 1,
            ids_t=tf.reshape(ids_t, [-1]),
            model_state=model_state,
            alive_ids=alive_ids,
            alive_log_probs=alive_log_probs,
            alive_coverage=alive_coverage,
            finished=finished,
            done=done,
        )
        # Keep every loop variable's static shape in a graph (top_k and gathers
        # may lose a static batch size the loop entered with). A size the state
        # entered unknown may change (a model's growing cache); eagerly every
        # shape is concrete and nothing is lost.
        if tf.executing_eagerly():
            return (new_loop,)
        return (
            tf.nest.map_structure(
                lambda new, old: tf.ensure_shape(new, old.shape),
                new_loop,
                loop,
            ),
        )


def beam_search(
    step_fn,
    initial_state,
    batch_size,
    beam_size,
    max_length,
    length_penalty=0.0,
    coverage_penalty=0.0,
    min_length=0,
    num_hypotheses=1,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    max_step_score=0.0,
    max_eos_bias=0.0,
):
    """Decode with a batched beam search and return the n-best hypotheses.

    Built on `tf.while_loop` with a static bound (`max(max_length)`), so the
    same call runs eagerly, inside `tf.function` and inside
    `tf.function(jit_compile=True)`; under XLA a tensor `max_length` is a
    compile-time constant, as for `greedy_search`.

    Search (see the module docstring): at every step the `k` alive
    hypotheses of each sentence are expanded to `k * V` candidates and the
    `2k` best by log-probability are kept; those ending with EOS within the
    top `k` join the sentence's pool of `k` finished hypotheses, which keeps
    the best by normalised score; the `k` best others stay alive. At its own
    `max_length` every hypothesis in the top `k` is finished, EOS or not.
    Alive hypotheses all have the same length, so ranking them by
    log-probability is ranking them by length-normalised score; the coverage
    penalty, as in GNMT, re-ranks only hypotheses that finish.

    Normalised score (Wu et al. 2016, Eq. 14), with `|Y|` counting EOS::

        score(Y) = log P(Y) / lp(Y) + cp(Y)
        lp(Y) = ((5 + |Y|) / 6) ** length_penalty
        cp(Y) = coverage_penalty * sum_i log(min(sum_j p_ij, 1))

    Stopping rule. A sentence is done when it reaches its `max_length`, when
    it has no alive hypothesis left, or when no alive hypothesis can still
    enter its top `num_hypotheses`: when the `num_hypotheses`-th best
    finished score is at least an upper bound on every final score an alive
    hypothesis can reach. With every future log-score at most
    `u = max_step_score` and `cp <= 0`, an alive hypothesis of length `t` and
    log-probability `A` that ends at length `L` (`t < L <= max_length`)
    scores at most `(A + (L - t) u) / lp(L)`; the bound is the maximum of
    that over `L` for the best alive `A`, computed exactly for any `α` (a
    step function that may score EOS up to `e = max_eos_bias` higher adds
    `e` once: `(A + (L - t) u + e) / lp(L)`). For
    log-probabilities (`u = 0`, `α >= 0`) it is GNMT's `A / lp(max_length)`
    (tensor2tensor `_is_not_finished`), and for `α = 0` it is `A` itself.
    Since what stays alive never depends on the finished pool, stopping
    there returns exactly the hypotheses a search run to `max_length` would
    (ties go to the hypothesis that finished first). With
    `max_step_score=None` nothing is assumed and each sentence runs to its
    `max_length` or until it has no alive hypothesis.

    As in `greedy_search`, `step_fn` is always called on the whole
    `batch * beam_size` rows; rows that hold no hypothesis (beams of a done
    sentence, dead beams) are fed `PAD_ID` from the second step on and their
    log-scores are ignored. After every step the state is reordered to follow
    the surviving hypotheses, except the entries `step_fn` returns unchanged
    (the same tensor it was given, such as the encoder memory): those are
    equal across the beams of a sentence and are not copied.

    The search is made of module-level pieces that can be read and called
    alone: `initial_beams` (the loop state before the first step), then at
    every step (`_BeamStep`, the loop's body) `top_candidates` (the `2k`
    best extensions), `candidate_hypotheses` and `candidate_coverage` (their
    tokens and attention), `normalised_scores` (GNMT's score),
    `merge_finished` (the pool of finished hypotheses), `select_alive` (the
    next alive beams), `best_reachable_scores` and `sentences_done` (the
    stopping rule); `n_best` reads the result from the finished pool.

    Args:
        step_fn: callable `(ids_t, state) -> (log_scores, new_state)` on
            `batch * beam_size` rows (see `tf_outheads.decoding.greedy`).
            `log_scores` is cast to float32; it need not be normalised
            (log-softmax, vMF log-likelihood, cosine: see `max_step_score`).
        initial_state: nested structure of tensors with leading dimension
            `batch_size`; tiled to `batch_size * beam_size` rows here. May be
            empty. With `coverage_penalty > 0` it must be a dict whose
            `"alignment"` `(batch, source)` float entry `step_fn` replaces by
            the step's attention weights; an optional `"memory_mask"`
            `(batch, source)` leaves padded source positions out of `cp`.
        batch_size: int or int32 scalar tensor.
        beam_size: int `k >= 1`, hypotheses kept alive per sentence.
        max_length: int, or int32 tensor `(batch,)` of per-sentence limits,
            counting tokens after BOS, EOS included.
        length_penalty: float `α`, finite, or a float tensor broadcastable
            to `(batch, 1)` (one `α` per sentence; the caller checks it is
            finite). Defaults to `0.0` (raw log-probability).
        coverage_penalty: float `β >= 0`. Defaults to `0.0` (no attention
            needed).
        min_length: int, EOS is scored `-inf` at the first `min_length`
            steps. Defaults to `0`.
        num_hypotheses: int `n`, `1 <= n <= beam_size`, hypotheses returned
            per sentence. Defaults to `1`.
        bos_id: int, the first token fed to `step_fn`. Defaults to `BOS_ID`.
        eos_id: int, the token that finishes a hypothesis. Defaults to
            `EOS_ID`.
        max_step_score: float or `None`, an upper bound on any single
            log-score `step_fn` returns, used only by the stopping rule.
            `0.0` holds for log-probabilities (categorical heads, the
            continuous head's `"posterior"` scoring); a cosine needs `1.0`;
            `None` when no bound is known (vMF log-likelihoods). A bound that
            does not hold makes the search stop too early. Defaults to
            `0.0`.
        max_eos_bias: float `>= 0`, or a float tensor broadcastable to
            `(batch, 1)`: how far above `max_step_score` `step_fn` may score
            EOS (a positive `eos_bias` of
            `tf_outheads.decoding.constraints.with_constraints`), used only by
            the stopping rule, which adds it once (a hypothesis ends with one
            EOS). Defaults to `0.0`.

    Returns:
        `BeamResult(ids, lengths, scores, log_probs)`.

    Example:

    ```python
    import math
    import tensorflow as tf
    from tf_outheads.decoding import beam_search

    vocab_size = 8

    def step_fn(ids_t, state):
        # First step: 5 (p=0.6) or 6 (p=0.4); after 5 nothing is likely;
        # after 6, EOS (3) is certain.
        first = tf.math.log([[1e-6] * 5 + [0.6, 0.4, 1e-6]])
        after_5 = tf.math.log([[1 / vocab_size] * vocab_size])
        after_6 = tf.math.log([[1e-6] * 3 + [1.0] + [1e-6] * 4])
        log_scores = tf.where(
            (ids_t == 5)[:, None], after_5,
            tf.where((ids_t == 6)[:, None], after_6, first))
        return log_scores, state

    result = beam_search(step_fn, (), batch_size=1, beam_size=2, max_length=4)
    result.ids[0, 0]        # [6, 3, 0, 0]: greedy would have taken 5
    result.log_probs[0, 0]  # log(0.4)
    ```

    References:
        Wu et al. 2016, "Google's Neural Machine Translation System", §7 and
        Eq. 14 (length and coverage penalties);
        tensor2tensor `beam_search.py` (alive/finished pools, stopping bound);
        fairseq `sequence_generator.py` (EOS admitted from the top `k`).
    """
    beam_size, num_hypotheses = _check_arguments(
        beam_size, num_hypotheses, min_length, coverage_penalty,
        length_penalty, max_step_score, max_eos_bias,
    )
    use_coverage = coverage_penalty > 0
    source_mask = None
    if use_coverage:
        _check_coverage_state(initial_state, "initial_state")
        source_mask = initial_state.get("memory_mask")
        if source_mask is not None:
            source_mask = tf.cast(source_mask, tf.bool)[:, tf.newaxis, :]

    limits, max_steps = decoding_limits(max_length, batch_size)
    loop_state = initial_beams(
        initial_state, batch_size, beam_size, limits, max_steps, bos_id, use_coverage
    )
    step = _BeamStep(
        step_fn, batch_size, beam_size, limits, max_steps, length_penalty,
        coverage_penalty, source_mask, min_length, num_hypotheses, eos_id,
        max_step_score, max_eos_bias,
    )
    (loop_state,) = tf.while_loop(
        step.keep_going, step, (loop_state,), maximum_iterations=max_steps
    )
    return n_best(loop_state.finished, num_hypotheses)


__all__ = ["beam_search", "candidate_coverage", "candidate_hypotheses", "initial_beams",
           "select_alive", "top_candidates"]
