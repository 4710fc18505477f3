"""Decoding constraints (`tf_outheads.decoding.constraints`): an EOS bias and no piece
right after itself, in every search, with the model's own scores reported.

Toy step functions whose preferred piece is known at every step (as in
test_greedy.py and test_beam.py), then a tiny LSTM for `TranslationGraph`'s per-row
options, forced decoding and the continuous (vMF) head.
"""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.test_beam import RandomTable, gnmt_length_penalty, hypotheses
from tests.export.conftest import tiny_model
from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import BeamResult, Scorer, Translator, beam_search, greedy_search
from tf_outheads.decoding.constraints import remove_eos_bias, with_constraints
from tf_outheads.decoding.prefix import with_target_prefix
from tf_outheads.decoding.sampling import Sampling, row_seeds
from tf_outheads_zoo.lstm import LSTMSeq2Seq

VOCAB = 10
WORD = 5  # the piece the toy models prefer


def rising_eos_step_fn(gap=20.0, low=40.0):
    """Prefers `WORD` (logit 0), then EOS, whose logit `gap · (step - 3.5)` rises a
    step at a time: greedy search ends at step 4 (5 pieces with EOS); a bias b moves
    the crossing by b / gap steps. Every other piece has logit `-low`."""

    def step_fn(ids_t, state):
        step = tf.cast(state["step"], tf.float32)
        logits = tf.one_hot(tf.fill(tf.shape(ids_t), WORD), VOCAB, on_value=0.0,
                            off_value=-low)
        eos = tf.equal(tf.range(VOCAB), EOS_ID)[tf.newaxis, :]
        logits = tf.where(eos, (gap * (step - 3.5))[:, tf.newaxis], logits)
        return tf.nn.log_softmax(logits), {"step": state["step"] + 1}

    return step_fn


def repeating_step_fn(ids_t, state):
    """Prefers the piece fed (`WORD` after BOS), then the next of 4..9 (a cycle), and EOS
    from step 6 on: `5 5 5 5 5 5 EOS`, or `5 6 7 8 9 4 EOS` without repeats."""
    step = state["step"]
    fed = tf.where(ids_t < 4, WORD, ids_t)
    following = 4 + (fed - 3) % 6
    logits = (tf.one_hot(fed, VOCAB, on_value=30.0, off_value=0.0)
              + tf.one_hot(following, VOCAB, on_value=29.0, off_value=0.0) - 30.0)
    eos = tf.equal(tf.range(VOCAB), EOS_ID)[tf.newaxis, :]
    logits = tf.where(eos, tf.cast(4 * step - 22, tf.float32)[:, tf.newaxis], logits)
    return tf.nn.log_softmax(logits), {"step": step + 1}


def steps(batch_size):
    return {"step": tf.zeros([batch_size], tf.int32)}


def forced_scores(step_fn, ids):
    """The model's score of outputs `ids (B, T)` (PAD after each): the sum of its
    log-scores at each piece, the outputs fed back (forced decoding of a toy)."""
    ids = tf.constant(ids, tf.int32)
    state, fed = steps(ids.shape[0]), tf.fill([ids.shape[0]], BOS_ID)
    total = tf.zeros([ids.shape[0]])
    for t in range(ids.shape[1]):
        log_scores, state = step_fn(fed, state)
        piece = ids[:, t]
        total += tf.where(piece != PAD_ID, tf.gather(log_scores, piece, batch_dims=1), 0.0)
        fed = piece
    return total.numpy()


def constrained(step_fn, batch_size, prefix=None, **constraints):
    """`(step_fn, state)` as the translation graph wraps them: the constraints inside,
    then the target prefix (`(ids, lengths)` or `None`)."""
    step_fn, state = with_constraints(
        step_fn, steps(batch_size), batch_size,
        prefix_lengths=None if prefix is None else prefix[1], **constraints)
    if prefix is not None:
        step_fn, state = with_target_prefix(step_fn, state, *prefix)
    return step_fn, state


