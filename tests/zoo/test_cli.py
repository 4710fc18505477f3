"""End to end through the CLI on a small real slice of the Bible corpus."""

import json
import os
import re

import pytest

from tests.corpus import write_corpus_slice
from tf_outheads_zoo import cli, commands, errors
from tf_outheads_zoo.presets import get_preset, preset_config


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """A TSV in the embedded corpus's format: 600 train, 30 dev, 30 test verses."""
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 600, 30, 30)


@pytest.fixture(scope="module")
def trained_run(small_corpus, tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("run"))
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "12", "--set", "data.vocab_size=400",
              "--set", "train.steps_per_epoch=6", "--set", "decode.max_length_offset=3"])
    return run_dir


def test_train_writes_translations_and_results(trained_run):
    with open(os.path.join(trained_run, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 12
    assert set(results["test"]) == {"bleu[en_web]", "chrf[en_web]", "bleu[en_web+en_kjv]"}
    assert "nrefs:2" in results["test"]["bleu[en_web+en_kjv]"]["signature"]
    for split in ("dev", "test"):
        with open(os.path.join(trained_run, f"{split}.hyp"), encoding="utf-8") as f:
            assert len(f.read().splitlines()) == 30
    for name in ("model.keras", "tokenizer.json", "run.json", "history.csv", "bleu.jsonl"):
        assert os.path.exists(os.path.join(trained_run, name)), name
    assert results["parameters"]["output_layer"] == 400  # tied: only the bias
    with open(os.path.join(trained_run, "loss_curves.csv")) as f:
        header, *rows = [line.split(",") for line in f.read().splitlines()]
    # A plain run: the loss is the NLL; then the step's target tokens and its end time.
    assert header == ["step", "epoch", "loss", "tokens", "time"]
    assert [int(row[0]) for row in rows] == list(range(1, 13))
    assert all(float(row[3]) > 0 for row in rows)
    times = [float(row[4]) for row in rows]
    assert times == sorted(times) and times[-1] > times[0]
    assert os.path.exists(os.path.join(trained_run, "loss_curves.svg"))


def test_translate_command_keeps_line_count_and_order(trained_run, tmp_path, capsys):
    source = tmp_path / "src.txt"
    source.write_text("Y dijo Dios.\n\nEn el principio.\n", encoding="utf-8")
    output = tmp_path / "hyp.txt"
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
              "--output", str(output)])
    assert len(output.read_text(encoding="utf-8").splitlines()) == 3


def test_translate_command_takes_beam_search_options(trained_run, tmp_path):
    from tf_outheads.decoding import Translator
    from tf_outheads_zoo.runs import load_run

    sources = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra."]
    source = tmp_path / "src.txt"
    source.write_text("\n".join(sources) + "\n", encoding="utf-8")
    output = tmp_path / "hyp.txt"
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
              "--output", str(output), "--beam-size", "3", "--length-penalty", "0.6",
              "--no-replace-unk"])
    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    options = dict(config.decode.options(), beam_size=3, length_penalty=0.6, replace_unk=False)
    expected = Translator(model, source_tokenizer, target_tokenizer, **options).translate(sources)
    assert output.read_text(encoding="utf-8").splitlines() == expected


def test_compare_command_writes_plots_and_the_score_table(trained_run, tmp_path, capsys):
    output = tmp_path / "compare"
    cli.main(["compare", trained_run, trained_run, "--labels", "first", "second",
              "--output", str(output), "--window", "4"])
    with open(os.path.join(trained_run, "results.json")) as f:
        results = json.load(f)
    comparison = json.loads((output / "comparison.json").read_text())
    rows = comparison["runs"]
    assert [row["run"] for row in rows] == ["first", "second"]
    # sacrebleu's paired bootstrap against the first run, with its signature.
    assert comparison["baseline"] == "first"
    assert "bs:1000" in comparison["signatures"]["test"]
    assert rows[0]["test p"] == "baseline"
    assert 0.0 < float(rows[1]["test p"]) <= 1.0
    assert rows[0]["steps"] == 12
    assert rows[0]["test bleu[en_web]"] == round(results["test"]["bleu[en_web]"]["score"], 2)
    assert (output / "nll.svg").read_text().count("<polyline") == 2
    assert "| first |" in (output / "comparison.md").read_text()
    assert "| first |" in capsys.readouterr().out


def test_evaluate_reports_bleu_chrf_and_parameters(trained_run, small_corpus, tmp_path, capsys):
    report = tmp_path / "scores.json"
    cli.main(["evaluate", "--hypotheses", os.path.join(trained_run, "test.hyp"),
              "--corpus", small_corpus, "--split", "test", "--run-dir", trained_run,
              "--json", str(report)])
    printed = capsys.readouterr().out
    assert "bleu[en_web+en_kjv]" in printed and "output_layer" in printed
    scores = json.loads(report.read_text())
    assert scores["parameters"]["embeddings"] > 0


