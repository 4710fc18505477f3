"""Subword regularisation (Kudo 2018): sampled segmentations of training sentences, drawn
with stateless per-example seeds; SentencePiece's own distribution; resumable batches."""

import collections

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from tf_outheads.data import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.data import SubwordSampling
from tf_outheads.data import SubwordTokenizer
from tf_outheads.data import batch_pairs
from tf_outheads.data import dataset_from_corpus
from tf_outheads.data import train_sentencepiece

SENTENCE = "And God said, Let there be light: and there was light."


@pytest.fixture(scope="module")
def unigram(bible_slice, tmp_path_factory):
    """A unigram model (1,000 pieces) of the slice's English and Spanish."""
    prefix = tmp_path_factory.mktemp("unigram") / "spm"
    train_sentencepiece(bible_slice.sources + bible_slice.targets, str(prefix), 1000,
                        model_type="unigram")
    return SubwordTokenizer(f"{prefix}.model")


def _draw(sample, text, seed, max_pieces=None):
    return tuple(sample(tf.constant(text), tf.constant([7, seed], tf.int64),
                        max_pieces).numpy())


def test_draws_spell_the_sentence_and_depend_only_on_the_seed(unigram, bible_slice):
    sample = SubwordSampling(nbest_size=16, alpha=0.1).sampler(unigram)
    for text in bible_slice.targets[:5] + [SENTENCE]:
        draws = [_draw(sample, text, seed) for seed in range(20)]
        assert len(set(draws)) > 3, text  # the draws differ from seed to seed
        for ids in draws:
            assert unigram.decode_to_text([list(ids)]) == [text]
        assert [_draw(sample, text, seed) for seed in range(20)] == draws  # stateless
    best = tuple(unigram.tokenize(SENTENCE).numpy())
    # A large alpha concentrates the draw on the best segmentation.
    sharp = SubwordSampling(nbest_size=16, alpha=50.0).sampler(unigram)
    assert {_draw(sharp, SENTENCE, seed) for seed in range(20)} == {best}


@pytest.mark.slow  # thousands of draws (~30 s); the seeded-draw tests stay fast
def test_draws_follow_sentencepieces_own_sampling(unigram):
    # SentencePiece's SampleEncode (nbest_size 4, alpha 0.5) draws from its own generator;
    # ours, seeded per example, must give the same distribution over the segmentations.
    processor = sentencepiece.SentencePieceProcessor(model_proto=unigram.model_proto)
    text, draws = "the light of the firmament", 3000
    theirs = collections.Counter(
        tuple(processor.encode(text, enable_sampling=True, nbest_size=4, alpha=0.5))
        for _ in range(draws))
    sample = SubwordSampling(nbest_size=4, alpha=0.5).sampler(unigram)
    ours = collections.Counter(_draw(sample, text, seed) for seed in range(draws))
    assert set(ours) == set(theirs) and len(ours) == 4
    for segmentation in theirs:
        # Binomial standard deviation of a share at 3,000 draws: at most 0.009.
        assert abs(ours[segmentation] - theirs[segmentation]) / draws < 0.04, (ours, theirs)


def test_a_length_limit_keeps_draws_short(unigram):
    sample = SubwordSampling(nbest_size=32, alpha=0.0).sampler(unigram)
    best = len(unigram.tokenize(SENTENCE).numpy())
    free = [len(_draw(sample, SENTENCE, seed)) for seed in range(30)]
    assert max(free) > best
    assert all(len(_draw(sample, SENTENCE, seed, best)) <= best for seed in range(30))
    # A limit below the best segmentation: the best one (the dataset's filter decides).
    assert _draw(sample, SENTENCE, 0, 3) == tuple(unigram.tokenize(SENTENCE).numpy())


@pytest.mark.parametrize("arguments, message", [
    (dict(nbest_size=-1, alpha=0.1), "cannot be seeded per example"),
    (dict(nbest_size=1, alpha=0.1), "0 and 1 give the best segmentation"),
    (dict(nbest_size=2.5, alpha=0.1), "nbest_size=2.5"),
    (dict(nbest_size=8, alpha=-1.0), "alpha=-1.0"),
    (dict(nbest_size=8, alpha=float("nan")), "alpha=nan"),
])
def test_bad_arguments_are_refused_by_name(arguments, message):
    with pytest.raises(ValueError, match=message):
        SubwordSampling(**arguments)


def test_config_round_trip_and_bad_keys():
    sampling = SubwordSampling.from_config({"nbest_size": 64, "alpha": 0.1})
    assert SubwordSampling.from_config(sampling.get_config()) == sampling
    assert SubwordSampling.from_config(None) is None
    with pytest.raises(ValueError, match="exactly the keys"):
        SubwordSampling.from_config({"nbest_size": 64})


def test_a_bpe_model_is_refused_naming_the_tokenizer(bible_tokenizer):
    with pytest.raises(ValueError, match="the target tokenizer is a bpe model"):
        SubwordSampling(8, 0.1).sampler(bible_tokenizer, "target tokenizer")