def greedy(step_fn, batch_size, search="greedy", max_length=12, prefix=None, **constraints):
    """`greedy_search` (plain, compacting or sampling) of `step_fn` with `constraints`;
    returns its result with the model's scores (`remove_eos_bias`)."""
    step_fn, state = constrained(step_fn, batch_size, prefix, **constraints)
    sampling = (Sampling(seeds=row_seeds(7, tf.range(batch_size))) if search == "sampling"
                else None)
    result = greedy_search(step_fn, state, batch_size, max_length,
                           compact=search == "compact", sampling=sampling)
    return remove_eos_bias(result, constraints.get("eos_bias", 0.0))


def beam(step_fn, batch_size, beam_size=3, max_length=12, length_penalty=0.0, prefix=None,
         **constraints):
    """`beam_search` of `step_fn` with `constraints`, n = beam size, the model's scores."""
    bias = constraints.get("eos_bias", 0.0)
    step_fn, state = constrained(step_fn, batch_size, prefix, **constraints)
    result = beam_search(step_fn, state, batch_size, beam_size, max_length,
                         length_penalty=length_penalty, num_hypotheses=beam_size,
                         max_eos_bias=tf.reshape(tf.maximum(tf.cast(bias, tf.float32), 0.0),
                                                 [-1, 1]))
    return remove_eos_bias(result, bias, length_penalty)


def has_repeat(row):
    pieces = [piece for piece in row if piece != PAD_ID]
    return any(a == b for a, b in zip(pieces, pieces[1:]))


# -- the EOS bias ------------------------------------------------------------------------

@pytest.mark.parametrize("search", ["greedy", "compact", "sampling"])
def test_an_eos_bias_moves_the_step_greedy_search_ends_at(search):
    biases = [-20.0, 0.0, 20.0, 45.0]  # EOS's logit rises 20 nats a step
    step_fn = rising_eos_step_fn()
    result = greedy(step_fn, 4, search, eos_bias=tf.constant(biases))
    np.testing.assert_array_equal(result.lengths, [6, 5, 4, 3])
    assert result.ids.numpy()[np.arange(4), result.lengths.numpy() - 1].tolist() == [EOS_ID] * 4
    # The scores reported are the model's: forced decoding of the outputs.
    np.testing.assert_allclose(result.scores, forced_scores(step_fn, result.ids), atol=1e-4)
    # One row alone (a Python bias) decodes as in the batch.
    alone = greedy(step_fn, 1, search, eos_bias=-20.0)
    np.testing.assert_array_equal(alone.ids[0], result.ids[0])
    np.testing.assert_allclose(alone.scores[0], result.scores[0], atol=1e-5)


def test_an_eos_bias_moves_the_end_of_a_beam_s_best_hypothesis():
    # A softer toy: EOS's logit rises 1 nat a step. GNMT's α = 1 divides the bias by
    # lp(|Y|): a positive one favours short hypotheses, a negative one long ones.
    step_fn = rising_eos_step_fn(gap=1.0, low=5.0)
    lengths = [int(beam(step_fn, 1, beam_size=2, length_penalty=1.0,
                        eos_bias=bias).lengths[0, 0]) for bias in (-20.0, 0.0, 5.0, 20.0)]
    assert lengths == [12, 5, 4, 1]  # -20: no EOS is worth it before the limit
    result = beam(step_fn, 1, beam_size=2, length_penalty=1.0, eos_bias=5.0)
    found = result.lengths.numpy()[0] > 0
    forced = forced_scores(step_fn, result.ids.numpy()[0][found])
    np.testing.assert_allclose(result.log_probs.numpy()[0][found], forced, atol=1e-4)
    np.testing.assert_allclose(result.scores.numpy()[0][found],
                               forced / gnmt_length_penalty(result.lengths.numpy()[0][found],
                                                            1.0), atol=1e-4)


@pytest.mark.parametrize("alpha, bias, block", [(0.0, -2.0, False), (0.6, 2.0, False),
                                                (1.0, -3.0, True), (0.0, 1.5, True)])