def test_evaluate_refuses_mismatched_line_counts(small_corpus, tmp_path, capsys):
    hypotheses = tmp_path / "short.hyp"
    hypotheses.write_text("one line only\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["evaluate", "--hypotheses", str(hypotheses), "--corpus", small_corpus,
                  "--split", "test"])
    assert exit_info.value.code == 2
    assert re.match(r"error: .*short\.hyp.*(30 .*1 |1 .*30)", capsys.readouterr().err)


def test_override_of_unknown_setting_names_it():
    with pytest.raises(ValueError, match="model.hidden_size"):
        get_preset("lstm-cpu", {"model.hidden_size": 3})


def test_set_parses_python_literals_and_bare_strings():
    overrides = commands.parse_overrides(["model.head=softmax", "train.max_steps=5",
                                      "train.max_minutes=None"])
    assert overrides == {"model.head": "softmax", "train.max_steps": 5, "train.max_minutes": None}


def test_set_parses_json_values_and_refuses_a_broken_dict():
    head = '{"class_name": "joint", "config": {"output_structure": false}}'
    overrides = commands.parse_overrides([f"model.head={head}", "train.jit_compile=true"])
    assert overrides == {"model.head": {"class_name": "joint",
                                        "config": {"output_structure": False}},
                         "train.jit_compile": True}
    # Shell quoting ate the inner quotes: neither Python nor JSON; named, not kept.
    with pytest.raises(commands.CommandError, match="--set model.head.*neither"):
        commands.parse_overrides(["model.head={class_name:joint,config:{output_structure:False}}"])


def test_evaluate_scores_against_the_stripped_references(small_corpus, tmp_path, capsys):
    from tf_outheads_zoo.splits import read_split

    data_config = preset_config("lstm-cpu", {"data.corpus": small_corpus}).data
    references = read_split(data_config, "test").targets
    hypotheses = tmp_path / "oracle.hyp"
    hypotheses.write_text("\n".join(references) + "\n", encoding="utf-8")
    report = tmp_path / "scores.json"
    arguments = ["evaluate", "--hypotheses", str(hypotheses), "--corpus", small_corpus,
                 "--split", "test", "--json", str(report)]
    cli.main(arguments)
    assert json.loads(report.read_text())["bleu[en_web]"]["score"] == pytest.approx(100.0)
    cli.main(arguments + ["--keep-boilerplate"])
    # 1 of these 30 verses (Amos) carries the heading; its n-grams are now missing
    assert json.loads(report.read_text())["bleu[en_web]"]["score"] < 99.9


@pytest.mark.parametrize("loss", [
    "{'class_name': 'vmf', 'config': {'norm_penalty': 0.02, 'dot_scale': 0.1}}",
    "{'class_name': 'cosine', 'config': {}}",
], ids=["vmf", "cosine"])
@pytest.mark.slow  # FastText + CLI training
def test_continuous_head_trains_with_vectors_of_its_own_tokenizer(small_corpus, tmp_path, loss):
    import keras
    import numpy as np

    from tf_outheads import ContinuousOutputHead
    from tf_outheads.data import load_tokenizers, load_word_vectors

    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "4", "--set", "data.vocab_size=300",
              "--set", "data.joint_vocabulary=False", "--set", "train.label_smoothing=0.0",
              "--set", "data.target_vectors={'dim': 12, 'epochs': 1, 'path': None}",
              "--set", "model.head={'class_name': 'continuous', 'config': {'output_dim': 12}}",
              "--set", f"train.loss={loss}",
              "--set", "train.steps_per_epoch=2", "--set", "decode.max_length_offset=3"])
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 4
    # The vectors are per piece of the run's own target tokenizer.
    words, vectors = load_word_vectors(os.path.join(run_dir, "target_vectors.vec"))
    _, target_tokenizer = load_tokenizers(run_dir)
    assert vectors.shape[1] == 12
    assert all(target_tokenizer.piece_to_id(w) != 1 for w in words[:50])  # not UNK
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"), safe_mode=True)
    assert isinstance(model.head, ContinuousOutputHead)
    table = model.head.target_vectors().numpy()
    row = target_tokenizer.piece_to_id(words[0])
    np.testing.assert_allclose(table[row], vectors[0] / np.linalg.norm(vectors[0]), rtol=1e-5)
    # Output layer: d_h·m + m trainable, and the frozen |V|·m table.
    assert results["parameters"]["output_layer"] == 64 * 12 + 12 + target_tokenizer.vocab_size * 12


