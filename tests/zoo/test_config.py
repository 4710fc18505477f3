"""The run configuration schema (`tf_outheads_zoo.config`): presets, overrides, run files and
stored presets (`tf_outheads_zoo.stored`)."""

import copy
import dataclasses
import inspect
import json
import pathlib

import pytest

from tf_outheads_zoo import config as config_module
from tf_outheads_zoo.config import DecodeConfig, RunConfig, section_fields
from tf_outheads_zoo.presets import EMBEDDED_CORPUS, PRESET_CONFIGS, PRESETS, derive, get_preset
from tf_outheads_zoo.schema import ConfigError
# Run files and stored presets are read by `tf_outheads_zoo.stored` (which reads the preset
# table; the schema in `tf_outheads_zoo.config` does not).
from tf_outheads_zoo.stored import load_run_config, read_stored_run, stored_settings_path

DATA = pathlib.Path(__file__).parent / "data"
ROOT = pathlib.Path(__file__).resolve().parents[2]
# Every preset as the code before the schema resolved it (`get_preset(name)` dumped to
# JSON, the embedded corpus's path written as "<EMBEDDED_CORPUS>").
BEFORE_SCHEMA = DATA / "presets_before_schema.json"
# Keys the schema added to presets that lacked them, with the value the code used
# without them: LSTM presets other than VIVO's now list LSTMSeq2Seq's
# `encoder_layers`, `decoder_layers` and `source_embedding_dim`, each `None`
# (num_layers / embedding_dim: the same model).
# Every preset also got the data keys of streamed corpora (issue 21): `data.train`,
# `dev`, `test` None (the corpus's splits, as before); `data.shuffle_buffer` 100,000
# and `data.tokenizer_sample` 500,000, which were the whole training split: the same
# batches and pieces for a corpus of up to 100,000 pairs (the embedded one has 27,952;
# tests/data/test_streaming.py checks the shuffle).
# And the trainer's step options (issue 22): `train.jit_compile` False and
# `train.steps_per_execution` 1, the graph step one call per step, as before.
# And the trainer's divergence checks (issue 36): `train.max_skipped_share` 0.05 and
# `train.max_loss` 1e6, which only stop a run that skips most batches or explodes;
# `data.shuffle_indices` True: the same batches, smaller backups.
# And the decoding constraints (issue 41): `decode.eos_bias` 0.0 and `decode.block_repeats`
# False, the search as before.
_ADDED_KEYS = {"data.train": None, "data.dev": None, "data.test": None,
              "data.shuffle_buffer": 100_000, "data.tokenizer_sample": 500_000,
              "train.jit_compile": False, "train.steps_per_execution": 1,
              "train.max_skipped_share": 0.05, "train.max_loss": 1e6,
              "data.shuffle_indices": True, "decode.eos_bias": 0.0,
              "decode.block_repeats": False, "data.subword_sampling": None,
              "train.init_from": None, "train.init_optimizer": False,
              "train.update_vocab": None, "model.selection": None, "train.selection": None}
# And neural vocabulary selection (issue 56): `model.selection` and `train.selection`
# None, no selection head, as before. Presets added since, each its parent with a change:
ADDED_PRESETS = {
    "lstm-cpu-nvs": ("lstm-cpu", {"model.selection": {"pooling": "logit_max"},
                                  "train.selection": {"weight": 1.0, "positive_weight": 10.0}}),
    "lstm-cpu-32k-nvs": ("lstm-cpu-32k", {"model.selection": {"pooling": "logit_max"},
                                          "train.selection": {"weight": 1.0,
                                                              "positive_weight": 10.0}}),
    "transformer-cpu-nvs": ("transformer-cpu", {
        "model.selection": {"pooling": "logit_max"},
        "train.selection": {"weight": 1.0, "positive_weight": 10.0}}),
    "transformer-cpu-32k": ("transformer-cpu", {"data.vocab_size": 32000,
                                                "data.joint_vocabulary": False,
                                                "model.head": "tied"}),
    "transformer-cpu-32k-nvs": ("transformer-cpu-32k", {
        "model.selection": {"pooling": "logit_max"},
        "train.selection": {"weight": 1.0, "positive_weight": 10.0}}),
}
# Settings changed on purpose since, by measurement: lstm-cpu-vmf's target table
# (issue 41, benchmarks/docs/vmf.md: centred, top 3 components removed, </s> = -e(".")).
CHANGED = {"lstm-cpu-vmf": {"data.target_vectors": {
    "dim": 300, "epochs": 5, "path": None, "center": True, "remove_components": 3,
    "eos": "negative_period"}}}