def test_an_exhaustive_beam_ranks_by_biased_scores_and_reports_the_model_s(alpha, bias,
                                                                           block):
    # As test_beam.py's brute force (5 pieces, at most 3, a beam of 80 keeps them all):
    # the n-best is the best of every hypothesis by the biased score, (log P + b·[EOS])
    # / lp, with the pieces' repeats left out when blocked (BOS and PAD, never outputs of
    # a real model, are fed to no one here and not blocked); its scores are the model's.
    vocab_size, max_length = 5, 3
    table = RandomTable(13, num_steps=max_length, vocab_size=vocab_size)
    step_fn, state = with_constraints(table.step_fn, table.initial_state([0]), 1,
                                      eos_bias=bias, block_repeats=block)
    result = beam_search(step_fn, state, 1, beam_size=80, max_length=max_length,
                         length_penalty=alpha, num_hypotheses=10, max_eos_bias=max(bias, 0.0))
    result = remove_eos_bias(result, bias, alpha)
    words = [w for w in range(vocab_size) if w != EOS_ID]
    every = [list(p) + [EOS_ID] for n in range(max_length)
             for p in itertools.product(words, repeat=n)]
    every += [list(p) for p in itertools.product(words, repeat=max_length)]
    if block:
        every = [h for h in every if not any(a == b and a not in (BOS_ID, PAD_ID)
                                             for a, b in zip(h, h[1:]))]

    def biased(h):
        log_prob = table.score(0, h, alpha)[0] + bias * (h[-1] == EOS_ID)
        return log_prob / gnmt_length_penalty(len(h), alpha)

    best = sorted(every, key=lambda h: -biased(h))[:10]
    assert hypotheses(result, 0) == best
    np.testing.assert_allclose(result.scores[0], [table.score(0, h, alpha)[1] for h in best],
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.log_probs[0], [table.score(0, h)[0] for h in best],
                               rtol=1e-5, atol=1e-5)


def test_a_positive_bias_keeps_early_stopping_exact():
    # The stopping bound assumes no step scores above `max_step_score` (0 for
    # log-probabilities); a positive bias lifts EOS above it, and `max_eos_bias` adds it.
    def run(max_step_score, max_eos_bias):
        table = RandomTable(17, num_sentences=4, num_steps=10, eos_boost=2.0)
        step_fn, state = with_constraints(table.step_fn, table.initial_state(range(4)), 4,
                                          eos_bias=3.0)
        return beam_search(step_fn, state, 4, beam_size=3, max_length=10, num_hypotheses=2,
                           max_step_score=max_step_score, max_eos_bias=max_eos_bias)

    full = run(None, 0.0)
    np.testing.assert_array_equal(run(0.0, 3.0).scores, full.scores)
    assert not np.array_equal(run(0.0, 0.0).scores, full.scores)  # stops too early


def test_the_bias_is_removed_once_per_ended_hypothesis_whatever_the_penalties():
    # A normalised score is log P / lp(|Y|) + cp: the bias leaves it as b / lp(|Y|) only.
    ids = tf.constant([[[5, EOS_ID, PAD_ID], [5, 6, 7], [PAD_ID] * 3]])  # ended, cut, empty
    lengths = tf.constant([[2, 3, 0]])
    log_probs = tf.constant([[-1.0, -2.0, float("-inf")]])
    bias, alpha, coverage = 4.0, 0.6, -0.25
    biased = log_probs + [[bias, 0.0, 0.0]]
    result = BeamResult(ids, lengths, biased / gnmt_length_penalty(lengths.numpy(), alpha)
                        + coverage, biased)
    model = remove_eos_bias(result, tf.constant([bias]), tf.constant([[alpha]]))
    np.testing.assert_allclose(model.log_probs, log_probs)
    np.testing.assert_allclose(
        model.scores, log_probs / gnmt_length_penalty(lengths.numpy(), alpha) + coverage,
        rtol=1e-6)


# -- blocked repeats -------------------------------------------------------------------