@pytest.mark.slow  # CLI training or subprocesses end to end (issue 37: CI runs it)
def test_train_again_resumes_from_the_backup_and_averages(trained_run, tmp_path, small_corpus,
                                                          capsys):
    import shutil

    run_dir = str(tmp_path / "resumed")
    shutil.copytree(trained_run, run_dir)
    capsys.readouterr()
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "15", "--set", "data.vocab_size=400",
              "--set", "train.steps_per_epoch=6", "--set", "train.epochs=3",
              "--set", "train.average_last=2", "--set", "decode.max_length_offset=3"])
    output = capsys.readouterr().out
    assert "[backup] resumed from step 12 (epoch 3, batch 0)" in output
    assert "[average] final weights: the mean of the last 2 backups " \
           "(ckpt-000000012, ckpt-000000015)" in output
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 15 and results["averaged_backups"] == 2
    with open(os.path.join(run_dir, "loss_curves.csv")) as f:
        steps = [int(line.split(",")[0]) for line in f.read().splitlines()[1:]]
    assert steps == list(range(1, 16))  # continued, nothing replayed


@pytest.mark.slow  # CLI training end to end
def test_train_takes_strategy_precision_and_accumulation(small_corpus, tmp_path):
    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", small_corpus,
              "--max-steps", "2", "--strategy", "mirrored", "--precision", "mixed_bfloat16",
              "--accumulation-steps", "2", "--set", "data.vocab_size=400",
              "--set", "train.steps_per_epoch=2", "--set", "train.epochs=1",
              "--set", "decode.max_length_offset=3"])
    with open(os.path.join(run_dir, "run.json")) as f:
        train = json.load(f)["train"]
    assert (train["strategy"], train["precision"], train["accumulation_steps"]) == (
        "mirrored", "mixed_bfloat16", 2)
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    assert results["steps"] == 2 and results["replicas"] >= 1
    import keras

    assert keras.config.dtype_policy().name == "float32"  # restored after the run


def test_average_command_writes_an_averaged_model(trained_run, tmp_path, capsys):
    import keras
    import numpy as np

    output = str(tmp_path / "averaged.keras")
    cli.main(["average", "--run-dir", trained_run, "--last", "2", "--output", output])
    averaged = keras.saving.load_model(output)
    final = keras.saving.load_model(os.path.join(trained_run, "model.keras"))
    assert any(not np.allclose(a, b) for a, b in zip(averaged.get_weights(), final.get_weights()))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["average", "--run-dir", trained_run, "--last", "5"])
    assert exit_info.value.code == 2 and "holds 2 backup" in capsys.readouterr().err


def test_user_errors_are_one_line_with_status_2_and_a_traceback_with_debug(tmp_path, capsys):
    missing = str(tmp_path / "nowhere")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "--run-dir", missing, "--input", "-"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {missing}") and "Traceback" not in err
    with pytest.raises(SystemExit):
        cli.main(["--debug", "translate", "--run-dir", missing, "--input", "-"])
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_steps_below_one_is_refused_saying_to_omit_it(tmp_path, capsys, value):
    # 0 once meant "no limit"; a corpus that does not exist: nothing would train anyway.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--preset", "lstm-tiny", "--run-dir", str(tmp_path / "r"),
                  "--corpus", str(tmp_path / "none.tsv"), "--max-steps", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --max-steps must be >= 1")
    assert "omit --max-steps" in err and f"Received: --max-steps {value}" in err
    assert not (tmp_path / "r").exists()


def test_translate_reads_standard_input_by_newlines_only(trained_run, monkeypatch, capsys):
    import io

    # U+2028, a form feed and U+0085 inside lines: 3 lines in, 3 translations out.
    text = "En el principio\u2028creó Dios\nlos cielos\x0cy\nla tierra\x85.\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    capsys.readouterr()
    cli.main(["translate", "--run-dir", trained_run, "--input", "-"])
    assert len(capsys.readouterr().out.split("\n")) == 4  # 3 lines and the final newline