# Issue 53: the CPU-sized LSTMs scale their attention scores (the paper presets do not).
for _name in ("lstm-cpu", "lstm-cpu-32k", "lstm-cpu-32k-sampled5", "lstm-cpu-joint",
              "lstm-cpu-joint-1024", "lstm-cpu-joint-512", "lstm-cpu-rewe",
              "lstm-cpu-rewe-contrastive-a", "lstm-cpu-rewe-contrastive-b",
              "lstm-cpu-shared-private", "lstm-cpu-softmax", "lstm-cpu-tied", "lstm-cpu-vmf",
              "lstm-cpu-vmf-softmax", "lstm-tiny"):
    CHANGED.setdefault(_name, {})["model.scaled_attention"] = True
ADDED_WITH_OLD_DEFAULTS = {"lstm": {"model.encoder_layers": None, "model.decoder_layers": None,
                                    "model.source_embedding_dim": None,
                                    "model.scaled_attention": False, **_ADDED_KEYS},
                           "transformer": dict(_ADDED_KEYS)}


def _before_schema():
    with open(BEFORE_SCHEMA, encoding="utf-8") as f:
        presets = json.load(f)
    for preset in presets.values():
        preset["data"]["corpus"] = EMBEDDED_CORPUS
        # The one key that moved: train.model_type is model.model_type.
        preset["model"] = {"model_type": preset["train"].pop("model_type"), **preset["model"]}
    return presets


def _json(value):
    return json.loads(json.dumps(value))


# -- presets: the same settings as before the schema ------------------------------------------

@pytest.mark.parametrize("name", sorted(_before_schema()))
def test_every_preset_resolves_to_its_settings_before_the_schema(name):
    before = _before_schema()[name]
    for dotted, value in CHANGED.get(name, {}).items():
        section, _, key = dotted.partition(".")
        assert before[section].get(key) != value, f"{name}: {dotted} is no change"
        before[section][key] = value
    now = _json(get_preset(name))
    for dotted, value in ADDED_WITH_OLD_DEFAULTS[now["model"]["model_type"]].items():
        section, _, key = dotted.partition(".")
        if key not in before[section]:
            assert now[section].pop(key) == value, dotted
    assert now == before


def test_no_preset_was_added_or_lost():
    assert set(PRESETS) == set(_before_schema()) | set(ADDED_PRESETS) == set(PRESET_CONFIGS)


@pytest.mark.parametrize("name", sorted(ADDED_PRESETS))
def test_an_added_preset_is_its_parent_with_its_changes(name):
    parent, changes = ADDED_PRESETS[name]
    expected = _json(get_preset(parent))
    for dotted, value in changes.items():
        section, _, key = dotted.partition(".")
        assert expected[section][key] != value, f"{name}: {dotted} is no change"
        expected[section][key] = value
    now = _json(get_preset(name))
    assert now["description"] != expected["description"]
    expected["description"] = now["description"]
    assert now == expected


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_plain_dict_round_trips_through_the_schema(name):
    preset = get_preset(name)
    assert RunConfig.from_dict(preset).to_dict() == preset == PRESETS[name]
    assert get_preset(name) is not get_preset(name)  # a fresh copy each time