@pytest.mark.parametrize("search", ["greedy", "compact", "sampling", "beam"])
def test_no_piece_follows_itself_when_repeats_are_blocked(search):
    def outputs(block):
        if search == "beam":
            result = beam(repeating_step_fn, 2, block_repeats=block)
            return result, result.ids.numpy().reshape(-1, result.ids.shape[-1])
        result = greedy(repeating_step_fn, 2, search, block_repeats=block)
        return result, result.ids.numpy()

    plain, plain_ids = outputs(tf.constant([False, False]))
    assert plain_ids[0].tolist()[:7] == [WORD] * 6 + [EOS_ID]
    blocked, blocked_ids = outputs(tf.constant([True, False]))  # the second row repeats
    assert blocked_ids[0].tolist()[:7] == [5, 6, 7, 8, 9, 4, EOS_ID]
    rows = len(blocked_ids) // 2  # beam: n hypotheses per sentence
    assert not any(has_repeat(row) for row in blocked_ids[:rows])
    np.testing.assert_array_equal(blocked_ids[rows:], plain_ids[rows:])
    if search != "beam":  # a chosen piece scores as the model scores it
        np.testing.assert_allclose(blocked.scores, forced_scores(repeating_step_fn,
                                                                 blocked_ids), atol=1e-4)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_target_prefix_that_repeats_is_forced_as_given(search):
    prefix = (tf.constant([[5, 5, 5], [7, 7, 0]]), tf.constant([3, 2]))
    if search == "greedy":
        result = greedy(repeating_step_fn, 2, prefix=prefix, block_repeats=True)
        ids = result.ids.numpy()
        scores = result.scores.numpy()
    else:
        result = beam(repeating_step_fn, 2, prefix=prefix, block_repeats=True)
        ids = result.ids.numpy()[:, 0]
        scores = result.log_probs.numpy()[:, 0]
    # The prefix as given, then the search without repeats: the next piece is not the
    # prefix's last.
    assert ids[0].tolist()[:5] == [5, 5, 5, 6, 7]
    assert ids[1].tolist()[:4] == [7, 7, 8, 9]
    assert not has_repeat(ids[0][2:]) and not has_repeat(ids[1][1:])
    np.testing.assert_allclose(scores, forced_scores(repeating_step_fn, ids), atol=1e-4)


# -- a model: TranslationGraph, forced decoding, the continuous head --------------------

@pytest.fixture(scope="module")
def model(bible_tokenizer):
    """tests/export's tied LSTM of size 16, random weights from U(-0.5, 0.5). It runs
    to the output limit (repeating pieces) without a bias, ends within 3 pieces with
    +0.5."""
    return tiny_model("tied", bible_tokenizer.vocab_size)


@pytest.mark.parametrize("kwargs, message", [
    ({"eos_bias": float("nan")}, r"`eos_bias` must be a finite number .* eos_bias=nan"),
    ({"eos_bias": float("-inf")}, r"eos_bias=-inf"),
    ({"eos_bias": 1000}, r"in \[-100, 100\]. Received: eos_bias=1000"),
    ({"eos_bias": "x"}, r"`eos_bias` must be a number. Received: eos_bias='x'"),
    ({"block_repeats": 1}, r"`block_repeats` must be a bool .* block_repeats=1"),
    ({"block_repeats": "False"}, r"block_repeats='False'"),
], ids=["nan", "-inf", "1000", "string", "int", "string bool"])
def test_bad_values_are_refused_by_name(model, bible_tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        Translator(model, bible_tokenizer, bible_tokenizer, **kwargs)


def request_options(batch_size, **given):
    """`TranslationGraph.translate`'s options (the export's signature): a value given,
    or "not set" (-1; NaN for `eos_bias`)."""
    from tests.export.options import signature_options

    options = signature_options(**given)
    del options["target_prefix"]
    return options


def test_per_row_options_of_a_request_decode_each_row_as_alone(model, bible_tokenizer,
                                                               bible_slice):
    # The graph's default bias here, +0.5, ends outputs early; -5 never before the limit.
    graph = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=2,
                       eos_bias=0.5).graph
    cache = model.head.inference_cache()
    sources = tf.constant(bible_slice.sources[:3])
    biases, blocks = [float("nan"), 100.0, -5.0], [-1, 0, 1]
    together = graph.translate(sources, cache, request_options(
        3, eos_bias=biases, block_repeats=blocks))
    for row in range(3):
        alone = graph.translate(sources[row:row + 1], cache, request_options(
            1, eos_bias=biases[row], block_repeats=blocks[row]))
        assert alone["translations"][0, 0] == together["translations"][row, 0]
        np.testing.assert_allclose(alone["scores"][0], together["scores"][row], atol=1e-4)
    default = graph.translate(sources, cache, request_options(3))
    # NaN: the default bias (-1 would be a bias). 100 ends at once, with the model's
    # log-probability of that EOS as its score. -5: longer than the default.
    assert together["translations"][0, 0] == default["translations"][0, 0]
    np.testing.assert_allclose(together["scores"][0], default["scores"][0], atol=1e-5)
    assert together["translations"][1, 0] == b"" and -100 < together["scores"][1, 0] < 0
    longer, shorter = (outputs["translations"][2, 0].numpy() for outputs in (together, default))
    assert len(longer) > 2 * len(shorter)


