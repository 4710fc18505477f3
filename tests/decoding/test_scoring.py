"""Scorer: forced decoding of given translations (the log-probability a model gives them)."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import Scorer
from tf_outheads_zoo.lstm import LSTMSeq2Seq


@pytest.fixture(scope="module")
def model(bible_tokenizer):
    tf.random.set_seed(7)
    return LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                       embedding_dim=16, hidden_dim=16, num_layers=1,
                       head={"class_name": "joint", "config": {"joint_dim": 12}})


def _by_hand(model, tokenizer, source, target):
    """The log-probability of `target` from the model's training-time logits."""
    source_ids = tokenizer.tokenize(tf.constant([source])).to_tensor().numpy()[0].tolist()
    target_ids = tokenizer.tokenize(tf.constant([target])).to_tensor().numpy()[0].tolist()
    logits = model({"source_ids": tf.constant([source_ids + [EOS_ID]]),
                    "target_in": tf.constant([[BOS_ID] + target_ids])})
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1).numpy()[0]
    gold = target_ids + [EOS_ID]
    return [float(log_probs[t, i]) for t, i in enumerate(gold)]


def test_a_score_is_the_log_probability_of_each_piece_and_eos(model, bible_tokenizer,
                                                               bible_slice):
    sources, targets = bible_slice.sources[:3], bible_slice.targets[:3]
    results = Scorer(model, bible_tokenizer, bible_tokenizer).score(sources, targets,
                                                                    per_token=True)
    for source, target, result in zip(sources, targets, results):
        expected = _by_hand(model, bible_tokenizer, source, target)
        np.testing.assert_allclose(result["token_log_probs"], expected, rtol=1e-4, atol=1e-4)
        assert result["tokens"] == len(expected) and result["pieces"][-1] == "</s>"
        assert result["log_prob"] == pytest.approx(sum(expected), abs=1e-3)
        assert result["mean_log_prob"] == pytest.approx(result["log_prob"] / len(expected))
        assert result["log_prob"] < 0
    # The pieces scored are the reference's.
    assert "".join(results[0]["pieces"][:-1]).replace("▁", " ").strip() == targets[0]


def test_scores_do_not_depend_on_the_batch_or_the_order(model, bible_tokenizer, bible_slice):
    sources, targets = bible_slice.sources[:9], bible_slice.targets[:9]
    together = Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=4).score(
        sources, targets)
    alone = Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=1).score(sources,
                                                                                targets)
    for a, b in zip(together, alone):
        assert a["tokens"] == b["tokens"]
        assert a["log_prob"] == pytest.approx(b["log_prob"], abs=1e-4)
    reversed_ = Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=4).score(
        sources[::-1], targets[::-1])
    assert [r["log_prob"] for r in reversed_[::-1]] == pytest.approx(
        [r["log_prob"] for r in together], abs=1e-4)


@pytest.mark.slow  # 60 training steps
def test_the_training_pairs_score_higher_than_unseen_ones_after_training(
        bible_tokenizer, bible_slice):
    """Scores that can fail: a model trained on a few verses gives them more probability
    per token than the untrained model did, and than it gives verses it never saw."""
    from tf_outheads.data.pipeline import make_training_dataset
    from tf_outheads.training import compile_for_translation

    def per_token(results):
        return sum(r["log_prob"] for r in results) / sum(r["tokens"] for r in results)

    tf.random.set_seed(1)
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=32, hidden_dim=32, num_layers=1, head="tied")
    pairs, unseen = bible_slice.select(range(32)), bible_slice.select(range(500, 532))
    scorer = Scorer(model, bible_tokenizer, bible_tokenizer)
    before = per_token(scorer.score(pairs.sources, pairs.targets))
    dataset = make_training_dataset(pairs.sources, pairs.targets, bible_tokenizer,
                                    bible_tokenizer, batch_tokens=8192, shuffle=False,
                                    repeat=True)
    compile_for_translation(model, learning_rate=1e-2)
    model.fit(dataset, steps_per_epoch=60, epochs=1, verbose=0)
    seen = per_token(scorer.score(pairs.sources, pairs.targets))
    assert seen > before + 1.0
    assert seen > per_token(scorer.score(unseen.sources, unseen.targets)) + 0.5

    # The search's own score of its output (greedy, and the beam's best at α = 0) is
    # the forced-decoding score of the same pieces.
    from tf_outheads.decoding import Translator

    graph = Translator(model, bible_tokenizer, bible_tokenizer).graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(pairs.sources))
    for width in (1, 3):
        ids, search_scores = graph.search(width, source_ids, num_pieces,
                                          model.head.inference_cache())
        sources, outputs, ended = [], [], []
        for row, hypothesis in enumerate(ids.numpy()[:, 0].tolist()):
            sources.append(source_ids[row, :num_pieces[row]].numpy().tolist())
            ended.append(EOS_ID in hypothesis)
            while hypothesis and hypothesis[-1] == PAD_ID:
                hypothesis.pop()
            outputs.append(hypothesis[:hypothesis.index(EOS_ID)] if ended[-1] else hypothesis)
        forced = scorer.score_ids(sources, outputs, per_token=True)
        # An output cut by the length limit has no EOS: the search did not score one.
        forced = [sum(r["token_log_probs"][:None if done else -1])
                  for r, done in zip(forced, ended)]
        np.testing.assert_allclose(forced, search_scores.numpy()[:, 0], atol=2e-3, rtol=1e-4)


