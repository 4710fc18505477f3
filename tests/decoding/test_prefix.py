"""Target prefixes: the search continues after given pieces (greedy, beam, sampling)."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.decoding import Scorer, Translator, beam_search, greedy_search
from tf_outheads.decoding.prefix import with_target_prefix
from tf_outheads_zoo.lstm import LSTMSeq2Seq

VOCAB = 8


def toy_step_fn(ids_t, state):
    """Prefers piece 4 after BOS, then the next piece, and EOS (3) after piece 7."""
    following = tf.where(ids_t < 4, 4, ids_t + 1)
    following = tf.where(ids_t == 7, EOS_ID, following)
    logits = tf.one_hot(following, VOCAB, on_value=2.0, off_value=0.0)
    return tf.nn.log_softmax(logits), state


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_the_search_continues_after_each_row_s_prefix(search):
    state = {"unused": tf.zeros([3, 1])}
    prefix = tf.constant([[6, 7, 0], [0, 0, 0], [5, 5, 6]])
    lengths = tf.constant([2, 0, 3])
    step_fn, wrapped = with_target_prefix(toy_step_fn, state, prefix, lengths)
    if search == "greedy":
        result = greedy_search(step_fn, wrapped, 3, 8)
        ids, scores = result.ids.numpy(), result.scores.numpy()
    else:
        result = beam_search(step_fn, wrapped, 3, 3, 8)
        ids, scores = result.ids.numpy()[:, 0], result.scores.numpy()[:, 0]
    assert ids[0].tolist()[:3] == [6, 7, EOS_ID]  # the prefix, then EOS (after 7)
    assert ids[1].tolist()[:5] == [4, 5, 6, 7, EOS_ID]  # no prefix: as without one
    assert ids[2].tolist()[:5] == [5, 5, 6, 7, EOS_ID]
    # The score counts the forced pieces' log-probabilities: 6 after BOS is not the
    # preferred piece (4); 7 after 6 and EOS after 7 are.
    log_p = tf.nn.log_softmax(tf.constant([2.0] + [0.0] * (VOCAB - 1))).numpy()
    assert scores[0] == pytest.approx(log_p[1] + log_p[0] + log_p[0], abs=1e-5)


@pytest.fixture(scope="module")
def model(bible_tokenizer):
    tf.random.set_seed(3)
    return LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                       embedding_dim=16, hidden_dim=16, num_layers=1, head="tied",
                       uniform_init=0.5)


def test_the_greedy_output_s_own_start_gives_the_greedy_output(model, bible_tokenizer,
                                                                 bible_slice):
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=4)
    graph, cache = translator.graph, model.head.inference_cache()
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[:5]))
    search = tf.function(lambda prefix: graph.search(1, source_ids, num_pieces, cache,
                                                     prefix=prefix), autograph=False)
    ids, scores = search(None)
    for start in (1, 3):
        prefix = (ids[:, 0, :start], tf.fill([5], start))
        continued, continued_scores = search(prefix)
        np.testing.assert_array_equal(continued, ids)
        np.testing.assert_allclose(continued_scores, scores, atol=1e-4)


@pytest.mark.parametrize("options", [
    {}, pytest.param({"beam_size": 3}, marks=pytest.mark.slow),  # beam traces cost ~25 s
    {"sampling_topk": 0, "seed": 4}])
def test_an_output_starts_with_its_prefix_and_scores_as_forced_decoding(
        model, bible_tokenizer, bible_slice, options):
    sources = bible_slice.sources[:4]
    prefixes = ["And God", "", "In the beginning", "Then"]
    translator = Translator(model, bible_tokenizer, bible_tokenizer, batch_size=3,
                            max_length_offset=4, **options)
    outputs = translator.translate(sources, with_scores=True, target_prefix=prefixes)
    plain = translator.translate(sources, with_scores=True)
    assert outputs[1][0] == plain[1][0]  # no prefix: as without one (the same seed)
    for prefix, (text, _) in zip(prefixes, outputs):
        assert text.startswith(prefix)

    # The search's score of an output is the forced-decoding score of its pieces (the
    # prefix's included), on the pieces themselves (no detokenizing round trip).
    graph = translator.graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(sources))
    prefix = graph.encode_prefix(tf.constant(prefixes))
    sampling = None
    if graph.sampling is not None:
        from tf_outheads.decoding.sampling import Sampling, row_seeds
        sampling = Sampling(seeds=row_seeds(4, tf.range(4)), **graph.sampling)
    search = tf.function(lambda: graph.search(  # eager beam steps would take a minute
        translator.options.beam_size, source_ids, num_pieces, model.head.inference_cache(),
        sampling=sampling, prefix=prefix), autograph=False)
    ids, scores = search()
    hypotheses, ended = [], []
    for row in ids.numpy()[:, 0].tolist():
        ended.append(EOS_ID in row)
        hypotheses.append(row[:row.index(EOS_ID)] if ended[-1] else
                          [i for i in row if i != 0])
    for hypothesis, pieces, length in zip(hypotheses, prefix[0].numpy().tolist(),
                                          prefix[1].numpy().tolist()):
        assert hypothesis[:length] == pieces[:length]
    forced = Scorer(model, bible_tokenizer, bible_tokenizer).score_ids(
        [row[:n].tolist() for row, n in zip(source_ids.numpy(), num_pieces.numpy())],
        hypotheses, per_token=True)
    forced = [sum(r["token_log_probs"][:None if done else -1]) for r, done in zip(forced, ended)]
    np.testing.assert_allclose(forced, scores.numpy()[:, 0], atol=2e-3, rtol=1e-4)


def test_bad_prefixes_are_refused_naming_them(model, bible_tokenizer, bible_slice):
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_length_ratio=1.0,
                            max_length_offset=0)
    source = "Y dijo Dios"  # a few pieces: a limit of a few pieces
    with pytest.raises(ValueError, match=r"`target_prefix` 1 has \d+ target pieces, more than "
                                         r"its source's output limit of \d+"):
        translator.translate(["Sea la luz", source], target_prefix=["", bible_slice.targets[0]])
    with pytest.raises(ValueError, match=r"`target_prefix` must hold one prefix per source .*"
                                         r"Received: 1 prefixes for 2 sources"):
        translator.translate(["Sea la luz", source], target_prefix=["And"])
