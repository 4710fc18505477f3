"""Tests for `tf_outheads.decoding.beam`.

Two kinds of fake step functions:

- one-hot tables: the preferred token scores `0` (or a given value), every
  other token `-1e9` (keras-hub `beam_sampler_test.py`), so the output is
  known exactly;
- random tables: log-softmax scores looked up by (sentence, step, previous
  token), deterministic per seed, for comparisons with `greedy_search`,
  keras-hub's `BeamSampler` and a brute-force enumeration.
"""

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import BeamResult
from tf_outheads.decoding import beam_search
from tf_outheads.decoding import gather_beams
from tf_outheads.decoding import greedy_search
from tf_outheads.decoding import tile_for_beam
from tf_outheads.decoding.beam_pool import FinishedPool
from tf_outheads.decoding.beam_pool import best_reachable_scores
from tf_outheads.decoding.beam import candidate_coverage
from tf_outheads.decoding.beam import candidate_hypotheses
from tf_outheads.decoding.beam import initial_beams
from tf_outheads.decoding.beam_pool import merge_finished
from tf_outheads.decoding.beam_pool import n_best
from tf_outheads.decoding.penalties import normalised_scores
from tf_outheads.decoding.beam import select_alive
from tf_outheads.decoding.beam_pool import sentences_done
from tf_outheads.decoding.beam import top_candidates

VOCAB_SIZE = 10
NEG = -1e9


def log_softmax(logits):
    logits = logits - logits.max(axis=-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))


def gnmt_length_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


# -- one-hot tables ----------------------------------------------------------


def table_step_fn(token_table, token_scores=None, vocab_size=VOCAB_SIZE):
    """Follows `token_table[sentence, step]` whatever was fed; EOS past its end.

    The preferred token scores `token_scores[sentence, step]` (default 0),
    every other token `-1e9`. The sentence index and step counter travel in
    the state, so the test also checks that beams carry their own state.
    """
    token_table = tf.constant(token_table, tf.int32)
    if token_scores is None:
        token_scores = tf.zeros(token_table.shape, tf.float32)
    token_scores = tf.constant(token_scores, tf.float32)
    width = token_table.shape[1]

    def step_fn(ids_t, state):
        step, sentence = state["step"], state["sentence"]
        column = tf.minimum(step, width - 1)
        index = tf.stack([sentence, column], axis=-1)
        preferred = tf.gather_nd(token_table, index)
        preferred = tf.where(step < width, preferred, EOS_ID)
        value = tf.gather_nd(token_scores, index)
        one_hot = tf.one_hot(preferred, vocab_size, dtype=tf.float32)
        log_scores = one_hot * value[:, None] + (1.0 - one_hot) * NEG
        return log_scores, {"step": step + 1, "sentence": sentence}

    return step_fn


def table_state(batch_size):
    return {
        "step": tf.zeros([batch_size], tf.int32),
        "sentence": tf.range(batch_size, dtype=tf.int32),
    }


# -- random tables ------------------------------------------------------------


class RandomTable:
    """Log-softmax scores `table[sentence, step, previous token, next token]`.

    `eos_boost` raises EOS's logit so that hypotheses end before the limit;
    `num_sources > 0` adds an attention table `alignment[sentence, step,
    previous token, source]` (a softmax over the real source words, zero on
    the padded ones given by `source_lengths`) for the coverage penalty.
    """

    def __init__(self, seed, num_sentences=1, num_steps=8, vocab_size=VOCAB_SIZE,
                 eos_boost=0.0, num_sources=0, source_lengths=None,
                 blocked_eos=False, scores="log_softmax"):
        rng = np.random.default_rng(seed)
        shape = (num_sentences, num_steps, vocab_size, vocab_size)
        logits = rng.normal(size=shape) * 2.0
        logits[..., EOS_ID] += eos_boost
        if blocked_eos:
            logits[..., EOS_ID] = NEG
        if scores == "log_softmax":
            self.table = log_softmax(logits).astype(np.float32)
        else:  # "cosine": unnormalised scores in [-1, 1], some positive
            self.table = np.tanh(logits).astype(np.float32)
        self.num_steps = num_steps
        self.num_sources = num_sources
        if num_sources:
            if source_lengths is None:
                source_lengths = [num_sources] * num_sentences
            self.source_mask = (
                np.arange(num_sources)[None, :] < np.array(source_lengths)[:, None]
            )
            attention_logits = rng.normal(
                size=(num_sentences, num_steps, vocab_size, num_sources)
            ) * 2.0
            attention_logits = np.where(
                self.source_mask[:, None, None, :], attention_logits, -np.inf
            )
            self.alignment = np.exp(log_softmax(attention_logits)).astype(np.float32)
        self.calls = 0

    def initial_state(self, sentences):
        sentences = tf.constant(list(sentences), tf.int32)
        batch_size = sentences.shape[0]
        state = {"step": tf.zeros([batch_size], tf.int32), "sentence": sentences}
        if self.num_sources:
            state["alignment"] = tf.zeros([batch_size, self.num_sources], tf.float32)
            state["memory_mask"] = tf.gather(
                tf.constant(self.source_mask.astype(np.float32)), sentences
            )
        return state

    def step_fn(self, ids_t, state):
        self.calls += 1
        step, sentence = state["step"], state["sentence"]
        column = tf.minimum(step, self.num_steps - 1)
        index = tf.stack([sentence, column, ids_t], axis=-1)
        log_scores = tf.gather_nd(tf.constant(self.table), index)
        new_state = dict(state, step=step + 1)
        if self.num_sources:
            new_state["alignment"] = tf.gather_nd(tf.constant(self.alignment), index)
        return log_scores, new_state

    def score(self, sentence, tokens, alpha=0.0, beta=0.0):
        """(log-probability, normalised score) of a hypothesis, in float64."""
        previous, log_prob = BOS_ID, 0.0
        coverage = np.zeros(max(self.num_sources, 1))
        for step, token in enumerate(tokens):
            column = min(step, self.num_steps - 1)
            log_prob += float(self.table[sentence, column, previous, token])
            if self.num_sources:
                coverage += self.alignment[sentence, column, previous]
            previous = token
        score = log_prob / gnmt_length_penalty(len(tokens), alpha)
        if beta:
            covered = np.log(np.clip(coverage, np.finfo(np.float32).tiny, 1.0))
            score += beta * covered[self.source_mask[sentence]].sum()
        return log_prob, score


