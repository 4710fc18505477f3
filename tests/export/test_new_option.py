"""Adding a decoding option: a `DecodeOptions` field, the code that uses it, one CLI flag.

The test adds a toy option, `max_output_pieces` (a cap on every output's length, 0: none),
the way a real one is added: a field (here on a subclass, put in `DecodeOptions`' place
for the test), the code that reads it (here `TranslationGraph.output_limits`, patched),
and one command-line flag. Nothing else is edited, and the option reaches the command
line's options, `Translator` (per translator and per call) and a reloaded SavedModel
(an input of its `translate` signature, with a recorded default, checked per request).
"""

import dataclasses

import pytest
import tensorflow as tf

from tests.export.options import NOT_SET, signature_options
from tf_outheads.decoding import options as options_module
from tf_outheads.decoding.graph import TranslationGraph
from tf_outheads.decoding.options import DecodeOptions, RequestInput, option
from tf_outheads.decoding.translator import Translator
from tf_outheads.export import export_translator
from tf_outheads.validation import int_at_least


@dataclasses.dataclass(frozen=True, kw_only=True)
class CappedOptions(DecodeOptions):
    """`DecodeOptions` and the toy option: its default, check and request input."""

    max_output_pieces: int = option(
        0, lambda name, value: int_at_least(name, value, 0, "an int >= 0 (0: no cap)"),
        RequestInput(tf.int32, valid=lambda values: values >= -1,
                     requirement=">= 0 (0: no cap), or -1 (not set)"))


def capped_limits(self, num_pieces, options=None):
    """The code that uses the option: each output limit cut to `max_output_pieces`."""
    limits = original_limits(self, num_pieces, options)
    cap = self.values(options)["max_output_pieces"]  # a Python int, or one per row
    return tf.where(tf.greater(cap, 0), tf.minimum(limits, cap), limits)


original_limits = TranslationGraph.output_limits


@pytest.fixture
def capped(monkeypatch):
    """The toy option in place: as if `DecodeOptions` had the field and the graph read it."""
    monkeypatch.setattr(options_module, "DecodeOptions", CappedOptions)
    monkeypatch.setattr(TranslationGraph, "output_limits", capped_limits)


def pieces(alignments):
    """Target pieces of each hypothesis: one `"i-j"` pair per piece (EOS not counted)."""
    return [len(alignment.split()) for alignment in alignments]


@pytest.mark.slow  # a CLI run and a SavedModel export (~14 s)
def test_a_new_option_reaches_the_cli_the_translator_and_a_reloaded_saved_model(
        capped, tiny_models, tokenizer, spanish_test_verses, tmp_path):
    from tf_outheads_zoo import cli, commands

    model, sources = tiny_models["tied"], spanish_test_verses[:3]
    # The command line: one flag, named after the option, over the run's settings.
    parser = cli.build_parser()
    subcommands = parser._subparsers._group_actions[0].choices  # argparse's own
    for command in ("translate", "export"):
        subcommands[command].add_argument("--max-output-pieces", type=int)
    args = parser.parse_args(["translate", "--run-dir", "run", "--input", "in.txt",
                              "--max-output-pieces", "2"])
    settings = commands._decode_settings({"max_length_offset": 10, "beam_size": 1}, args)
    assert settings == {"max_length_offset": 10, "beam_size": 1, "max_output_pieces": 2}
    options = options_module.decode_options(**settings)
    assert isinstance(options, CappedOptions) and options.max_output_pieces == 2
    with pytest.raises(ValueError, match=r"`max_output_pieces` must be an int >= 0 \(0: no "
                                         r"cap\)\. Received: max_output_pieces=-3"):
        dataclasses.replace(options, max_output_pieces=-3)  # checked with the others

    # The Translator: by name (as every option), and per call.
    plain = Translator(model, tokenizer, tokenizer, with_alignments=True).translate(sources)
    assert max(pieces(alignment for _, alignment in plain)) > 2
    translator = Translator(model, tokenizer, tokenizer, options=options, with_alignments=True)
    outputs = translator.translate(sources)
    assert max(pieces(alignment for _, alignment in outputs)) == 2
    assert [text for text, _ in translator.translate(sources, max_output_pieces=0)] == [
        text for text, _ in plain]

    # The SavedModel: an input of the `translate` signature, its default the export's
    # option; reloaded without the patches (the cap is in the graph).
    path = export_translator(model, tokenizer, tokenizer, str(tmp_path / "1"),
                             options=options, beam_sizes=(1,))
    loaded = tf.saved_model.load(path)
    assert "max_output_pieces" in loaded.signatures["translate"].structured_input_signature[1]
    inputs = signature_options(with_alignments=1)
    inputs["max_output_pieces"] = tf.constant([-1])  # not set: the export's 2
    outputs = loaded.signatures["translate"](sources=tf.constant(sources), **inputs)
    assert max(pieces(row[0].decode() for row in outputs["alignments"].numpy())) == 2
    inputs["max_output_pieces"] = tf.constant([1, 0, 1])  # per source
    outputs = loaded.signatures["translate"](sources=tf.constant(sources), **inputs)
    counts = pieces(row[0].decode() for row in outputs["alignments"].numpy())
    assert counts == [1, pieces(alignment for _, alignment in plain)[1], 1]
    inputs["max_output_pieces"] = tf.constant([-2])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"`max_output_pieces` must be >= 0 \(0: no cap\), or -1 \(not "
                             r"set\)\. Received: max_output_pieces="):
        loaded.signatures["translate"](sources=tf.constant(sources), **inputs)
    assert "max_output_pieces" not in NOT_SET  # no list of this test's options was edited


def test_every_option_is_an_input_or_a_setting_of_the_export(tiny_models, tokenizer):
    from tf_outheads.export import TranslatorModule

    module = TranslatorModule(tiny_models["tied"], tokenizer, tokenizer, beam_sizes=(1,),
                              options=DecodeOptions(eos_bias=-1.0), max_length_offset=3)
    config = module.config()
    names = [name for name, _ in DecodeOptions.request_inputs()]
    assert [spec.name for spec in module.translate_inputs()] == [
        "sources", *names, "target_prefix"]
    assert config["signatures"]["translate"]["inputs"] == ["sources", *names, "target_prefix"]
    assert set(config["defaults"]) == set(names)
    assert config["defaults"]["eos_bias"] == -1.0 and config["max_length_offset"] == 3
    for name in DecodeOptions.exported_names():
        assert name in config["defaults"] or name in config, name
    assert "batch_size" not in config  # a request is one batch
