"""A SavedModel of separate source and target vocabularies detokenizes with the target
model after `tf.saved_model.load`. Before the fix, the loader restored both SentencePiece
resources under one name (tensorflow-text's default scope), so that every separate-
vocabulary export (`lstm-cpu-32k`, the vMF presets) wrote its translations in the
source model's pieces: same ids and scores as the `Translator`, wrong text."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.export.options import signature_options
from tf_outheads.data import build_tokenizers
from tf_outheads.decoding import Translator
from tf_outheads.export import export_translator
from tf_outheads_zoo.lstm import LSTMSeq2Seq


@pytest.fixture(scope="module")
def tokenizers(bible_slice, tmp_path_factory):
    return build_tokenizers(bible_slice.sources, bible_slice.targets,
                            tmp_path_factory.mktemp("separate"), vocab_size=500, joint=False)


def test_two_tokenizers_keep_their_own_models_through_save_and_load(tokenizers, tmp_path):
    source_tokenizer, target_tokenizer = tokenizers

    class Both(tf.Module):
        def __init__(self):
            super().__init__()
            self.source = source_tokenizer
            self.target = target_tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
        def detokenize(self, ids):
            return self.source.detokenize(ids), self.target.detokenize(ids)

    ids = tf.constant([list(range(20, 40))])
    both = Both()
    expected = [t.numpy().tolist() for t in both.detokenize(ids)]
    assert expected[0] != expected[1]  # the two models spell these ids differently
    tf.saved_model.save(both, str(tmp_path / "both"))
    loaded = tf.saved_model.load(str(tmp_path / "both"))
    assert [t.numpy().tolist() for t in loaded.detokenize(ids)] == expected


def test_a_separate_vocabulary_export_translates_as_the_translator(tokenizers, bible_slice,
                                                                    tmp_path):
    source_tokenizer, target_tokenizer = tokenizers
    keras.utils.set_random_seed(7)
    model = LSTMSeq2Seq(source_tokenizer.vocab_size, target_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=1, dropout=0.0,
                        head="softmax", uniform_init=0.5)
    sources = bible_slice.sources[900:904]
    expected = Translator(model, source_tokenizer, target_tokenizer,
                          max_length_offset=4).translate(sources)
    wrong = Translator(model, source_tokenizer, source_tokenizer,
                       max_length_offset=4).translate(sources)
    assert expected != wrong  # the target model's text, not the source model's
    path = export_translator(model, source_tokenizer, target_tokenizer, str(tmp_path / "m"),
                             beam_sizes=(1,), max_length_offset=4)
    outputs = tf.saved_model.load(path).signatures["translate"](
        sources=tf.constant(sources), **signature_options())
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()[:, 0]] == expected
    np.testing.assert_array_equal(outputs["beam_size"].numpy(), 1)