def _rows(batch):
    """`[(source ids, target ids)]` of a batch, padding, `<s>` and `</s>` removed."""
    features, target_out = batch
    rows = []
    for source, target_in, out in zip(features["source_ids"].numpy(),
                                      features["target_in"].numpy(), target_out.numpy()):
        assert target_in[0] == BOS_ID
        assert list(target_in[1:][target_in[1:] != PAD_ID]) == list(out[out != PAD_ID][:-1])
        assert source[source != PAD_ID][-1] == EOS_ID and out[out != PAD_ID][-1] == EOS_ID
        rows.append((tuple(source[source != PAD_ID][:-1]), tuple(out[out != PAD_ID][:-1])))
    return rows


def test_training_batches_draw_new_pieces_every_pass(bible_slice, unigram):
    corpus = bible_slice.select(range(40))
    dataset = dataset_from_corpus(corpus, unigram, unigram, batch_tokens=512, seed=5,
                                  repeat=True, shuffle=False, bucket_width=16,
                                  subword_sampling={"nbest_size": 16, "alpha": 0.1})
    seen = collections.defaultdict(list)  # target text -> its segmentations, pass by pass
    iterator = iter(dataset)
    for _ in range(60):
        for source, target in _rows(next(iterator)):
            text = unigram.decode_to_text([list(target)])[0]
            assert text in corpus.targets
            seen[text].append(target)
    assert len(seen) == 40 and min(len(v) for v in seen.values()) >= 3
    changed = sum(len(set(segmentations)) > 1 for segmentations in seen.values())
    assert changed > 30, changed
    # Every draw fits the longest best-segmented example.
    best = max(len(unigram.tokenize(text).numpy()) for text in corpus.sources + corpus.targets)
    assert max(len(s) for v in seen.values() for s in v) <= best


@pytest.mark.parametrize("streamed", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_resumed_iterator_draws_what_an_uninterrupted_one_draws(bible_slice, unigram,
                                                                  tmp_path, streamed):
    corpus = bible_slice.select(range(300))
    options = dict(batch_tokens=512, seed=3, repeat=True,
                   subword_sampling={"nbest_size": 8, "alpha": 0.2})

    def dataset():
        if streamed:
            pairs = tf.data.Dataset.from_tensor_slices((corpus.sources, corpus.targets))
            return batch_pairs(pairs, unigram, unigram, shuffle_buffer=1000, **options)
        return dataset_from_corpus(corpus, unigram, unigram, **options)

    iterator = iter(dataset())
    for _ in range(25):  # past one pass of the 300 pairs
        next(iterator)
    prefix = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "iterator"))
    expected = [_rows(next(iterator)) for _ in range(15)]
    resumed = iter(dataset())
    tf.train.Checkpoint(iterator=resumed).read(prefix).assert_consumed()
    assert [_rows(next(resumed)) for _ in range(15)] == expected
    # The draws are seeded by the stream position: another seed, other pieces.
    other = iter(dataset_from_corpus(corpus, unigram, unigram,
                                     **dict(options, seed=4)))
    assert [_rows(next(other)) for _ in range(15)] != expected


def test_without_sampling_the_batches_hold_the_best_segmentation(bible_slice, unigram):
    corpus = bible_slice.select(range(40))
    dataset = dataset_from_corpus(corpus, unigram, unigram, batch_tokens=512, shuffle=False)
    best = {tuple(unigram.tokenize(t).numpy()) for t in corpus.targets}
    rows = [row for batch in dataset for row in _rows(batch)]
    assert {target for _, target in rows} == best
    assert np.all([len(r) for r in rows])


@pytest.mark.slow  # three short trainings: ~20 s
def test_a_preempted_training_resumes_on_the_batches_it_would_have_seen(bible_slice, unigram,
                                                                       tmp_path):
    # Training on sampled segmentations, stopped by SIGTERM after step 5 (its backup holds
    # the data position) and resumed: the same losses and weights as a run never stopped.
    import keras

    from tests.training.test_trainer import _SignalAt
    from tf_outheads import compile_for_translation, training
    from tf_outheads_zoo.lstm import LSTMSeq2Seq

    corpus = bible_slice.select(range(200))

    def run(backup_dir, callbacks=()):
        keras.utils.set_random_seed(3)
        model = LSTMSeq2Seq(unigram.vocab_size, unigram.vocab_size, embedding_dim=8,
                            hidden_dim=8, num_layers=1, dropout=0.0, head="tied")
        compile_for_translation(model, learning_rate=1e-2)
        dataset = dataset_from_corpus(corpus, unigram, unigram, batch_tokens=256, seed=3,
                                      repeat=True, subword_sampling=SubwordSampling(8, 0.2))
        history = training.fit(model, dataset, epochs=3, steps_per_epoch=3, verbose=0,
                               backup_dir=backup_dir, backup_every_n_steps=4,
                               callbacks=list(callbacks))
        return model, history

    with pytest.raises(training.TrainingPreempted):
        run(tmp_path / "stopped", [_SignalAt(5)])
    resumed, history = run(tmp_path / "stopped")
    reference, expected = run(tmp_path / "reference")
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"][1:],
                               rtol=1e-5)
    for a, b in zip(resumed.trainable_variables, reference.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