def test_a_biased_greedy_output_scores_as_forced_decoding_gives_it(model, bible_tokenizer,
                                                                     bible_slice):
    # One search, the options per row: two end early (+0.5), two at their limit.
    graph = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=2).graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[:4]))
    ids, scores = graph.search(1, source_ids, num_pieces, model.head.inference_cache(),
                               {"eos_bias": tf.constant([-3.0, 0.5, -3.0, 0.5]),
                                "block_repeats": tf.constant([False, True, True, False])})
    rows = ids.numpy()[:, 0].tolist()
    ended = [EOS_ID in row for row in rows]
    outputs = [row[:row.index(EOS_ID)] if done else [i for i in row if i != PAD_ID]
               for row, done in zip(rows, ended)]
    assert ended == [False, True, False, True]
    assert [has_repeat(row) for row in outputs] == [True, False, False, True]
    forced = Scorer(model, bible_tokenizer, bible_tokenizer).score_ids(
        [row[:n].tolist() for row, n in zip(source_ids.numpy(), num_pieces.numpy())],
        outputs, per_token=True)
    # An output cut at its limit has no EOS: forced decoding's EOS score is not in it.
    forced = [sum(r["token_log_probs"][:None if done else -1]) for r, done in zip(forced, ended)]
    np.testing.assert_allclose(scores.numpy()[:, 0], forced, atol=2e-3, rtol=1e-4)


def test_without_constraints_the_step_function_is_not_wrapped(model, bible_tokenizer,
                                                                bible_slice, monkeypatch):
    # Greedy speed is a tracked benchmark: off as Python values (the Translator's
    # defaults), the constraints cost nothing.
    from tf_outheads.decoding import graph as graph_module

    wrapped = []
    monkeypatch.setattr(graph_module, "with_constraints",
                        lambda *args, **kwargs: wrapped.append(kwargs) or with_constraints(
                            *args, **kwargs))
    graph = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=2).graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[:1]))
    cache = model.head.inference_cache()
    graph.search(1, source_ids, num_pieces, cache)
    assert not wrapped
    graph.search(1, source_ids, num_pieces, cache, {"block_repeats": True})
    assert len(wrapped) == 1


@pytest.mark.parametrize("scoring, biases", [("posterior", (-10.0, 0.0, 5.0, 100.0)),
                                             ("cosine", (-1.0, 0.0, 0.3, 2.0))])
def test_a_negative_bias_never_shortens_a_continuous_head_s_outputs(bible_tokenizer,
                                                                    bible_slice, scoring,
                                                                    biases):
    # Nearest-neighbour decoding of a vMF head: greedy outputs only grow as the bias
    # falls (a lower bias can only keep EOS from being chosen). Units: nats for the
    # posterior, a cosine for scoring="cosine".
    keras.utils.set_random_seed(5)
    vmf = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                      embedding_dim=16, hidden_dim=16, num_layers=1, uniform_init=0.5,
                      head={"class_name": "continuous",
                            "config": {"output_dim": 8, "scoring": scoring}})
    vectors = np.random.default_rng(0).normal(size=(bible_tokenizer.vocab_size, 8))
    vmf.head.set_target_vectors(vectors.astype("float32"))
    graph = Translator(vmf, bible_tokenizer, bible_tokenizer, max_length_offset=2).graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[:6]))
    cache = vmf.head.inference_cache()
    lengths = [np.sum(graph.search(1, source_ids, num_pieces, cache,
                                   {"eos_bias": bias})[0].numpy() != PAD_ID, axis=-1)[:, 0]
               for bias in biases]
    for longer, shorter in zip(lengths, lengths[1:]):
        assert np.all(longer >= shorter), lengths
    assert np.all(lengths[-1] == 1) and np.all(lengths[0] > 1)  # the bias does act