def test_schema_defaults_are_the_model_and_translator_defaults():
    # A stored preset without a model or decode key gave the class its default: the
    # schema's default must be that value, so that filling the key in changes nothing.
    from tf_outheads_zoo.lstm import LSTMSeq2Seq
    from tf_outheads_zoo.transformer import TransformerSeq2Seq

    def defaults(function):
        return {name: parameter.default
                for name, parameter in inspect.signature(function).parameters.items()
                if parameter.default is not inspect.Parameter.empty}

    for model_type, cls in (("lstm", LSTMSeq2Seq), ("transformer", TransformerSeq2Seq)):
        schema = {name: field.default for name, field in section_fields("model", model_type)
                  .items() if name != "model_type"}
        assert schema == {name: value for name, value in defaults(cls.__init__).items()
                          if name in schema}, model_type
        assert set(schema) == set(defaults(cls.__init__)), model_type
    from tf_outheads.decoding.options import DecodeOptions

    decode = {field.name: field.default for field in dataclasses.fields(DecodeConfig)}
    options = {field.name: field.default for field in dataclasses.fields(DecodeOptions)}
    assert set(decode) <= set(options)  # every run setting is a decoding option
    assert decode == {name: value for name, value in options.items() if name in decode}


# -- overrides ----------------------------------------------------------------------------------

def test_unknown_key_lists_the_valid_keys_and_the_closest_one():
    with pytest.raises(ConfigError) as error:
        get_preset("lstm-cpu", {"model.hidden_size": 3})
    message = str(error.value)
    assert "preset 'lstm-cpu'" in message and "did you mean model.hidden_dim?" in message
    assert "Valid model keys (model_type 'lstm'): attention_score," in message
    assert message.endswith("Received: model.hidden_size=3")
    with pytest.raises(ConfigError, match=r"unknown section 'modle'; did you mean 'model'\?"):
        get_preset("lstm-cpu", {"modle.hidden_dim": 3})
    with pytest.raises(ConfigError, match=r"did you mean train.learning_rate\?.*Valid train "
                                          r"keys: accumulation_steps"):
        get_preset("lstm-cpu", {"train.learning_rte": 1e-3})


def test_an_lstm_preset_refuses_a_transformer_only_key():
    with pytest.raises(ConfigError, match=r"model.model_dim applies to model_type "
                                          r"'transformer' only, and this configuration's "
                                          r"model_type is 'lstm'"):
        get_preset("lstm-cpu", {"model.model_dim": 256})
    with pytest.raises(ConfigError, match="model.num_layers applies to model_type 'lstm'"):
        get_preset("transformer-cpu", {"model.num_layers": 2})


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_key_can_be_set_on_every_preset_it_applies_to(name):
    model_type = PRESETS[name]["model"]["model_type"]
    for section in config_module.SECTIONS:
        for key, field in section_fields(section, model_type).items():
            if key == "model_type":
                continue  # test_model_type_moves_to_the_model_section
            value = getattr(getattr(PRESET_CONFIGS[name], section), key)
            if field.metadata["choices"]:  # another allowed value
                value = [c for c in field.metadata["choices"] if c != value][0]
            preset = get_preset(name, {f"{section}.{key}": value})
            assert preset[section][key] == value, f"{section}.{key}"


def test_values_are_checked_and_coerced_to_the_key_type():
    preset = get_preset("lstm-cpu", {"train.learning_rate": "1e-3",  # YAML reads 1e-3 so
                                     "data.vocab_size": 8e3, "decode.replace_unk": "true",
                                     "train.max_minutes": 5, "data.reference_columns": ("a",)})
    assert preset["train"]["learning_rate"] == 0.001
    assert preset["data"]["vocab_size"] == 8000 and type(preset["data"]["vocab_size"]) is int
    assert preset["decode"]["replace_unk"] is True
    assert type(preset["train"]["max_minutes"]) is float
    assert preset["data"]["reference_columns"] == ["a"]
    for override, message in (
            ({"data.vocab_size": "big"}, "data.vocab_size must be int. Received"),
            ({"data.vocab_size": 1.5}, "data.vocab_size must be int"),
            ({"data.joint_vocabulary": 1}, "data.joint_vocabulary must be bool"),
            ({"train.max_steps": "None"}, "train.max_steps must be int or None"),
            ({"model.norm": "sandwich"}, "model.norm applies to model_type 'transformer'"),
            ({"data.target_vectors": {"dims": 300}}, "takes the keys dim, epochs, path"),
            ({"train.loss": {"config": {}}}, "train.loss needs a 'class_name'"),
            ({"data.reference_columns": "en_kjv"}, "must be list of str")):
        with pytest.raises(ConfigError, match=message):
            get_preset("lstm-cpu", override)