def hypotheses(result, sentence):
    """The n-best of one sentence as lists of tokens (EOS kept)."""
    ids = result.ids.numpy()[sentence]
    lengths = result.lengths.numpy()[sentence]
    return [ids[i, :lengths[i]].tolist() for i in range(len(lengths))]


def assert_results_equal(actual, expected, exact=True):
    np.testing.assert_array_equal(actual.ids, expected.ids)
    np.testing.assert_array_equal(actual.lengths, expected.lengths)
    check = np.testing.assert_array_equal if exact else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    )
    check(actual.scores, expected.scores)
    check(actual.log_probs, expected.log_probs)


# -- tests ---------------------------------------------------------------------


def test_follows_one_hot_table_exactly():
    table = [[5, 6, 7, EOS_ID], [4, EOS_ID, 9, 9]]
    token_scores = [[-0.5, -0.25, -1.0, -0.125], [-2.0, -0.5, -7.0, -7.0]]
    result = beam_search(
        table_step_fn(table, token_scores), table_state(2),
        batch_size=2, beam_size=3, max_length=6,
    )
    assert isinstance(result, BeamResult)
    assert result.ids.dtype == tf.int32 and result.lengths.dtype == tf.int32
    assert result.scores.dtype == tf.float32
    assert result.log_probs.dtype == tf.float32
    np.testing.assert_array_equal(
        result.ids,
        [[[5, 6, 7, EOS_ID, PAD_ID, PAD_ID]], [[4, EOS_ID, 0, 0, 0, 0]]],
    )
    np.testing.assert_array_equal(result.lengths, [[4], [2]])
    np.testing.assert_allclose(result.log_probs, [[-1.875], [-2.5]])
    np.testing.assert_allclose(result.scores, [[-1.875], [-2.5]])


