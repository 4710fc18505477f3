"""Export options out of range are refused by name: at export time, and per request in the graph."""

import pytest
import tensorflow as tf

from tests.export.options import signature_options

from tf_outheads.export import TranslatorModule, export_translator


class WithoutAlignments:
    """A model that cannot align (no `source_alignments`): no `<unk>` replacement."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        if name == "source_alignments":
            raise AttributeError(name)
        return getattr(self._model, name)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"length_penalty": float("nan")}, "length_penalty=nan"),
        ({"length_penalty": float("inf")}, "length_penalty=inf"),
        ({"length_penalty": -0.1}, "length_penalty=-0.1"),
        ({"length_penalty": 10.5}, r"in \[0, 10\]. Received: length_penalty=10.5"),
        ({"max_length_ratio": float("nan")}, "max_length_ratio=nan"),
        ({"max_length_offset": -3}, "max_length_offset=-3"),
        ({"max_source_length": 1}, "max_source_length=1"),
        ({"num_hypotheses": 3, "beam_size": 2}, "num_hypotheses=3"),
        ({"max_request_sources": 0}, "max_request_sources=0"),
        ({"max_request_pieces": 2.5}, "max_request_pieces=2.5"),
        ({"eos_bias": float("nan")}, "eos_bias=nan"),
        ({"block_repeats": 1}, "block_repeats=1"),
    ],
    ids=["nan", "inf", "negative", "above_10", "ratio_nan", "offset", "source_length", "n_best",
         "request_sources", "request_pieces", "eos_bias", "block_repeats"],
)
def test_export_refuses_default_options_out_of_range(tiny_models, tokenizer, tmp_path, kwargs,
                                                     message):
    with pytest.raises(ValueError, match=message):
        export_translator(tiny_models["tied"], tokenizer, tokenizer, tmp_path / "1", **kwargs)
    assert not (tmp_path / "1").exists()


def call(module, sources, replace_unk):
    return module.translate(tf.constant(sources, tf.string),
                            **signature_options(replace_unk=replace_unk))


def test_replace_unk_is_refused_where_the_model_cannot_align(tiny_models, tokenizer):
    # It used to be ignored silently: the request got <unk> where it asked for words.
    module = TranslatorModule(WithoutAlignments(tiny_models["tied"]), tokenizer, tokenizer,
                              beam_sizes=(1,))
    assert module.config()["replace_unk_available"] is False
    for replace_unk in ([1], [0, 2]):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"`replace_unk` is not available in this export"):
            call(module, ["Y dijo Dios", "Sea la luz"], replace_unk)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"`with_alignments` is not available in this export"):
        module.translate(tf.constant(["Y dijo Dios"]), **signature_options(with_alignments=1))
    outputs = call(module, ["Y dijo Dios", ""], [0])
    assert outputs["translations"].shape == (2, 1)
    assert outputs["empty_source"].numpy().tolist() == [False, True]


def test_sampling_is_refused_where_the_head_has_no_distribution(bible_tokenizer, tokenizer):
    from tf_outheads_zoo.lstm import LSTMSeq2Seq

    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=16, hidden_dim=16, num_layers=1,
                        head={"class_name": "continuous",
                              "config": {"output_dim": 8, "scoring": "cosine"}})
    module = TranslatorModule(model, tokenizer, tokenizer, beam_sizes=(1,))
    assert module.config()["sampling_available"] is False
    sources = tf.constant(["Y dijo Dios", "Sea la luz"])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"Sampling needs a distribution over the vocabulary"):
        module.translate(sources, **signature_options(sampling_temperature=0.7))
    outputs = module.translate(sources, **signature_options(seed=3))  # a seed alone is fine
    assert outputs["translations"].shape == (2, 1)


@pytest.fixture(scope="module")
def biased_module(tiny_models, tokenizer):
    """The tied model's greedy translator with an EOS bias of +1 by default: it then ends
    every test verse at once (without a bias, at the output limit)."""
    return TranslatorModule(tiny_models["tied"], tokenizer, tokenizer, beam_sizes=(1,),
                            eos_bias=1.0)


def test_per_request_constraints_reach_the_search(biased_module, tiny_models, tokenizer,
                                                  spanish_test_verses):
    from tf_outheads.decoding import Translator

    config = biased_module.config()
    assert config["defaults"]["eos_bias"] == 1.0 and config["defaults"]["block_repeats"] is False
    assert config["signatures"]["translate"]["inputs"][-3:] == ["eos_bias", "block_repeats",
                                                                "target_prefix"]
    sources = spanish_test_verses[:3]
    default = biased_module.translate(tf.constant(sources), **signature_options())
    assert [row[0] for row in default["translations"].numpy().tolist()] == [b""] * 3
    # NaN: the export's default; -5 (a real bias, not "unset"): longer outputs, the
    # Translator's with that bias, scores included.
    outputs = biased_module.translate(tf.constant(sources), **signature_options(
        eos_bias=[float("nan"), -5.0, -5.0], block_repeats=[-1, 0, 1]))
    texts = [row[0].decode("utf-8") for row in outputs["translations"].numpy()]
    scores = outputs["scores"].numpy()[:, 0]
    assert texts[0] == "" and scores[0] == pytest.approx(default["scores"].numpy()[0, 0])
    for row, block in ((1, False), (2, True)):
        expected = Translator(tiny_models["tied"], tokenizer, tokenizer, eos_bias=-5.0,
                              block_repeats=block).translate([sources[row]], with_scores=True)
        assert len(texts[row]) > 20 and (texts[row], pytest.approx(scores[row], abs=1e-3)) \
            == expected[0]


@pytest.mark.parametrize("eos_bias", [float("inf"), float("-inf"), 100.5, -1e4])
def test_an_infinite_or_too_large_eos_bias_is_refused_by_name(biased_module, eos_bias):
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"`eos_bias` must be finite and in \[-100, 100\], or NaN for the "
                             r"export default. Received: eos_bias="):
        biased_module.translate(tf.constant(["Y dijo Dios", "Sea la luz"]),
                                **signature_options(eos_bias=[0.0, eos_bias]))