def _craft(model_file):
    """The model's config names `os.system` as its class (what an attacker would ship)."""
    import zipfile

    with zipfile.ZipFile(model_file) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    config.update(module="os", class_name="system", registered_name=None,
                  config={"command": "touch PWNED"})
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(model_file, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


@pytest.mark.parametrize("damage", ["truncated", "empty", "crafted"])
def test_a_damaged_model_file_is_named(trained_run, tmp_path, capsys, damage, monkeypatch):
    import shutil

    run_dir = str(tmp_path / "run")
    shutil.copytree(trained_run, run_dir)
    model_file = os.path.join(run_dir, "model.keras")
    if damage == "crafted":
        _craft(model_file)
    else:
        with open(model_file, "rb") as f:
            data = f.read()
        with open(model_file, "wb") as f:
            f.write(data[:len(data) // 2] if damage == "truncated" else b"")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "--run-dir", run_dir, "--input", "-"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {model_file}: not a readable .keras model"), err
    assert not (tmp_path / "PWNED").exists()


def test_file_system_and_memory_failures_of_tensorflow_are_user_errors():
    import tensorflow as tf

    full = tf.errors.ResourceExhaustedError(
        None, None, "runs/x/backup/.tmp-ckpt-4/variables.data; No space left on device")
    assert errors._is_user_error(full)
    assert "runs/x/backup/.tmp-ckpt-4/variables.data" in errors.error_message(full)
    assert "free space, then run the same command again" in errors.error_message(full)
    too_large = tf.errors.OutOfRangeError(None, None, "a.data; File too large [Op:SaveV2]")
    assert errors._is_user_error(too_large) and "free space" in errors.error_message(too_large)
    oom = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
    assert errors._is_user_error(oom) and "batch_tokens" in errors.error_message(oom)
    # Any other op failure is a bug and keeps its traceback.
    assert not errors._is_user_error(tf.errors.InvalidArgumentError(None, None, "shape [3] != [4]"))
    assert not errors._is_user_error(tf.errors.OutOfRangeError(None, None, "End of sequence"))


def test_tokenizer_files_of_another_run_are_refused(trained_run, small_corpus, tmp_path, capsys):
    """Another run's tokenizer files (the same vocabulary size, consistent among
    themselves) in place of the run's own: the model's recorded fingerprints refuse them."""
    import shutil
    import zipfile

    from tf_outheads import data as tfo_data

    run_dir = str(tmp_path / "run")
    shutil.copytree(trained_run, run_dir)
    with zipfile.ZipFile(os.path.join(run_dir, "model.keras")) as archive:
        assert "tf_outheads.json" in archive.namelist()
    corpus = tfo_data.read_tsv(small_corpus, source="es", target="en_kjv", split="train")
    other = str(tmp_path / "other")
    tfo_data.build_tokenizers(corpus.sources, corpus.targets, other, vocab_size=400, seed=7)
    for name in os.listdir(other):
        shutil.copyfile(os.path.join(other, name), os.path.join(run_dir, name))
    with pytest.raises(SystemExit):
        cli.main(["translate", "--run-dir", run_dir, "--input", "-"])
    err = capsys.readouterr().err
    assert os.path.join(run_dir, "model.keras") in err and "tokenizer.json" in err, err
    assert "from another run" in err


def test_translate_says_how_many_sources_were_cut(trained_run, tmp_path, capfd):
    source = tmp_path / "long.txt"
    verse = "En el principio creó Dios los cielos y la tierra. "
    source.write_text("Y dijo Dios: Sea la luz.\n" + verse * 60 + "\n", encoding="utf-8")
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
              "--output", str(tmp_path / "out.txt")])
    err = capfd.readouterr().err
    assert "1 of 2 sources were longer than 255 subword pieces and were cut" in err, err


@pytest.mark.slow  # CLI training or subprocesses end to end (issue 37: CI runs it)
def test_commands_print_no_tensorflow_start_up_noise(trained_run, tmp_path):
    """On a CPU machine TensorFlow's import prints cuInit failures, oneDNN and absl
    notices that read like errors; the CLI keeps them out of stderr."""
    import subprocess
    import sys

    source = tmp_path / "source.txt"
    source.write_text("Y dijo Dios: Sea la luz.\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for argv in (["--help"], ["translate", "--run-dir", trained_run, "--input", str(source)]):
        result = subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", *argv], capture_output=True,
                                text=True, env=env, cwd=repo, timeout=300)
        assert result.returncode == 0, result.stderr
        for notice in ("cuInit", "oneDNN", "absl::InitializeLog", "cudart_stub", "I0000"):
            assert notice not in result.stderr, (argv, result.stderr)
    assert result.stdout.strip()  # the translation


def test_quiet_import_keeps_lines_that_are_not_start_up_notices():
    from tf_outheads_zoo.quiet import is_noise

    assert is_noise("I0000 00:00:1795596465.010366   22751 port.cc:153] oneDNN custom ...")
    assert is_noise("E0000 00:00:1795596467.790554   22751 cuda_platform.cc:52] failed call "
                    "to cuInit: INTERNAL: CUDA error")
    assert not is_noise("E0000 00:00:1795596467.7 22751 op_kernel.cc:1] OOM when allocating")
    assert not is_noise("Traceback (most recent call last):")


# -- a run file (--config) -----------------------------------------------------------------

def _run_file(path, corpus, **extra):
    text = (f"preset: lstm-tiny\n"
            f"data: {{corpus: {json.dumps(str(corpus))}, vocab_size: 400}}\n"
            f"train: {{steps_per_epoch: 2, epochs: 10}}\n"
            f"decode: {{max_length_offset: 3}}\n")
    text += "".join(f"{key}: {value}\n" for key, value in extra.items())
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.slow  # CLI training or subprocesses end to end (issue 37: CI runs it)
def test_train_from_a_run_file_is_the_preset_with_its_keys(small_corpus, tmp_path):
    run_file = _run_file(tmp_path / "mine.yaml", small_corpus)
    run_dir = tmp_path / "runs" / "mine"
    cli.main(["train", "--config", run_file, "--run-dir", str(run_dir), "--max-steps", "4"])
    with open(run_dir / "run.json", encoding="utf-8") as f:
        stored = json.load(f)
    expected = get_preset("lstm-tiny", {
        "data.corpus": small_corpus, "data.vocab_size": 400, "train.steps_per_epoch": 2,
        "decode.max_length_offset": 3, "train.epochs": 10, "train.max_steps": 4})
    assert stored.pop("preset") == "lstm-tiny"
    stored.pop("description"), expected.pop("description")
    assert stored == json.loads(json.dumps(expected))
    with open(run_dir / "results.json", encoding="utf-8") as f:
        results = json.load(f)
    assert results["steps"] == 4 and "bleu[en_web]" in results["test"]
    # Resuming with the same file and a larger budget continues the same run.
    cli.main(["train", "--config", run_file, "--run-dir", str(run_dir), "--max-steps", "6"])
    with open(run_dir / "results.json", encoding="utf-8") as f:
        assert json.load(f)["steps"] == 6


def test_a_run_file_with_another_model_is_refused_on_an_existing_run(small_corpus, tmp_path,
                                                                      capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "preset.json").write_text(json.dumps(
        {"name": "lstm-tiny", **get_preset("lstm-tiny", {"data.corpus": small_corpus})}),
        encoding="utf-8")
    (run_dir / "tokenizer.json").write_text("{}", encoding="utf-8")  # a run that trained,
    (run_dir / "loss_curves.csv").write_text("step\n", encoding="utf-8")  # not a failed start
    run_file = _run_file(tmp_path / "other.yaml", small_corpus,
                         model="{hidden_dim: 48}")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", run_file, "--run-dir", str(run_dir)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "model.hidden_dim" in err and "Nothing was changed" in err


@pytest.mark.parametrize("args, edit, message", [
    (["--preset", "lstm-tiny"], None,
     r"mine\.yaml: a run file and a preset \(lstm-tiny\) both given"),
    ([], ("epochs: 10}", "epochs: 10, max_step: 3}"),
     r"mine\.yaml: unknown setting train\.max_step\b.*max_steps"),
], ids=["with_preset", "unknown_key"])
def test_run_file_errors_name_the_file(small_corpus, tmp_path, capsys, args, edit, message):
    run_file = tmp_path / "mine.yaml"
    _run_file(run_file, small_corpus)
    if edit:
        run_file.write_text(run_file.read_text(encoding="utf-8").replace(*edit),
                            encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(run_file), "--run-dir", str(tmp_path / "r"), *args])
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "r" / "run.json").exists()


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_translate_writes_n_best_lists_with_scores_as_the_python_api(trained_run, tmp_path):
    from tf_outheads.decoding import Translator
    from tf_outheads_zoo.runs import load_run

    sources = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra."]
    source = tmp_path / "src.txt"
    source.write_text("\n".join(sources) + "\n", encoding="utf-8")
    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    expected = Translator(model, source_tokenizer, target_tokenizer,
                          **dict(config.decode.options(), beam_size=3)).translate(
        sources, num_hypotheses=2, with_scores=True)
    output = tmp_path / "nbest.txt"
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source), "--output",
              str(output), "--beam-size", "3", "--n-best", "2", "--with-scores"])
    lines = [line.split(" ||| ") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [(int(i), text) for i, text, _ in lines] == [
        (index, text) for index, row in enumerate(expected) for text, _ in row]
    scores = [float(score) for _, _, score in lines]
    assert scores == pytest.approx([s for row in expected for _, s in row], abs=1e-5)
    jsonl = tmp_path / "nbest.jsonl"
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source), "--output",
              str(jsonl), "--beam-size", "3", "--n-best", "2", "--format", "jsonl"])
    records = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [[h["text"] for h in r["hypotheses"]] for r in records] == [
        [text for text, _ in row] for row in expected]
    assert "score" not in records[0]["hypotheses"][0]
    with pytest.raises(SystemExit):
        cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
                  "--n-best", "2"])


