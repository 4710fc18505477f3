"""Alignments of translations: for each output piece, the source piece attended to most."""

import numpy as np
import pytest
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tf_outheads.decoding import Translator
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.transformer import TransformerSeq2Seq


def _models(vocabulary_size):
    tf.random.set_seed(4)
    return {
        "lstm": LSTMSeq2Seq(vocabulary_size, vocabulary_size, embedding_dim=16, hidden_dim=16,
                            num_layers=1, head="tied", uniform_init=0.5),
        "transformer": TransformerSeq2Seq(vocabulary_size, vocabulary_size, model_dim=16,
                                          ffn_dim=32, num_heads=2, encoder_layers=1,
                                          decoder_layers=2, head="tied"),
    }


@pytest.fixture(scope="module")
def models(bible_tokenizer):
    return _models(bible_tokenizer.vocab_size)


@pytest.mark.parametrize("name", ["lstm", pytest.param("transformer", marks=pytest.mark.slow)])
def test_each_output_piece_gets_its_most_attended_source_piece(models, bible_tokenizer,
                                                               bible_slice, name):
    model = models[name]
    translator = Translator(model, bible_tokenizer, bible_tokenizer, max_length_offset=3,
                            beam_size=2)
    graph = translator.graph
    source_ids, num_pieces, _ = graph.encode(tf.constant(bible_slice.sources[:4]))
    cache = model.head.inference_cache()
    # In a graph: an eager beam search would take many seconds.
    ids, _ = tf.function(lambda: graph.search(2, source_ids, num_pieces, cache,
                                              {"num_hypotheses": 2}), autograph=False)()
    _, texts = graph.texts(ids, source_ids, False, True)
    texts = texts.numpy()
    assert texts.shape == (4, 2)
    for row in range(4):
        for column in range(2):
            hypothesis = [i for i in ids[row, column].numpy().tolist() if i != PAD_ID]
            pieces = hypothesis[:hypothesis.index(EOS_ID)] if EOS_ID in hypothesis \
                else hypothesis
            target_in = tf.constant([[BOS_ID] + hypothesis[:-1] if hypothesis else [BOS_ID]])
            weights = model.source_alignments(source_ids[row:row + 1], target_in).numpy()[0]
            expected = [f"{int(np.argmax(weights[j, :num_pieces[row]]))}-{j}"
                        for j in range(len(pieces))]
            assert texts[row, column].decode().split() == expected
    assert graph.texts(ids, source_ids, False, False)[1].numpy().tolist() == [[b""] * 2] * 4


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_the_translator_returns_alignments_with_its_hypotheses(models, bible_tokenizer,
                                                                bible_slice):
    sources = bible_slice.sources[:3] + [""]
    translator = Translator(models["lstm"], bible_tokenizer, bible_tokenizer,
                            max_length_offset=3, beam_size=3)
    plain = translator.translate(sources, num_hypotheses=2, with_scores=True)
    aligned = translator.translate(sources, num_hypotheses=2, with_scores=True,
                                   with_alignments=True)
    for plain_row, row, source in zip(plain, aligned, sources):
        assert [item[:2] for item in row] == plain_row
        for text, _, alignment in row:
            pairs = [tuple(map(int, pair.split("-"))) for pair in alignment.split()]
            assert [j for _, j in pairs] == list(range(len(pairs)))
            pieces = len(bible_tokenizer.tokenize(tf.constant([source])).to_list()[0])
            assert all(0 <= i < pieces for i, _ in pairs)
            assert bool(pairs) == bool(text)
    single = translator.translate(sources[:1], with_alignments=True)
    assert single[0] == (aligned[0][0][0], aligned[0][0][2])  # (text, alignment)


def test_a_model_that_cannot_align_is_refused(models, bible_tokenizer):
    class WithoutAlignments:
        def __init__(self, model):
            self.head = model.head
            self.initial_decoding_state = model.initial_decoding_state
            self.make_step_fn = model.make_step_fn

    translator = Translator(WithoutAlignments(models["lstm"]), bible_tokenizer,
                            bible_tokenizer)
    with pytest.raises(ValueError, match=r"`with_alignments=True` needs a model with "
                                         r"`source_alignments"):
        translator.translate(["Y dijo Dios"], with_alignments=True)