def test_a_continuous_head_scores_by_its_posterior_or_says_it_does_not(bible_tokenizer,
                                                                        bible_slice):
    vectors = np.random.default_rng(0).normal(size=(bible_tokenizer.vocab_size, 8))
    for scoring, normalised in (("posterior", True), ("cosine", False)):
        model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                            embedding_dim=16, hidden_dim=16, num_layers=1,
                            head={"class_name": "continuous",
                                  "config": {"output_dim": 8, "scoring": scoring}})
        model.head.set_target_vectors(vectors)
        scorer = Scorer(model, bible_tokenizer, bible_tokenizer)
        assert scorer.log_probabilities is normalised
        results = scorer.score(bible_slice.sources[:2], bible_slice.targets[:2],
                               per_token=True)
        values = np.concatenate([r["token_log_probs"] for r in results])
        if normalised:
            assert np.all(values <= 0)
        else:
            assert np.all(np.abs(values) <= 1 + 1e-5)  # cosines


def test_long_pairs_are_cut_and_counted(model, bible_tokenizer, bible_slice, caplog):
    scorer = Scorer(model, bible_tokenizer, bible_tokenizer, max_target_length=5)
    with caplog.at_level(logging.WARNING):
        results = scorer.score(bible_slice.sources[:2], ["a", bible_slice.targets[1]])
    assert scorer.truncated_indices == [1]
    assert results[1]["tokens"] == 5 and "1 of 2 pairs" in caplog.text


@pytest.mark.parametrize("call, message", [
    (lambda s: s.score(["a", "b"], ["a"]), "2 sources and 1 targets"),
    (lambda s: s.score(["a"], [3]), "`targets` must hold strings"),
])
def test_bad_input_is_refused(model, bible_tokenizer, call, message):
    with pytest.raises(ValueError, match=message):
        call(Scorer(model, bible_tokenizer, bible_tokenizer))
    with pytest.raises(ValueError, match="batch_size"):
        Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=0)


def test_piece_ids_score_as_their_strings_do(model, bible_tokenizer, bible_slice):
    sources, targets = bible_slice.sources[:4], bible_slice.targets[:4]
    scorer = Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=3)
    by_text = scorer.score(sources, targets, per_token=True)
    pieces = [bible_tokenizer.tokenize(tf.constant(texts)).to_list()
              for texts in (sources, targets)]
    by_ids = scorer.score_ids(*pieces, per_token=True)
    for a, b in zip(by_text, by_ids):
        assert a["pieces"] == b["pieces"]
        np.testing.assert_allclose(a["token_log_probs"], b["token_log_probs"], atol=1e-5)
    with pytest.raises(ValueError, match="2 and 1 rows"):
        scorer.score_ids([[5], [6]], [[7]])


@pytest.mark.parametrize("head", ["tied", {"class_name": "joint", "config": {"joint_dim": 12}}])
def test_a_transformer_scores_as_its_training_logits_say(bible_tokenizer, bible_slice, head):
    from tf_outheads_zoo.model_config import TransformerConfig
    from tf_outheads_zoo.transformer import TransformerSeq2Seq

    tf.random.set_seed(3)
    model = TransformerSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                               **dict(TransformerConfig.small, head=head))
    sources, targets = bible_slice.sources[:3], bible_slice.targets[:3]
    together = Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=3).score(
        sources, targets, per_token=True)
    alone = Scorer(model, bible_tokenizer, bible_tokenizer, batch_size=1).score(
        sources, targets)
    for source, target, result, single in zip(sources, targets, together, alone):
        expected = _by_hand(model, bible_tokenizer, source, target)
        np.testing.assert_allclose(result["token_log_probs"], expected, rtol=1e-4, atol=1e-4)
        assert single["log_prob"] == pytest.approx(result["log_prob"], abs=1e-3)


def test_invalid_utf8_is_read_as_the_search_reads_it(model, bible_tokenizer):
    scorer = Scorer(model, bible_tokenizer, bible_tokenizer)
    raw = scorer.score([b"Y dijo Dios \xff luz"], [b"And God said \xfe light"])
    replaced = scorer.score(["Y dijo Dios \ufffd luz"], ["And God said \ufffd light"])
    assert raw == replaced