def test_finds_a_better_sequence_than_greedy():
    # From BOS: 5 (0.6) or 6 (0.4). After 5: 7 (0.55) or 8 (0.45), then
    # EOS. After 6: EOS (0.9) or 9 (0.1). Greedy: 5 7 EOS, p = 0.33;
    # the best sequence is 6 EOS, p = 0.36.
    probs = np.zeros([VOCAB_SIZE, VOCAB_SIZE])
    probs[BOS_ID, [5, 6]] = [0.6, 0.4]
    probs[5, [7, 8]] = [0.55, 0.45]
    probs[6, [EOS_ID, 9]] = [0.9, 0.1]
    probs[[7, 8, 9, EOS_ID, PAD_ID], EOS_ID] = 1.0
    with np.errstate(divide="ignore"):
        table = tf.constant(np.maximum(np.log(probs), NEG), tf.float32)

    def step_fn(ids_t, state):
        return tf.gather(table, ids_t), state

    greedy = greedy_search(step_fn, (), batch_size=1, max_length=5)
    np.testing.assert_array_equal(greedy.ids[0, :3], [5, 7, EOS_ID])
    np.testing.assert_allclose(greedy.scores, [math.log(0.33)], rtol=1e-6)

    result = beam_search(step_fn, (), batch_size=1, beam_size=2, max_length=5)
    np.testing.assert_array_equal(result.ids, [[[6, EOS_ID, 0, 0, 0]]])
    np.testing.assert_array_equal(result.lengths, [[2]])
    np.testing.assert_allclose(
        result.log_probs, [[math.log(0.4) + math.log(0.9)]], rtol=1e-6
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(
    "per_row_limit", [False, True], ids=["int_limit", "tensor_limit"]
)
def test_beam_width_one_equals_greedy(seed, per_row_limit):
    table = RandomTable(seed, num_sentences=6, eos_boost=1.5)
    max_length = tf.constant([3, 8, 5, 8, 6, 7]) if per_row_limit else 8
    state = table.initial_state(range(6))
    greedy = greedy_search(table.step_fn, state, 6, max_length)
    beam = beam_search(table.step_fn, state, 6, beam_size=1, max_length=max_length)
    np.testing.assert_array_equal(beam.ids[:, 0], greedy.ids)
    np.testing.assert_array_equal(beam.lengths[:, 0], greedy.lengths)
    np.testing.assert_array_equal(beam.log_probs[:, 0], greedy.scores)
    np.testing.assert_array_equal(beam.scores[:, 0], greedy.scores)
    # EOS does win: not every row runs to its limit.
    assert any(hypotheses(beam, b)[0][-1] == EOS_ID for b in range(6))


@pytest.mark.parametrize(
    "alpha, expected_order",
    [(0.0, ["short", "long"]), (1.0, ["long", "short"])],
    ids=["alpha0_short_wins", "alpha1_long_wins"],
)
def test_length_penalty(alpha, expected_order):
    # Step 0: EOS (0.5), 5 (0.4), 9 (0.1); then 6, 6, EOS for sure.
    # short = [EOS]: log 0.5 / lp(1) = log 0.5 for every alpha;
    # long = [5, 6, 6, EOS]: log 0.4 / lp(4), lp(4) = (9 / 6) ** alpha.
    probs = np.zeros([4, VOCAB_SIZE])
    probs[0, [EOS_ID, 5, 9]] = [0.5, 0.4, 0.1]
    probs[1:3, 6] = 1.0
    probs[3, EOS_ID] = 1.0
    with np.errstate(divide="ignore"):
        table = tf.constant(np.maximum(np.log(probs), NEG), tf.float32)

    def step_fn(ids_t, step):
        return tf.gather(table, tf.minimum(step, 3)), step + 1

    result = beam_search(
        step_fn, tf.zeros([1], tf.int32), batch_size=1, beam_size=2,
        max_length=6, length_penalty=alpha, num_hypotheses=2,
    )
    candidates = {
        "short": ([EOS_ID], math.log(0.5)),
        "long": ([5, 6, 6, EOS_ID], math.log(0.4)),
    }
    assert hypotheses(result, 0) == [candidates[n][0] for n in expected_order]
    log_probs = [candidates[n][1] for n in expected_order]
    lengths = [len(candidates[n][0]) for n in expected_order]
    expected_scores = [
        lp / gnmt_length_penalty(length, alpha)
        for lp, length in zip(log_probs, lengths)
    ]
    np.testing.assert_allclose(result.log_probs[0], log_probs, rtol=1e-6)
    np.testing.assert_allclose(result.scores[0], expected_scores, rtol=1e-6)


@pytest.mark.parametrize(
    "alpha, beta", [(0.0, 0.0), (0.6, 0.3)], ids=["alpha0", "alpha0.6_beta0.3"]
)
def test_n_best_sorted_distinct_and_scored(alpha, beta):
    table = RandomTable(
        7, num_sentences=3, eos_boost=1.0, num_sources=4, source_lengths=[4, 3, 2]
    )
    result = beam_search(
        table.step_fn, table.initial_state(range(3)), 3, beam_size=5,
        max_length=7, length_penalty=alpha, coverage_penalty=beta,
        num_hypotheses=4,
    )
    assert result.ids.shape == (3, 4, 7)
    scores = result.scores.numpy()
    assert np.all(np.isfinite(scores))
    assert np.all(np.diff(scores, axis=1) <= 0)
    for sentence in range(3):
        n_best = hypotheses(result, sentence)
        assert len(set(map(tuple, n_best))) == 4
        for i, tokens in enumerate(n_best):
            assert EOS_ID not in tokens[:-1]
            # Scores recomputed from the table: log P / lp + cp, with the
            # coverage of this hypothesis' own attention history.
            log_prob, score = table.score(sentence, tokens, alpha, beta)
            np.testing.assert_allclose(result.log_probs[sentence, i], log_prob, rtol=1e-5)
            np.testing.assert_allclose(scores[sentence, i], score, rtol=1e-5)
        # PAD after each hypothesis.
        ids, lengths = result.ids.numpy()[sentence], result.lengths.numpy()[sentence]
        for row, length in zip(ids, lengths):
            assert np.all(row[length:] == PAD_ID)


def test_batch_equals_one_by_one():
    table = RandomTable(11, num_sentences=3, eos_boost=0.5)
    limits = [4, 7, 5]
    kwargs = dict(beam_size=3, length_penalty=0.6, num_hypotheses=2, min_length=1)
    batch = beam_search(
        table.step_fn, table.initial_state([0, 1, 2]), 3,
        max_length=tf.constant(limits), **kwargs,
    )
    assert batch.ids.shape == (3, 2, 7)
    for sentence, limit in enumerate(limits):
        alone = beam_search(
            table.step_fn, table.initial_state([sentence]), 1,
            max_length=limit, **kwargs,
        )
        np.testing.assert_array_equal(batch.ids[sentence, :, :limit], alone.ids[0])
        np.testing.assert_array_equal(batch.ids[sentence, :, limit:], PAD_ID)
        np.testing.assert_array_equal(batch.lengths[sentence], alone.lengths[0])
        np.testing.assert_allclose(batch.scores[sentence], alone.scores[0], rtol=1e-6)
        np.testing.assert_allclose(batch.log_probs[sentence], alone.log_probs[0], rtol=1e-6)
        assert np.all(batch.lengths[sentence].numpy() <= limit)


def test_min_length_blocks_early_eos():
    # EOS scores 0 and token 8 -1 at every step: every hypothesis wants EOS.
    def step_fn(ids_t, state):
        row = (tf.one_hot(EOS_ID, VOCAB_SIZE) + tf.one_hot(8, VOCAB_SIZE) - 1.0) * 1e9
        row -= tf.one_hot(8, VOCAB_SIZE)
        return tf.tile(row[None, :], [tf.shape(ids_t)[0], 1]), state

    result = beam_search(
        step_fn, (), batch_size=2, beam_size=2, max_length=6, min_length=3,
        num_hypotheses=2,
    )
    np.testing.assert_array_equal(result.ids[:, 0], [[8, 8, 8, EOS_ID, 0, 0]] * 2)
    np.testing.assert_array_equal(result.ids[:, 1], [[8, 8, 8, 8, EOS_ID, 0]] * 2)
    np.testing.assert_array_equal(result.lengths, [[4, 5]] * 2)
    np.testing.assert_allclose(result.log_probs, [[-3.0, -4.0]] * 2)


def test_per_sentence_max_length():
    table = [[5] * 6 + [EOS_ID], [6] * 6 + [EOS_ID], [7, EOS_ID] + [7] * 5]
    token_scores = np.full([3, 7], -1.0, np.float32)
    result = beam_search(
        table_step_fn(table, token_scores), table_state(3), batch_size=3,
        beam_size=2, max_length=tf.constant([2, 4, 5], tf.int32),
    )
    # A hypothesis cut at its sentence's limit ends without EOS.
    np.testing.assert_array_equal(
        result.ids[:, 0],
        [[5, 5, 0, 0, 0], [6, 6, 6, 6, 0], [7, EOS_ID, 0, 0, 0]],
    )
    np.testing.assert_array_equal(result.lengths, [[2], [4], [2]])
    np.testing.assert_allclose(result.log_probs, [[-2.0], [-4.0], [-2.0]])


def test_zero_max_length_returns_the_empty_hypothesis():
    result = beam_search(
        table_step_fn([[5, EOS_ID]] * 2), table_state(2), batch_size=2, beam_size=2,
        max_length=tf.constant([0, 3]), num_hypotheses=2,
    )
    np.testing.assert_array_equal(result.lengths[0], [0, 0])
    np.testing.assert_array_equal(result.scores[0], [0.0, -np.inf])
    np.testing.assert_array_equal(result.ids[0], PAD_ID)
    np.testing.assert_array_equal(result.ids[1, 0], [5, EOS_ID, 0])


def test_finished_sentences_are_fed_pad():
    fed = []
    inner = table_step_fn(
        [[5, EOS_ID, 9, 9, 9], [6, 6, 6, 6, EOS_ID]],
        [[0.0, 0.0, 0.0, 0.0, 0.0], [-1.0] * 5],
    )

    def step_fn(ids_t, state):
        fed.append(ids_t.numpy().reshape(2, 2).tolist())
        return inner(ids_t, state)

    result = beam_search(step_fn, table_state(2), batch_size=2, beam_size=2, max_length=8)
    np.testing.assert_array_equal(result.lengths, [[2], [5]])
    # BOS first; sentence 0 is done after its EOS at step 1, so its beams
    # get PAD from step 2 on, while sentence 1 goes on.
    assert fed[0] == [[BOS_ID, BOS_ID], [BOS_ID, BOS_ID]]
    assert fed[1][0] == [5, 0]
    assert all(step[0] == [PAD_ID, PAD_ID] for step in fed[2:])
    assert [step[1][0] for step in fed[1:]] == [6, 6, 6, 6]
    assert len(fed) == 5


def coverage_step_fn(ids_t, state):
    """From BOS: 5 (0.6) or 6 (0.4), attending to source word 0. Then EOS
    for sure, attending [0.9, 0.1] after 5 and [0, 1] after 6. Source word
    2 is padding (memory_mask 0) and never attended."""
    first = tf.math.log([[1e-30] * 5 + [0.6, 0.4] + [1e-30] * 3])
    then_eos = (tf.one_hot([EOS_ID], VOCAB_SIZE) - 1.0) * 1e9
    log_scores = tf.where((state["step"] == 0)[:, None], first, then_eos)
    alignment = tf.where(
        (state["step"] == 0)[:, None],
        tf.constant([[1.0, 0.0, 0.0]]),
        tf.where((ids_t == 5)[:, None], tf.constant([[0.9, 0.1, 0.0]]),
                 tf.constant([[0.0, 1.0, 0.0]])),
    )
    return log_scores, dict(state, step=state["step"] + 1, alignment=alignment)


@pytest.mark.parametrize(
    "beta, expected_first", [(0.0, 5), (1.0, 6)], ids=["beta0", "beta1"]
)
def test_coverage_penalty_changes_ranking(beta, expected_first):
    state = {
        "step": tf.zeros([1], tf.int32),
        "alignment": tf.zeros([1, 3]),
        "memory_mask": tf.constant([[1.0, 1.0, 0.0]]),
    }
    result = beam_search(
        coverage_step_fn, state, batch_size=1, beam_size=2, max_length=4,
        coverage_penalty=beta, num_hypotheses=2,
    )
    order = [5, 6] if expected_first == 5 else [6, 5]
    assert hypotheses(result, 0) == [[word, EOS_ID] for word in order]
    # [5, EOS] covers word 1 with 0.1 only: cp = beta * log 0.1; [6, EOS]
    # covers both words fully: cp = 0. The padded word is not counted.
    expected = {5: math.log(0.6) + beta * math.log(0.1), 6: math.log(0.4)}
    np.testing.assert_allclose(
        result.scores[0], [expected[word] for word in order], rtol=1e-6
    )
    np.testing.assert_allclose(
        result.log_probs[0], [math.log(0.6 if w == 5 else 0.4) for w in order],
        rtol=1e-6,
    )


def test_coverage_penalty_without_alignment_raises():
    with pytest.raises(ValueError, match="'alignment'"):
        beam_search(
            table_step_fn([[5, EOS_ID]]), table_state(1), batch_size=1,
            beam_size=2, max_length=3, coverage_penalty=0.2,
        )


@pytest.mark.parametrize(
    "jit_compile", [False, True], ids=["tf_function", "jit_compile"]
)
@pytest.mark.parametrize(
    "per_row_limit", [False, True], ids=["int_limit", "tensor_limit"]
)
def test_compiled_matches_eager(jit_compile, per_row_limit):
    table = RandomTable(
        5, num_sentences=3, eos_boost=1.0, num_sources=4, source_lengths=[4, 2, 3]
    )
    state = table.initial_state([0, 1, 2])
    max_length = tf.constant([6, 4, 5]) if per_row_limit else 6

    def decode(max_length):
        return beam_search(
            table.step_fn, state, 3, beam_size=3, max_length=max_length,
            length_penalty=0.6, coverage_penalty=0.3, min_length=1,
            num_hypotheses=2,
        )

    expected = decode(max_length)
    if per_row_limit:
        result = tf.function(decode, jit_compile=jit_compile)(max_length)
    else:
        result = tf.function(lambda: decode(max_length), jit_compile=jit_compile)()
    # Graph rewrites and XLA fusion may round the float sums differently.
    assert_results_equal(result, expected, exact=False)


@pytest.mark.parametrize(
    "jit_compile", [False, True], ids=["tf_function", "jit_compile"]
)
def test_symbolic_batch_size(jit_compile):
    step_fn = table_step_fn([[5, 5, 5, EOS_ID], [5, EOS_ID, 5, 5]])

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int32)], jit_compile=jit_compile
    )
    def decode(max_length):
        batch_size = tf.shape(max_length)[0]
        state = {
            "step": tf.zeros([batch_size], tf.int32),
            "sentence": tf.range(batch_size),
        }
        return beam_search(step_fn, state, batch_size, 2, max_length)

    result = decode(tf.constant([2, 6], tf.int32))
    np.testing.assert_array_equal(
        result.ids[:, 0], [[5, 5, 0, 0, 0, 0], [5, EOS_ID, 0, 0, 0, 0]]
    )
    np.testing.assert_array_equal(result.lengths, [[2], [2]])