@pytest.mark.slow  # tests/export/test_three_hosts.py checks it on four heads too
def test_translate_samples_as_the_python_api_with_a_seed(trained_run, tmp_path, capsys):
    from tf_outheads.decoding import Translator
    from tf_outheads_zoo.runs import load_run

    sources = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra.",
               "Jehová es mi pastor."]
    source = tmp_path / "src.txt"
    source.write_text("\n".join(sources) + "\n", encoding="utf-8")
    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    expected = Translator(model, source_tokenizer, target_tokenizer,
                          **dict(config.decode.options(), beam_size=1, sampling_topk=20,
                                 sampling_temperature=1.5, seed=9)).translate(
        sources, with_scores=True)
    output = tmp_path / "samples.txt"
    command = ["translate", "--run-dir", trained_run, "--input", str(source), "--output",
               str(output), "--sampling-topk", "20", "--sampling-temperature", "1.5",
               "--seed", "9", "--with-scores"]
    cli.main(command)
    lines = [line.split(" ||| ") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [text for _, text, _ in lines] == [text for text, _ in expected]
    assert [float(score) for *_, score in lines] == pytest.approx(
        [score for _, score in expected], abs=1e-5)


def test_translate_refuses_bad_sampling_options_by_name(trained_run, tmp_path, capsys):
    source = tmp_path / "src.txt"
    source.write_text("Y dijo Dios: Sea la luz.\n", encoding="utf-8")
    for bad, message in ((["--sampling-topp", "0"], r"`sampling_topp` must be a number in "
                                                    r"\(0, 1\]\. Received: sampling_topp=0\.0"),
                         (["--sampling-topk", "-3"], r"`sampling_topk` must be an int >= 0"),
                         (["--sampling-topk", "5", "--beam-size", "4"],
                          r"--beam-size 4 with sampling")):
        with pytest.raises(SystemExit):
            cli.main(["translate", "--run-dir", trained_run, "--input", str(source), *bad])
        assert re.search(message, capsys.readouterr().err)


@pytest.mark.slow  # tests/export/test_three_hosts.py checks it on four heads too
def test_translate_continues_target_prefixes_as_the_python_api(trained_run, tmp_path,
                                                                capsys):
    from tf_outheads.decoding import Translator
    from tf_outheads_zoo.runs import load_run

    sources = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra.",
               "Jehová es mi pastor."]
    prefixes = ["And God", "", "The LORD is"]
    source, prefix_file = tmp_path / "src.txt", tmp_path / "prefix.txt"
    source.write_text("\n".join(sources) + "\n", encoding="utf-8")
    prefix_file.write_text("\n".join(prefixes) + "\n", encoding="utf-8")
    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    for beam in (3,):  # greedy: tests/export/test_three_hosts.py
        expected = Translator(model, source_tokenizer, target_tokenizer,
                              **dict(config.decode.options(), beam_size=beam)).translate(
            sources, with_scores=True, target_prefix=prefixes)
        output = tmp_path / f"prefixed{beam}.txt"
        cli.main(["translate", "--run-dir", trained_run, "--input", str(source), "--output",
                  str(output), "--target-prefix", str(prefix_file), "--beam-size", str(beam),
                  "--with-scores"])
        lines = [line.split(" ||| ") for line in
                 output.read_text(encoding="utf-8").splitlines()]
        assert [text for _, text, _ in lines] == [text for text, _ in expected]
        assert [float(score) for *_, score in lines] == pytest.approx(
            [score for _, score in expected], abs=1e-5)
        assert lines[0][1].startswith("And God") and lines[2][1].startswith("The LORD is")
    prefix_file.write_text("And\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
                  "--target-prefix", str(prefix_file)])
    assert re.search(r"--target-prefix .*prefix\.txt has 1 lines and --input 3",
                     capsys.readouterr().err)