@pytest.mark.parametrize("key, value", [("train.max_steps", 0), ("train.max_steps", -5),
                                        ("train.epochs", 0), ("train.steps_per_epoch", -1)])
def test_step_counts_below_one_are_refused_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=rf"{key} must be >= 1.*Received: {key}={value}"):
        get_preset("lstm-tiny", {key: value})
    assert get_preset("lstm-tiny", {key: 1})[key.split(".")[0]][key.split(".")[1]] == 1


def test_a_stored_max_steps_of_0_was_no_budget(tmp_path):
    # Before the check, 0 meant no step limit: a run stored with it resumes so.
    stored = {"name": "lstm-tiny", **get_preset("lstm-tiny")}
    stored["train"]["max_steps"] = 0
    path = tmp_path / "preset.json"
    path.write_text(json.dumps(stored), encoding="utf-8")
    assert read_stored_run(path)[1].train.max_steps is None


def test_model_type_moves_to_the_model_section():
    # The old spelling train.model_type (presets, --set, stored files) is model.model_type.
    for spelling in ("train.model_type", "model.model_type"):
        preset = get_preset("lstm-cpu", {spelling: "transformer"})
        assert preset["model"]["model_type"] == "transformer"
        assert "model_type" not in preset["train"]
        # The new type's defaults, with the keys every model type has kept.
        assert preset["model"] == dict(PRESETS["transformer-base"]["model"],
                                       head=PRESETS["lstm-cpu"]["model"]["head"])
    assert PRESET_CONFIGS["transformer-cpu"].model.model_type == "transformer"
    assert not hasattr(PRESET_CONFIGS["transformer-cpu"].train, "model_type")
    with pytest.raises(ConfigError, match="train.model_type .* says 'lstm'"):
        RunConfig().updated({"train": {"model_type": "lstm"},
                             "model": {"model_type": "transformer"}})
    # Model keys after a switch apply to the new type.
    preset = get_preset("lstm-cpu", {"model.model_type": "transformer", "model.norm": "pre"})
    assert preset["model"]["norm"] == "pre"


def test_presets_are_checked_when_defined():
    with pytest.raises(ConfigError, match="preset 'broken': model.model_dim applies to"):
        derive("lstm-cpu", source="preset 'broken'", model={"model_dim": 3})
    with pytest.raises(ConfigError, match="preset 'broken': unknown setting data.vocab"):
        derive(None, source="preset 'broken'", data={"vocab": 3})


# -- run files ----------------------------------------------------------------------------------

def test_a_yaml_run_file_is_a_preset_with_its_changes(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("preset: lstm-cpu\n"
                    "data:\n  corpus: my.tsv\n  reference_columns: []\n"
                    "model:\n  hidden_dim: 128\n"
                    "train:\n  learning_rate: 1e-3\n  max_minutes: 30\n", encoding="utf-8")
    # A relative path in a run file is relative to the run file's directory.
    expected = get_preset("lstm-cpu", {"data.corpus": str(tmp_path / "my.tsv"),
                                       "data.reference_columns": [],
                                       "model.hidden_dim": 128, "train.learning_rate": 0.001,
                                       "train.max_minutes": 30.0})
    loaded = load_run_config(path).to_dict()
    assert loaded.pop("description") == "lstm-cpu, settings of run.yaml"
    expected.pop("description")
    assert loaded == expected
    # --set after the file.
    assert load_run_config(path, {"train.seed": 7}).train.seed == 7


def test_a_json_run_file_without_a_preset_starts_from_the_defaults(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"description": "mine", "model": {"model_type": "transformer"},
                                "decode": {"beam_size": 4}}), encoding="utf-8")
    loaded = load_run_config(path).to_dict()
    assert loaded == dict(RunConfig().with_overrides(
        {"model.model_type": "transformer", "decode.beam_size": 4}).to_dict(),
        description="mine")
    assert loaded["model"]["model_dim"] == 512


