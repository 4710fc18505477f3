"""Settings are checked before anything is written (issue 54, items 1, 3, 10, 12).

Each bad value is refused by the schema with the setting's own name, in one `error:`
line, before the run directory exists; a run or study file is bounded before it is
read; a first start that failed before its first step does not stick the directory.
"""

import json
import os
import time

import pytest

from tests.corpus import write_corpus_slice, write_text_files
from tf_outheads_zoo import cli, runs
from tf_outheads_zoo.presets import get_preset, preset_config
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.stored import MAX_FILE_BYTES, load_run_config


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 300, 20, 20)


BAD_VALUES = [
    ("model.hidden_dim", -3, "model.hidden_dim must be >= 1"),
    ("model.dropout", 1.5, r"model.dropout must be in \[0, 1\)"),
    ("train.label_smoothing", 7, r"train.label_smoothing must be in \[0, 1\)"),
    ("train.accumulation_steps", 0, "train.accumulation_steps must be >= 1"),
    ("data.batch_tokens", 0, "data.batch_tokens must be >= 1"),
    ("train.sampled_softmax", {"fraction": 1.5}, r"train.sampled_softmax.fraction must be in"),
    ("train.sampled_softmax", {"fraction": 0.1, "mode": "unigram"}, "unigram counts"),
    ("decode.beam_size", 0, "decode.beam_size must be >= 1"),
    ("decode.max_length_ratio", 0, "decode.max_length_ratio must be above 0"),
    ("train.learning_rate", -1, "train.learning_rate must be >= 0"),
    ("train.global_clipnorm", -1, "train.global_clipnorm must be above 0"),
    ("train.patience", -1, "train.patience must be >= 0"),
    ("train.keep_backups", 2, "train.average_last averages backups that are kept"),
]


@pytest.mark.parametrize("key,value,message", BAD_VALUES,
                         ids=[f"{key}={value}" for key, value, _ in BAD_VALUES])
def test_a_bad_value_is_refused_by_the_schema_naming_the_setting(key, value, message):
    base = {"train.average_last": 3} if key == "train.keep_backups" else {}
    with pytest.raises(ConfigError, match=message):
        get_preset("lstm-tiny", {**base, key: value})


def test_cross_field_checks_name_both_keys():
    with pytest.raises(ConfigError, match="model.hidden_dim.*must be even"):
        get_preset("lstm-cpu", {"model.hidden_dim": 255})
    with pytest.raises(ConfigError, match="divisible by model.num_heads"):
        get_preset("transformer-cpu", {"model.num_heads": 7})
    with pytest.raises(ConfigError, match="train.label_smoothing needs"):
        get_preset("lstm-tiny", {"train.label_smoothing": 0.1,
                                 "train.sampled_softmax": {"mode": "uniform", "num_sampled": 9}})


@pytest.mark.parametrize("setting", ["model.hidden_dim=-3", "train.label_smoothing=7",
                                     "decode.beam_size=0"])
def test_train_refuses_a_bad_value_before_anything_is_written(corpus, tmp_path, capsys,
                                                               setting):
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--preset", "lstm-tiny", "--run-dir", str(run_dir), "--corpus",
                  corpus, "--set", setting])
    assert exit_info.value.code == 2
    assert not run_dir.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and setting.split("=")[0] in err[0]


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    # Nine levels of nine aliases: 387M values once expanded, from a 1 KB file.
    lines = ['a0: &a0 ["x"]']
    for level in range(1, 10):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    lines.append("train: {sampled_softmax: {fraction: *a9}}")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"bomb.yaml: holds more than 100,000 values"):
        load_run_config(str(path))
    assert time.monotonic() - start < 5