def test_top_beams_match_keras_hub_beam_sampler():
    keras_hub = pytest.importorskip("keras_hub")
    # alpha = 0 and EOS never likely: both searches keep the k best prefixes
    # by log-probability up to the limit. BeamSampler applies a softmax to
    # what `next` returns; on log-probabilities that is the identity.
    batch_size, beam_size, max_length = 2, 3, 6
    table = RandomTable(3, num_sentences=batch_size, blocked_eos=True)
    state = table.initial_state(range(batch_size))
    ours = beam_search(
        table.step_fn, state, batch_size, beam_size, max_length,
        num_hypotheses=beam_size,
    )

    def next_fn(prompt, cache, index):
        ids_t = tf.gather(prompt, index - 1, axis=1)
        log_scores, cache = table.step_fn(ids_t, cache)
        return log_scores, None, cache

    prompt = tf.concat(
        [tf.fill([batch_size, 1], BOS_ID), tf.zeros([batch_size, max_length], tf.int32)],
        axis=1,
    )
    sampler = keras_hub.samplers.BeamSampler(num_beams=beam_size, return_all_beams=True)
    prompts, log_probs = sampler(next_fn, prompt, cache=state, index=1)
    np.testing.assert_array_equal(ours.ids, prompts[:, :, 1:])
    np.testing.assert_array_equal(ours.lengths, max_length)
    np.testing.assert_allclose(ours.log_probs, log_probs, rtol=1e-5)