@pytest.mark.parametrize("text, message", [
    ("preset: lstm-cpu\nmodel:\n  hidden_size: 3\n",
     r"run.yaml: unknown setting model.hidden_size; did you mean model.hidden_dim\?"),
    ("preset: lstm-cpu\nmodel:\n  model_dim: 3\n",
     r"run.yaml: model.model_dim applies to model_type 'transformer' only"),
    ("preset: lstm-cpuu\n", r"run.yaml: unknown preset \(did you mean 'lstm-cpu'\?\)"),
    ("presets: lstm-cpu\n", r"run.yaml: unknown top-level key 'presets'; did you mean 'preset'"),
    ("train:\n  seed: many\n", r"run.yaml: train.seed must be int. Received: train.seed='many'"),
    ("train: 3\n", r"run.yaml: section 'train' must be a mapping"),
    ("- a\n- b\n", r"run.yaml: a run file is a mapping of preset"),
    ("data: [\n", r"run.yaml: not valid YAML"),
], ids=["unknown_key", "other_model_type", "unknown_preset", "top_level", "type", "section",
        "not_a_mapping", "yaml_syntax"])
def test_run_file_errors_name_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_run_config(path)


# -- stored presets (run directories) -----------------------------------------------------------

def _stored_before_bucket_width(name="lstm-cpu-softmax"):
    """`preset.json` as the code before `data.bucket_width` wrote it."""
    stored = {"name": name, **copy.deepcopy(_before_schema()[name])}
    del stored["data"]["bucket_width"]
    stored["train"]["model_type"] = stored["model"].pop("model_type")
    return stored


def test_a_stored_preset_without_later_keys_resumes_as_it_trained(tmp_path):
    path = tmp_path / "preset.json"
    path.write_text(json.dumps(_stored_before_bucket_width()), encoding="utf-8")
    name, config = read_stored_run(path)
    preset = config.to_dict()
    assert name == "lstm-cpu-softmax"
    # Runs from before the setting batched in 8-wide buckets, shuffled and tokenized
    # on the whole training split, and attended with unscaled scores; everything else
    # as stored.
    assert preset == get_preset(name, {"data.bucket_width": 8, "data.shuffle_buffer": None,
                                       "data.tokenizer_sample": None,
                                       "data.shuffle_indices": False,
                                       "model.scaled_attention": False})
    stored = _stored_before_bucket_width()
    del stored["data"]["strip_target_suffixes"]
    path.write_text(json.dumps(stored), encoding="utf-8")
    assert read_stored_run(path)[1].data.strip_target_suffixes == []


def test_a_real_run_record_reads_as_it_trained():
    # A study record's preset.json as the code of 2026-11 wrote it: before
    # data.bucket_width, with train.model_type (docs/results/study had it).
    path = DATA / "stored_preset_before_bucket_width.json"
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    name, config = read_stored_run(path)
    preset = config.to_dict()
    assert name == "lstm-cpu-softmax" and preset["data"]["bucket_width"] == 8
    assert preset["model"]["model_type"] == raw["train"].pop("model_type") == "lstm"
    assert "model_type" not in preset["train"]
    for section in ("data", "model", "train", "decode"):
        assert {key: preset[section][key] for key in raw[section]} == raw[section], path


def test_every_committed_record_reads():
    # docs/results/study: whichever code wrote them, the schema reads them.
    # (run.json; preset.json in records written before it)
    runs = sorted(path.parent for pattern in ("*/*/s*/run.json", "*/*/s*/preset.json")
                  for path in (ROOT / "docs" / "results" / "study").glob(pattern))
    assert len(runs) >= 36  # every study, arm and seed recorded
    for run in runs:
        name, config = read_stored_run(stored_settings_path(run))
        assert name in PRESETS and config.model.model_type in ("lstm", "transformer")