def test_a_run_file_too_large_or_too_deep_is_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("description: " + "x" * MAX_FILE_BYTES + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="big.yaml: larger than 1 MiB"):
        load_run_config(str(big))
    deep = tmp_path / "deep.json"
    deep.write_text('{"description": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    with pytest.raises(ConfigError, match="deep.json: .*nested"):
        load_run_config(str(deep))
    shallow = tmp_path / "nested.yaml"
    shallow.write_text("data: {x: " + "[" * 60 + "]" * 60 + "}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="nested deeper than 50 levels"):
        load_run_config(str(shallow))


def _overrides(corpus, **extra):
    return {"data.corpus": corpus, "data.vocab_size": 300, **extra}


def test_a_first_start_with_a_tokenizer_and_no_step_takes_new_model_settings(corpus,
                                                                            tmp_path, capsys):
    # What a first start that failed after building its tokenizer left behind.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = get_preset("lstm-tiny", _overrides(corpus, **{"model.hidden_dim": 24}))
    (run_dir / "preset.json").write_text(json.dumps({"name": "lstm-tiny", **first}),
                                         encoding="utf-8")
    (run_dir / "tokenizer.json").write_text("{}", encoding="utf-8")
    name, config = runs.resolve_run_config("lstm-tiny", str(run_dir), _overrides(corpus))
    assert config.model.hidden_dim == preset_config("lstm-tiny").model.hidden_dim
    logged = capsys.readouterr().out.splitlines()
    assert len(logged) == 1 and "model.hidden_dim" in logged[0] and "replace" in logged[0]
    # Batching may change too; the settings the tokenizer depends on may not.
    runs.resolve_run_config("lstm-tiny", str(run_dir),
                            _overrides(corpus, **{"model.hidden_dim": 24,
                                                  "data.batch_tokens": 999}))
    with pytest.raises(runs.RunDirectoryError, match="data.vocab_size"):
        runs.resolve_run_config("lstm-tiny", str(run_dir),
                                _overrides(corpus, **{"model.hidden_dim": 24,
                                                      "data.vocab_size": 400}))
    # Once a step is backed up (here: its loss curve), it is a run: refused as before.
    (run_dir / "loss_curves.csv").write_text("step\n", encoding="utf-8")
    with pytest.raises(runs.RunDirectoryError, match="holds a run of preset"):
        runs.resolve_run_config("lstm-tiny", str(run_dir), _overrides(corpus))


@pytest.mark.parametrize("streamed", [False, True], ids=["in_memory", "streamed"])
def test_every_pair_dropped_by_length_is_one_error_line(corpus, tmp_path, capsys, streamed):
    run_dir = tmp_path / "run"
    command = ["train", "--preset", "lstm-tiny", "--run-dir", str(run_dir), "--corpus", corpus,
               "--max-steps", "2", "--set", "data.vocab_size=300",
               "--set", "data.max_sequence_length=3"]
    if streamed:
        directory = write_text_files(corpus, str(tmp_path / "text"))
        train = {"source": os.path.join(directory, "train.es"),
                 "target": os.path.join(directory, "train.en.gz")}
        command += ["--set", f"data.train={json.dumps(train)}"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(command)
    assert exit_info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "data.max_sequence_length=3" in err[0], err


def test_a_damaged_data_files_record_is_named(corpus, tmp_path):
    from tf_outheads_zoo.runs import RunDirectoryError, check_data_fingerprints

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "tokenizer.json").write_text("{}", encoding="utf-8")
    (run_dir / "data_files.json").write_text("", encoding="utf-8")  # truncated
    with pytest.raises(RunDirectoryError, match=r"data_files.json: damaged"):
        check_data_fingerprints(str(run_dir), preset_config("lstm-tiny", _overrides(corpus)).data,
                                log=lambda *_: None)


def test_a_bad_set_over_a_run_file_is_blamed_on_the_set_not_the_file(tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text("preset: lstm-tiny\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^--set \(or an option\) over .*run.yaml: "
                                          r"model.hidden_dim must be >= 1"):
        load_run_config(str(run_file), {"model.hidden_dim": -3})


@pytest.mark.parametrize("flags", [["--beam-size", "0"], ["--n-best", "0"],
                                   ["--batch-size", "-2"]])
def test_a_count_option_below_one_is_refused_by_its_own_name(tmp_path, capsys, flags):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "--run-dir", str(tmp_path), "--input", "-", *flags])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"error: {flags[0]} must be >= 1. Received: {' '.join(flags)}\n"


def test_the_last_line_starts_on_a_line_of_its_own_in_a_terminal(monkeypatch, capsys):
    # Keras' progress bar leaves its line open; `stopped:` / `error:` must not be glued to it.
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert cli._line_break() == "\n"
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert cli._line_break() == ""