@pytest.mark.parametrize(
    "alpha, beta",
    [(0.0, 0.0), (1.0, 0.0), (0.6, 0.5)],
    ids=["alpha0", "alpha1", "alpha0.6_beta0.5"],
)
def test_exhaustive_beam_matches_brute_force(alpha, beta):
    # 5 words, at most 3 tokens: 85 hypotheses. A beam of 80 keeps every
    # prefix alive and every candidate in its top k, so the search is
    # exhaustive and its 10-best must be the true 10-best.
    vocab_size, max_length = 5, 3
    table = RandomTable(
        13, num_steps=max_length, vocab_size=vocab_size, num_sources=3,
        source_lengths=[2],
    )
    result = beam_search(
        table.step_fn, table.initial_state([0]), 1, beam_size=80,
        max_length=max_length, length_penalty=alpha, coverage_penalty=beta,
        num_hypotheses=10,
    )
    words = [w for w in range(vocab_size) if w != EOS_ID]
    every = [list(p) + [EOS_ID] for n in range(max_length)
             for p in itertools.product(words, repeat=n)]
    every += [list(p) for p in itertools.product(words, repeat=max_length)]
    assert len(every) == 85
    scored = sorted(every, key=lambda h: -table.score(0, h, alpha, beta)[1])
    assert hypotheses(result, 0) == scored[:10]
    np.testing.assert_allclose(
        result.scores[0], [table.score(0, h, alpha, beta)[1] for h in scored[:10]],
        rtol=1e-5,
    )


@pytest.mark.parametrize(
    "alpha, beta, scores, bound",
    [
        (0.0, 0.0, "log_softmax", 0.0),
        (1.0, 0.0, "log_softmax", 0.0),
        (0.6, 0.4, "log_softmax", 0.0),
        (0.6, 0.0, "cosine", 1.0),
    ],
    ids=["alpha0", "alpha1", "alpha0.6_beta0.4", "cosine_scores"],
)
def test_early_stopping_changes_nothing(alpha, beta, scores, bound):
    def run(max_step_score):
        table = RandomTable(
            17, num_sentences=4, num_steps=10, eos_boost=2.0, num_sources=3,
            scores=scores,
        )
        result = beam_search(
            table.step_fn, table.initial_state(range(4)), 4, beam_size=3,
            max_length=10, length_penalty=alpha, coverage_penalty=beta,
            num_hypotheses=2, max_step_score=max_step_score,
        )
        return result, table.calls

    early, early_calls = run(bound)
    full, full_calls = run(None)
    assert_results_equal(early, full)
    assert early_calls <= full_calls == 10
    if scores == "log_softmax" and alpha == 0.0:
        assert early_calls < full_calls
    if scores == "cosine":
        # The log-probability bound does not hold for positive scores: it
        # stops sentences too early and changes the result.
        wrong, _ = run(0.0)
        assert not np.array_equal(wrong.scores, full.scores)


def test_tile_and_gather_beams():
    state = {"memory": tf.constant([[1.0, 1.5], [2.0, 2.5]]), "ids": tf.constant([10, 20])}
    tiled = tile_for_beam(state, 3)
    np.testing.assert_array_equal(tiled["ids"], [10, 10, 10, 20, 20, 20])
    np.testing.assert_array_equal(tiled["memory"][3:], [[2.0, 2.5]] * 3)
    beams = tf.constant([10, 11, 12, 20, 21, 22])
    gathered = gather_beams(beams, tf.constant([[2, 2, 0], [1, 0, 2]]), beam_size=3)
    np.testing.assert_array_equal(gathered, [12, 12, 10, 21, 20, 22])
    fewer = gather_beams(beams, tf.constant([[1], [2]]), beam_size=3)
    np.testing.assert_array_equal(fewer, [11, 22])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beam_size": 0}, "beam_size=0"),
        ({"num_hypotheses": 3}, "num_hypotheses=3"),
        ({"max_length": -1}, "max_length=-1"),
        ({"min_length": -2}, "min_length=-2"),
        ({"coverage_penalty": -0.1}, "coverage_penalty=-0.1"),
        ({"max_step_score": math.inf}, "max_step_score=inf"),
        ({"length_penalty": math.nan}, "length_penalty=nan"),
        ({"length_penalty": -math.inf}, "length_penalty=-inf"),
    ],
    ids=["beam_size", "num_hypotheses", "max_length", "min_length",
         "coverage_penalty", "max_step_score", "length_penalty_nan", "length_penalty_inf"],
)
def test_invalid_arguments(kwargs, message):
    arguments = dict(beam_size=2, max_length=3)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        beam_search(table_step_fn([[EOS_ID]]), table_state(1), 1, **arguments)