def test_a_stored_preset_with_an_unknown_key_names_the_file(tmp_path):
    stored = _stored_before_bucket_width()
    stored["model"]["hidden_size"] = 3
    path = tmp_path / "preset.json"
    path.write_text(json.dumps(stored), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{path}: unknown setting model.hidden_size"):
        read_stored_run(path)


def test_a_run_directory_from_before_bucket_width_resumes_with_its_settings(tmp_path):
    from tf_outheads_zoo.runs import resolve_run_config

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "preset.json").write_text(json.dumps(_stored_before_bucket_width()),
                                         encoding="utf-8")
    (run_dir / "tokenizer.json").write_text("{}", encoding="utf-8")  # a run that trained,
    (run_dir / "loss_curves.csv").write_text("step\n", encoding="utf-8")  # not a failed start
    name, config = resolve_run_config(None, str(run_dir), {"train.max_steps": 3000})
    assert name == "lstm-cpu-softmax" and config.data.bucket_width == 8
    assert config.train.max_steps == 3000
    # Naming the preset asks for today's buckets, which its backups' data order lacks.
    with pytest.raises(ValueError, match="data.bucket_width"):
        resolve_run_config("lstm-cpu-softmax", str(run_dir))
    with pytest.raises(ValueError, match="data.shuffle_buffer"):
        resolve_run_config("lstm-cpu-softmax", str(run_dir), {"data.bucket_width": 8})
    old_batches = {"data.bucket_width": 8, "data.shuffle_buffer": None,
                   "data.tokenizer_sample": None}
    with pytest.raises(ValueError, match="data.shuffle_indices"):  # the backups' iterator
        resolve_run_config("lstm-cpu-softmax", str(run_dir), old_batches)
    old_batches["data.shuffle_indices"] = False
    with pytest.raises(ValueError, match="model.scaled_attention"):  # the weights' model
        resolve_run_config("lstm-cpu-softmax", str(run_dir), old_batches)
    name, config = resolve_run_config("lstm-cpu-softmax", str(run_dir), {
        **old_batches, "model.scaled_attention": False})
    assert config.data.bucket_width == 8


@pytest.mark.parametrize("value, message", [
    ({"center": "yes"}, r"data.target_vectors.center must be true or false"),
    ({"model": "glove"}, r"data.target_vectors.model must be one of 'fasttext', 'word2vec'"),
    ({"eos": "period"}, r"data.target_vectors.eos must be one of 'far', 'file'"),
    ({"remove_components": -2, "center": True},
     r"data.target_vectors.remove_components must be an int >= 0"),
    ({"remove_components": 3}, r"needs data.target_vectors.center: true"),
    ({"dim": 0}, r"data.target_vectors.dim must be an int >= 1"),
])
def test_target_vector_options_are_checked_naming_the_key(value, message):
    with pytest.raises(ConfigError, match=message):
        get_preset("lstm-cpu-vmf", {"data.target_vectors": value})
    options = {"center": True, "remove_components": 3, "eos": "file", "model": "word2vec"}
    assert get_preset("lstm-cpu-vmf", {"data.target_vectors": options})["data"][
        "target_vectors"] == options


@pytest.mark.parametrize("key, value, message", [
    ("decode.eos_bias", float("nan"), r"decode.eos_bias must be a finite number in "
                                      r"\[-100, 100\]. Received: decode.eos_bias=nan"),
    ("decode.eos_bias", float("-inf"), r"Received: decode.eos_bias=-inf"),
    ("decode.eos_bias", 100.5, r"Received: decode.eos_bias=100.5"),
    ("decode.eos_bias", "x", r"decode.eos_bias must be float. Received: decode.eos_bias='x'"),
    ("decode.block_repeats", 1, r"decode.block_repeats must be bool. Received: "
                                r"decode.block_repeats=1"),
])
def test_decoding_constraints_out_of_range_are_refused_naming_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message):
        get_preset("lstm-tiny", {key: value})


def test_decoding_constraints_are_set_and_a_stored_run_without_them_has_none(tmp_path):
    decode = get_preset("lstm-tiny", {"decode.eos_bias": -100, "decode.block_repeats": True})[
        "decode"]
    assert decode["eos_bias"] == -100.0 and decode["block_repeats"] is True
    stored = {"name": "lstm-tiny", **get_preset("lstm-tiny")}
    del stored["decode"]["eos_bias"], stored["decode"]["block_repeats"]
    path = tmp_path / "preset.json"
    path.write_text(json.dumps(stored), encoding="utf-8")
    decode = read_stored_run(path)[1].decode
    assert decode.eos_bias == 0.0 and decode.block_repeats is False
