"""`DecodeOptions`: every decoding option in one checked, frozen value, and each of them
reaches every host from its field alone (tests/export/test_new_option.py adds one)."""

import dataclasses
import math

import pytest

from tf_outheads.decoding.options import DecodeOptions, decode_options
from tf_outheads.decoding.translator import Translator
from tf_outheads_zoo.lstm import LSTMSeq2Seq


@pytest.fixture(scope="module")
def model(bible_tokenizer):
    return LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                       embedding_dim=16, hidden_dim=16, num_layers=1, head="tied")


def test_options_are_checked_once_frozen_and_changed_by_replace():
    options = DecodeOptions(beam_size=4, length_penalty=1, num_hypotheses=2)
    assert options.length_penalty == 1.0 and isinstance(options.length_penalty, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.beam_size = 2
    assert dataclasses.replace(options, num_hypotheses=4).num_hypotheses == 4
    # A change is checked with the other options (the beam keeps 4 hypotheses).
    with pytest.raises(ValueError, match=r"`num_hypotheses` must be at most `beam_size` \(4\)"):
        dataclasses.replace(options, num_hypotheses=5)
    assert DecodeOptions(sampling_topp=0.9).sampling == {"topk": 0, "topp": 0.9,
                                                          "temperature": 1.0}
    assert DecodeOptions().sampling is None
    # Equal options, one search: `batch_size` and `seed` never change a trace.
    assert (dataclasses.replace(options, seed=3, batch_size=8).trace_key()
            == options.trace_key() != dataclasses.replace(options, eos_bias=-1.0).trace_key())


@pytest.mark.parametrize("changes, message", [
    ({"with_alignments": True, "beam_size": 0}, r"`beam_size` must be an int >= 1\. "
                                                r"Received: beam_size=0"),
    ({"max_length_offset": 1.5}, r"`max_length_offset` must be an int >= 0\. Received: "
                                 r"max_length_offset=1\.5"),
    ({"quantize": "int4"}, r"`quantize` must be one of \(None, 'int8'\)\. Received: "
                           r"quantize='int4'"),
    ({"seed": 1 << 63}, r"`seed` must be below 2\*\*63"),
    ({"sampling_temperature": math.inf}, r"`sampling_temperature` must be a finite number > 0"),
    # Every on/off option is a bool: "False" would read as on.
    ({"replace_unk": "False"}, r"`replace_unk` must be a bool \(True or False\)"),
    ({"with_alignments": 1}, r"`with_alignments` must be a bool"),
])
def test_a_bad_option_is_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        DecodeOptions(**changes)


def test_options_by_name_fold_into_the_dataclass():
    base = DecodeOptions(beam_size=4)
    assert decode_options() == DecodeOptions()
    assert decode_options(base) is base
    assert decode_options(base, length_penalty=0.6) == DecodeOptions(beam_size=4,
                                                                     length_penalty=0.6)
    with pytest.raises(TypeError, match=r"`beam` is not a decoding option \(a field of "
                                        r"DecodeOptions: .*beam_size.*\)\. Received: beam=4"):
        decode_options(base, beam=4)
    with pytest.raises(TypeError, match=r"`options` must be a DecodeOptions\. Received: "
                                        r"options of type dict"):
        decode_options({"beam_size": 4})


def test_a_translator_takes_options_whole_or_by_name(model, bible_tokenizer, bible_slice):
    options = DecodeOptions(beam_size=2, max_length_offset=2)
    translator = Translator(model, bible_tokenizer, bible_tokenizer, options=options)
    by_name = Translator(model, bible_tokenizer, bible_tokenizer, beam_size=2,
                         max_length_offset=2)
    assert translator.options == by_name.options == options
    sources = bible_slice.sources[:3]
    assert translator.translate(sources) == by_name.translate(sources)
    # Per call: a whole `DecodeOptions`, or changes of the translator's.
    assert (translator.translate(sources, options=dataclasses.replace(options, beam_size=1))
            == translator.translate(sources, beam_size=1)
            == Translator(model, bible_tokenizer, bible_tokenizer,
                          max_length_offset=2).translate(sources))
    assert translator.translate(sources, batch_size=1) == translator.translate(sources)
    assert len(translator._decoders) == 2  # the beam's search, and the greedy one
    with pytest.raises(ValueError, match=r"`quantize` is chosen when the Translator is built"):
        translator.translate(sources, quantize="int8")


def test_every_option_has_a_command_line_flag():
    """`tf-outheads translate` and `export` have one flag per option, named after it
    (`commands._decode_settings` maps them by name); `--n-best` is translate's n-best."""
    from tf_outheads_zoo import cli

    subcommands = cli.build_parser()._subparsers._group_actions[0].choices
    destinations = {command: {action.dest for action in subcommands[command]._actions}
                    for command in ("translate", "export")}
    for field in dataclasses.fields(DecodeOptions):
        name = "n_best" if field.name == "num_hypotheses" else field.name
        assert name in destinations["translate"], field.name
        if field.metadata["exported"]:
            assert field.name in destinations["export"], field.name


def test_a_run_s_decode_settings_are_decoding_options():
    """Every `decode` setting of a run (`DecodeConfig`) is the option of that name."""
    from tf_outheads_zoo.presets import PRESETS, get_preset

    names = {field.name for field in dataclasses.fields(DecodeOptions)}
    for preset in PRESETS:
        settings = get_preset(preset)["decode"]
        assert set(settings) <= names, preset
        DecodeOptions(**settings)