def memory_step_fn(copy_memory):
    """An RNN-like step reading a per-sentence `memory` it passes through unchanged
    (or, with `copy_memory`, returns as a new tensor, which the search must then
    reorder like any changed entry)."""
    rng = np.random.default_rng(7)
    w_memory = tf.constant(rng.normal(size=(6, VOCAB_SIZE)), tf.float32)
    w_hidden = tf.constant(rng.normal(size=(6, 6)), tf.float32)
    embedding = tf.constant(rng.normal(size=(VOCAB_SIZE, 6)), tf.float32)

    def step_fn(ids_t, state):
        hidden = tf.tanh(tf.matmul(state["hidden"], w_hidden) + tf.gather(embedding, ids_t))
        context = tf.reduce_mean(state["memory"], axis=1) * hidden
        logits = tf.matmul(context, w_memory)
        memory = tf.identity(state["memory"]) if copy_memory else state["memory"]
        return tf.nn.log_softmax(logits), {"memory": memory, "hidden": hidden}
    return step_fn


def test_entries_returned_unchanged_are_not_reordered_and_the_result_is_the_same():
    rng = np.random.default_rng(3)
    batch, beam = 3, 4
    state = {"memory": tf.constant(rng.normal(size=(batch, 5, 6)), tf.float32),
             "hidden": tf.constant(rng.normal(size=(batch, 6)), tf.float32)}

    def search(copy_memory):
        @tf.function
        def run(state):
            return beam_search(memory_step_fn(copy_memory), state, batch_size=batch,
                               beam_size=beam, max_length=7, num_hypotheses=beam)
        result = run(state)
        graph = run.get_concrete_function(state).graph.as_graph_def()
        gathers = sum(node.op == "GatherV2" for function in graph.library.function
                      for node in function.node_def)
        return result, gathers

    passed_through, gathers = search(copy_memory=False)
    copied, gathers_with_copy = search(copy_memory=True)
    assert_results_equal(passed_through, copied)
    assert gathers_with_copy == gathers + 1  # the memory's reordering, skipped


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beam", [1, 3, 5])
def test_min_length_equals_a_step_function_that_masks_eos(seed, beam):
    # EOS is boosted so that it is often a beam's best word: the search must
    # still find the best 2k other words while it is forbidden.
    table = RandomTable(seed, num_sentences=3, eos_boost=3.0)
    min_length = 4

    def masked_step_fn(ids_t, state):
        log_scores, new_state = table.step_fn(ids_t, state)
        blocked = tf.logical_and((state["step"] < min_length)[:, None],
                                 tf.equal(tf.range(VOCAB_SIZE), EOS_ID)[None, :])
        return tf.where(blocked, -math.inf, log_scores), new_state

    options = dict(batch_size=3, beam_size=beam, max_length=7, num_hypotheses=beam,
                   length_penalty=0.6)
    expected = beam_search(masked_step_fn, table.initial_state(range(3)), **options)
    actual = beam_search(table.step_fn, table.initial_state(range(3)),
                         min_length=min_length, **options)
    assert_results_equal(actual, expected)
    assert np.all(actual.lengths[actual.log_probs > -np.inf] > min_length)


# -- the pieces of the search, alone -------------------------------------------


def test_initial_beams_start_one_hypothesis_per_sentence():
    state = {"memory": tf.constant([[1.0], [2.0]]), "alignment": tf.zeros([2, 3])}
    loop = initial_beams(state, batch_size=2, beam_size=3, limits=tf.constant([4, 0]),
                         max_steps=4, bos_id=BOS_ID, use_coverage=True)
    # Sentence 0: only beam 0 alive. Sentence 1 (limit 0): no alive beam, the
    # empty hypothesis (score 0) already finished, and done.
    np.testing.assert_array_equal(loop.alive_log_probs,
                                  [[0.0, -np.inf, -np.inf], [-np.inf] * 3])
    np.testing.assert_array_equal(loop.finished.scores,
                                  [[-np.inf] * 3, [0.0, -np.inf, -np.inf]])
    np.testing.assert_array_equal(loop.finished.lengths, 0)
    np.testing.assert_array_equal(loop.done, [False, True])
    np.testing.assert_array_equal(loop.ids_t, [BOS_ID] * 6)
    assert loop.alive_ids.shape == (2, 3, 4)
    np.testing.assert_array_equal(loop.alive_ids, PAD_ID)
    np.testing.assert_array_equal(loop.model_state["memory"], [[1.0]] * 3 + [[2.0]] * 3)
    np.testing.assert_array_equal(loop.alive_coverage, np.zeros([2, 3, 3]))
    assert int(loop.step) == 0