@pytest.mark.slow  # ~10 s: in the slow set, for the fast suite's 10-minute budget
def test_translate_appends_alignments_as_the_python_api(trained_run, tmp_path, capsys):
    from tf_outheads.decoding import Translator
    from tf_outheads_zoo.runs import load_run

    sources = ["Y dijo Dios: Sea la luz.", "Jehová es mi pastor."]
    source = tmp_path / "src.txt"
    source.write_text("\n".join(sources) + "\n", encoding="utf-8")
    model, source_tokenizer, target_tokenizer, config = load_run(trained_run)
    expected = Translator(model, source_tokenizer, target_tokenizer,
                          **config.decode.options()).translate(sources, with_alignments=True)
    cli.main(["translate", "--run-dir", trained_run, "--input", str(source),
              "--with-alignments"])
    lines = capsys.readouterr().out.splitlines()
    assert [tuple(line.split(" ||| ")) for line in lines] == expected
    assert all(alignment.split()[0].endswith("-0") for _, alignment in expected)


def test_score_command_writes_the_scorer_s_numbers(trained_run, tmp_path, capsys):
    from tf_outheads.decoding import Scorer
    from tf_outheads_zoo.runs import load_run

    sources = ["Y dijo Dios: Sea la luz.", "En el principio."]
    targets = ["And God said, Let there be light.", "In the beginning."]
    (tmp_path / "src").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (tmp_path / "tgt").write_text("\n".join(targets) + "\n", encoding="utf-8")
    cli.main(["score", "--run-dir", trained_run, "--source", str(tmp_path / "src"),
              "--target", str(tmp_path / "tgt"), "--per-token", "--output",
              str(tmp_path / "scores.jsonl")])
    records = [json.loads(line) for line in
               (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    model, source_tokenizer, target_tokenizer, _ = load_run(trained_run)
    expected = Scorer(model, source_tokenizer, target_tokenizer).score(sources, targets)
    assert [r["log_prob"] for r in records] == pytest.approx(
        [r["log_prob"] for r in expected], abs=1e-4)
    assert records[1]["pieces"][-1] == "</s>" and len(records[1]["token_log_probs"]) == \
        records[1]["tokens"]
    assert re.search(r"\[score\] 2 pairs, \d+ target tokens \(EOS included\): cross-entropy "
                     r"[0-9.]+ nats per token", capsys.readouterr().err)
    (tmp_path / "tgt").write_text("one line\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        cli.main(["score", "--run-dir", trained_run, "--source", str(tmp_path / "src"),
                  "--target", str(tmp_path / "tgt")])
    assert "has 2 lines and --target" in capsys.readouterr().err


def test_decoding_constraint_flags_reach_the_translator_and_the_export(tmp_path, monkeypatch,
                                                                      capsys):
    # No model: the run is stubbed, the Translator records what it is given.
    import tf_outheads.decoding.translator as translator_module
    from tf_outheads_zoo import runs

    stored = preset_config("lstm-tiny", {"decode.eos_bias": 2.0, "decode.block_repeats": True})
    given = []

    class Recorder:
        def __init__(self, model, source_tokenizer, target_tokenizer, **options):
            given.append(options)

        def translate(self, sources, **kwargs):
            return [(source, 0.0) for source in sources]

    monkeypatch.setattr(runs, "load_run", lambda run_dir: (None, None, None, stored))
    monkeypatch.setattr(translator_module, "Translator", Recorder)
    source = tmp_path / "src.txt"
    source.write_text("Y dijo Dios.\n", encoding="utf-8")
    command = ["translate", "--run-dir", "run", "--input", str(source)]
    for flags, expected in (([], (2.0, True)),  # the run's decode settings
                            (["--eos-bias", "-1.5", "--no-block-repeats"], (-1.5, False)),
                            (["--eos-bias=-100", "--block-repeats"], (-100.0, True))):
        cli.main(command + flags)
        assert (given[-1]["eos_bias"], given[-1]["block_repeats"]) == expected, flags
    exported = []
    monkeypatch.setattr(runs, "export_run", lambda run_dir, output, **options:
                        exported.append(options) or output)
    cli.main(["export", "--run-dir", "run", "--output", "out", "--eos-bias", "-3",
              "--block-repeats"])
    assert exported[-1]["eos_bias"] == -3.0 and exported[-1]["block_repeats"] is True
    cli.main(["export", "--run-dir", "run", "--output", "out"])
    assert "eos_bias" not in exported[-1]  # export_run takes the run's decode settings:
    from tf_outheads.export import export_options

    assert export_options(stored.decode.options())["eos_bias"] == 2.0
    assert export_options(stored.decode.options())["block_repeats"] is True


def test_study_decodings_become_translate_flags():
    # A study file's `decodings: {long: {eos_bias: -2, block_repeats: true}}`.
    from tf_outheads_zoo.study.runner import translate_flags

    flags = translate_flags({"beam_size": 5, "eos_bias": -2.0, "block_repeats": True,
                             "replace_unk": False})
    assert flags == ["--beam-size", "5", "--eos-bias", "-2.0", "--block-repeats",
                     "--no-replace-unk"]
    args = cli.build_parser().parse_args(["translate", "--run-dir", "r", "--input", "i",
                                          *flags])
    assert (args.beam_size, args.eos_bias, args.block_repeats, args.replace_unk) == (
        5, -2.0, True, False)


def test_a_child_run_inherits_its_parents_files_weights_and_optimizer(trained_run,
                                                                     tmp_path):
    """`train --init-from R --init-optimizer`'s parts (tf_outheads_zoo.init_from), on the
    trained run, without training the child (its CLI trainings, every head, a vocabulary
    update and a moved parent are test_init_from.py's slow tests): the child's copies
    and record, written once; the parent's weights in a model of the same settings; its
    Adam moments and step count."""
    import keras
    import numpy as np

    from tf_outheads.training.translation import compile_for_translation
    from tf_outheads_zoo import init_from
    from tf_outheads_zoo.components import training_loss
    from tf_outheads_zoo.runs import load_run

    child, messages = str(tmp_path / "child"), []
    record = init_from.inherit(trained_run, child, log=messages.append)
    assert (record["run_dir"], record["preset"], record["steps"]) == (
        trained_run, "lstm-tiny", 12)
    assert sorted(record["inherited"]) == sorted(
        ["model.keras → init_model.keras", "tokenizer.json", "spm_joint.model",
         "spm_joint.vocab"])
    assert messages == [f"[init] from {trained_run} (lstm-tiny, 12 steps): "
                        + ", ".join(record["inherited"])]
    assert init_from.inherit(trained_run, child, log=messages.append) == record  # a resume
    assert len(messages) == 1
    assert open(os.path.join(child, "tokenizer.json")).read() == open(
        os.path.join(trained_run, "tokenizer.json")).read()
    assert init_from.piece_maps(child, None, None) == (None, None)  # the parent's pieces

    parent, *_, config = load_run(trained_run)
    model = load_run(trained_run)[0]
    for variable in model.weights:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    report = init_from.load_parent_weights(model, child, config)
    assert report["tables"] == {"source_embedding": 400, "target_embedding": 400,
                                "head/bias": 400}
    for mine, theirs in zip(model.weights, parent.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(mine),
                                      keras.ops.convert_to_numpy(theirs))
    compile_for_translation(model, optimizer="adam", **training_loss(config.train))
    assert init_from.restore_optimizer(model, trained_run) == 12
    assert int(model.optimizer.iterations.numpy()) == 12
    moments = [v for v in model.optimizer.variables if "momentum" in v.path]
    assert moments and all(np.abs(keras.ops.convert_to_numpy(v)).sum() > 0 for v in moments)


def test_a_run_shortlist_is_built_stored_measured_and_checked(trained_run, tmp_path):
    """The shortlist command's parts without eflomal or translations (the command end to
    end, aligned by eflomal, is the slow test below): built from the run's training
    pairs in its pieces, stored in the run, measured on dev, and checked when loaded."""
    import shutil

    import numpy as np

    from tf_outheads import data as tfo_data
    from tf_outheads_zoo import shortlists

    run_dir = str(tmp_path / "run")
    shutil.copytree(trained_run, run_dir)
    with pytest.raises(FileNotFoundError, match=r"no shortlist \(build one: tf-outheads "
                                                 r"shortlist --run-dir"):
        shortlists.load_run_shortlist(run_dir)
    with pytest.raises(ValueError, match=r"`aligner` must be 'eflomal', 'co-occurrence' or "
                                         r"None. Received: aligner='giza'"):
        shortlists.build_run_shortlist(run_dir, aligner="giza")
    messages = []
    built = shortlists.build_run_shortlist(run_dir, top_k=1, frequent=5, bucket=8,
                                           aligner="co-occurrence", log=messages.append)
    assert re.match(r"\[shortlist\] [\d,]+ training pairs aligned by co-occurrence: top 1 "
                    r"target pieces per source piece \+ the 5 most frequent → .*shortlist.npz",
                    messages[-1])
    loaded = shortlists.load_run_shortlist(run_dir)  # RUN/shortlist.npz
    source_tokenizer, target_tokenizer = tfo_data.load_tokenizers(run_dir)
    batch = np.array([[5, 9, 3], [17, 3, 0]], dtype="int32")
    assert np.array_equal(loaded.candidates(batch), built.candidates(batch))
    narrow = shortlists.report_dev_recall(run_dir, loaded, log=messages.append)
    assert re.match(r"\[shortlist\] dev: [\d.]+% of the reference pieces among their "
                    r"batch's candidates; \d+ candidates of 400 pieces per batch of \d+ "
                    r"\(\d+ batches\)", messages[-1])
    assert 0 < narrow["recall"] < 1 and 5 < narrow["candidates"] < 400
    # Every piece frequent: every reference piece among the candidates.
    full = shortlists.build_run_shortlist(run_dir, top_k=1, frequent=400,
                                          aligner="co-occurrence", log=messages.append)
    recall = shortlists.shortlist_recall(full, source_tokenizer, target_tokenizer,
                                         ["Y dijo Dios: Sea la luz."], ["And God said."])
    assert recall == {"recall": 1.0, "candidates": 400.0, "vocabulary": 400, "batches": 1}


@pytest.mark.slow  # a CLI shortlist build and translations (~40 s)
def test_shortlist_command_builds_reports_and_translate_decodes_with_it(trained_run, tmp_path,
                                                                        capsys):
    source_file = tmp_path / "sources.txt"
    source_file.write_text("Y dijo Dios: Sea la luz.\n\nJehová es mi pastor.\n", encoding="utf-8")

    def translate(*flags):
        output = tmp_path / "out.txt"
        cli.main(["translate", "--run-dir", trained_run, "--input", str(source_file),
                  "--output", str(output), "--with-scores", *flags])
        return output.read_text(encoding="utf-8").splitlines()

    with pytest.raises(SystemExit):  # none built yet: said in one line
        translate("--shortlist")
    assert "no shortlist (build one: tf-outheads shortlist" in capsys.readouterr().err
    # Every piece among the frequent ones: the same translations and scores as without.
    cli.main(["shortlist", "--run-dir", trained_run, "--frequent", "400", "--top-k", "1"])
    assert translate("--shortlist") == translate()
    capsys.readouterr()
    cli.main(["shortlist", "--run-dir", trained_run, "--top-k", "1", "--frequent", "5",
              "--bucket", "8"])
    out = capsys.readouterr().out
    assert "aligned by eflomal: top 1 target pieces per source piece + the 5 most" in out
    match = re.search(r"dev: ([\d.]+)% of the reference pieces among their batch's "
                      r"candidates; (\d+) candidates of 400 pieces", out)
    assert match and 0 < float(match[1]) < 100 and int(match[2]) < 400
    selected = translate("--shortlist", os.path.join(trained_run, "shortlist.npz"))
    assert len(selected) == 3 and selected[1] == "1 |||  ||| 0.000000"