def test_top_candidates_are_the_top_2k_sums_of_a_hand_made_table():
    # 1 sentence, k = 2, V = 6. Beam 0 (log P = -1) and beam 1 (log P = -2).
    log_scores = tf.constant([[[-0.1, -3.0, -0.5, -9.0, -0.2, -4.0],
                               [-0.05, -0.3, -8.0, -0.4, -7.0, -0.6]]])
    alive = tf.constant([[-1.0, -2.0]])
    log_probs, parents, words = top_candidates(log_scores, alive, 1, 2, step=0)
    # Every sum, sorted: the 4 best of the 12.
    sums = alive.numpy()[0][:, None] + log_scores.numpy()[0]
    order = np.argsort(-sums, axis=None, kind="stable")[:4]
    np.testing.assert_allclose(log_probs, [sums.ravel()[order]])
    np.testing.assert_array_equal(parents, [order // 6])
    np.testing.assert_array_equal(words, [order % 6])
    np.testing.assert_array_equal(parents, [[0, 0, 0, 1]])
    np.testing.assert_array_equal(words, [[0, 4, 2, 0]])


def test_top_candidates_ignore_dead_beams_and_break_ties_by_beam():
    # Beam 1 is dead: whatever its row scored (here +inf) must not count.
    # V = 3 < 2k: beam 0 gives 3 candidates, the 4th is from the dead beam.
    log_scores = tf.constant([[[0.0] * 3, [math.inf] * 3]])
    dead = top_candidates(log_scores, tf.constant([[-1.0, -math.inf]]), 1, 2, step=0)
    # Beam 0's words first (ties: lower id first), then -inf, not NaN.
    np.testing.assert_array_equal(dead[0], [[-1.0, -1.0, -1.0, -np.inf]])
    np.testing.assert_array_equal(dead[1][:, :3], [[0, 0, 0]])
    np.testing.assert_array_equal(dead[2][:, :3], [[0, 1, 2]])
    log_scores = tf.zeros([1, 2, 3])  # every word equally likely on both beams
    tie = top_candidates(log_scores, tf.constant([[-1.0, -1.0]]), 1, 2, step=0)
    # A tie between beams goes to the lower beam: beam 0's 3 words, then beam 1's first.
    np.testing.assert_array_equal(tie[1], [[0, 0, 0, 1]])
    np.testing.assert_array_equal(tie[2], [[0, 1, 2, 0]])
    none = top_candidates(log_scores, tf.constant([[-math.inf, -math.inf]]), 1, 2, step=0)
    np.testing.assert_array_equal(none[0], -np.inf)


@pytest.mark.parametrize("step, eos_allowed", [(1, False), (2, True)])
def test_top_candidates_forbid_eos_before_min_length(step, eos_allowed):
    # EOS is the best word of both beams.
    log_scores = tf.constant([[[-1.0, -1.5, -2.0, -0.1, -2.5],
                               [-1.0, -1.5, -2.0, -0.1, -2.5]]])
    log_probs, _, words = top_candidates(log_scores, tf.constant([[0.0, -0.5]]), 1, 2,
                                         step=tf.constant(step), min_length=2,
                                         eos_id=3)
    assert (3 in words.numpy()) == eos_allowed
    if eos_allowed:
        np.testing.assert_array_equal(words[0, :2], [3, 3])
    else:
        # The best 4 without EOS: -1, -1.5 on beam 0, then -1.5 on beam 1, -2 on beam 0.
        np.testing.assert_allclose(log_probs, [[-1.0, -1.5, -1.5, -2.0]])
    assert np.all(np.isfinite(log_probs))


def test_candidate_hypotheses_copy_the_parent_and_write_the_word():
    alive_ids = tf.constant([[[5, 6, 0, 0], [7, 8, 0, 0]]])
    ids = candidate_hypotheses(alive_ids, tf.constant([[1, 0, 1]]),
                               tf.constant([[3, 9, 4]]), step=tf.constant(2))
    np.testing.assert_array_equal(ids, [[[7, 8, 3, 0], [5, 6, 9, 0], [7, 8, 4, 0]]])


def test_candidate_coverage_adds_the_step_and_follows_the_parents():
    coverage = candidate_coverage(tf.constant([[[0.5, 0.0], [0.2, 0.3]]]),
                                  tf.constant([[[0.25, 0.75], [1.0, 0.0]]]),
                                  tf.constant([[1, 1, 0]]))
    np.testing.assert_allclose(coverage, [[[1.2, 0.3], [1.2, 0.3], [0.75, 0.75]]])


def test_normalised_scores_are_gnmt_scores():
    log_probs = tf.constant([[-2.0, -3.0]])
    plain = normalised_scores(log_probs, tf.constant(4), 0.6)
    np.testing.assert_allclose(plain, [[-2.0 / 1.5 ** 0.6, -3.0 / 1.5 ** 0.6]], rtol=1e-6)
    # cp = beta * sum log min(coverage, 1) over the unmasked source words.
    coverage = tf.constant([[[0.5, 2.0, 0.1], [1.0, 0.25, 0.0]]])
    mask = tf.constant([[[True, True, False]]])
    covered = normalised_scores(log_probs, tf.constant(4), 0.0, coverage, 0.5, mask)
    np.testing.assert_allclose(
        covered, [[-2.0 + 0.5 * math.log(0.5), -3.0 + 0.5 * math.log(0.25)]], rtol=1e-6)


def pool_of(scores, lengths, max_steps=3):
    scores = tf.constant(scores, tf.float32)
    return FinishedPool(ids=tf.fill(scores.shape + (max_steps,), 1), scores=scores,
                        log_probs=scores * 2.0, lengths=tf.constant(lengths, tf.int32))


def test_merge_finished_admits_only_enders_in_the_top_k():
    # k = 2: candidates 0 and 1 are the top k, 2 and 3 the runners-up.
    pool = pool_of([[-5.0, -math.inf]], [[1, 0]])
    ids = tf.constant([[[10, 11, 0], [20, 21, 0], [30, 31, 0], [40, 41, 0]]])
    log_probs = tf.constant([[-1.0, -2.0, -3.0, -4.0]])
    scores = tf.constant([[-1.5, -2.5, -0.5, -0.1]])  # runners-up score best
    ends = tf.constant([[False, True, True, True]])
    merged = merge_finished(pool, 2, ids, log_probs, scores, ends, tf.constant(2))
    # Candidate 1 (ends, top k) joins; 0 (does not end) and 2, 3 (not top k) do not.
    np.testing.assert_array_equal(merged.scores, [[-2.5, -5.0]])
    np.testing.assert_array_equal(merged.ids[0, 0], [20, 21, 0])
    np.testing.assert_array_equal(merged.ids[0, 1], [1, 1, 1])
    np.testing.assert_array_equal(merged.log_probs, [[-2.0, -10.0]])
    np.testing.assert_array_equal(merged.lengths, [[2, 1]])


def test_merge_finished_keeps_the_best_k_and_the_old_pool_wins_ties():
    ids = tf.zeros([1, 4, 3], tf.int32)
    log_probs = tf.constant([[-1.0, -2.0, -3.0, -4.0]])
    ends = tf.constant([[True, True, True, True]])
    # The new -0.5 enters first and pushes out the old -3.0.
    merged = merge_finished(pool_of([[-1.0, -3.0]], [[4, 5]]), 2, ids, log_probs,
                            tf.constant([[-0.5, -2.0, -0.1, -0.1]]), ends, tf.constant(6))
    np.testing.assert_array_equal(merged.scores, [[-0.5, -1.0]])
    np.testing.assert_array_equal(merged.lengths, [[6, 4]])
    np.testing.assert_array_equal(merged.log_probs, [[-1.0, -2.0]])
    # The old -2.0 and the new -2.0 tie for the last slot: the old one keeps it.
    tied = merge_finished(pool_of([[-1.0, -2.0]], [[4, 5]]), 2, ids, log_probs,
                          tf.constant([[-2.0, -9.0, -0.1, -0.1]]), ends, tf.constant(6))
    np.testing.assert_array_equal(tied.scores, [[-1.0, -2.0]])
    np.testing.assert_array_equal(tied.lengths, [[4, 5]])


def test_select_alive_never_extends_a_candidate_that_ended():
    log_probs = tf.constant([[-0.5, -1.0, -2.0, -3.0]])
    ends = tf.constant([[True, False, True, False]])  # the best one ended
    words = tf.constant([[3, 6, 3, 8]])
    parents = tf.constant([[0, 1, 1, 0]])
    alive_log_probs, (alive_words, alive_parents, nothing) = select_alive(
        log_probs, ends, (words, parents, ()), 2)
    np.testing.assert_array_equal(alive_log_probs, [[-1.0, -3.0]])
    np.testing.assert_array_equal(alive_words, [[6, 8]])
    np.testing.assert_array_equal(alive_parents, [[1, 0]])
    assert nothing == ()
    # At the limit every candidate ends: nothing stays alive.
    at_limit, _ = select_alive(log_probs, tf.ones([1, 4], tf.bool), words, 2)
    np.testing.assert_array_equal(at_limit, -np.inf)


@pytest.mark.parametrize(
    "alpha, bound, expected",
    [
        # Log-probabilities (u = 0): alpha = 0 gives A; alpha = 1, A / lp(limit).
        (0.0, 0.0, [-3.0, -3.0]),
        (1.0, 0.0, [-3.0 / (11 / 6), -3.0 / (8 / 6)]),
        # u = 1: the best end length L maximises (A + (L - t)) / lp(L):
        # with alpha = 0, the limit; with t = 2 and limits 6, 3: A + 4, A + 1.
        (0.0, 1.0, [1.0, -2.0]),
    ],
)
def test_best_reachable_scores(alpha, bound, expected):
    end_lengths = tf.range(1, 9)
    end_penalties = ((5.0 + tf.cast(end_lengths, tf.float32)) / 6.0) ** alpha
    best = best_reachable_scores(tf.constant([-3.0, -3.0]), tf.constant(2),
                                 tf.constant([6, 3]), end_lengths, end_penalties, bound)
    np.testing.assert_allclose(best, expected, rtol=1e-6)
    # A sentence at its limit can reach nothing.
    at_limit = best_reachable_scores(tf.constant([-3.0]), tf.constant(3), tf.constant([3]),
                                     end_lengths, end_penalties, bound)
    np.testing.assert_array_equal(at_limit, [-np.inf])


def test_sentences_done():
    done = sentences_done(
        done=tf.constant([True, False, False, False, False]),
        at_limit=tf.constant([False, True, False, False, False]),
        best_alive=tf.constant([-1.0, -1.0, -math.inf, -1.0, -1.0]),
        # n = 2: the second best finished score decides.
        finished_scores=tf.constant([[0.0, -9.0]] * 3 + [[-0.5, -2.0], [-0.5, -0.9]]),
        num_hypotheses=2,
        best_reachable=tf.constant([-1.0] * 5),
    )
    # Already done, at its limit, no alive beam, can still improve, cannot.
    np.testing.assert_array_equal(done, [True, True, True, False, True])
    no_bound = sentences_done(tf.constant([False]), tf.constant([False]),
                              tf.constant([-1.0]), tf.constant([[0.0, 0.0]]), 2)
    np.testing.assert_array_equal(no_bound, [False])


def test_n_best_pads_beyond_each_length_and_empties_missing_slots():
    finished = FinishedPool(
        ids=tf.constant([[[5, 3, 7, 7], [6, 6, 6, 3], [9, 9, 9, 9]]]),
        scores=tf.constant([[-1.0, -2.0, -math.inf]]),
        log_probs=tf.constant([[-1.5, -2.5, -math.inf]]),
        lengths=tf.constant([[2, 4, 3]]),
    )
    result = n_best(finished, 3)
    np.testing.assert_array_equal(result.ids, [[[5, 3, 0, 0], [6, 6, 6, 3], [0, 0, 0, 0]]])
    np.testing.assert_array_equal(result.lengths, [[2, 4, 0]])
    np.testing.assert_array_equal(result.scores, [[-1.0, -2.0, -np.inf]])
    np.testing.assert_array_equal(result.log_probs, [[-1.5, -2.5, -np.inf]])
    assert n_best(finished, 1).ids.shape == (1, 1, 4)
