"""Run directories: resumes keep the best model, refusals change nothing, one trainer at a time.

A tiny `lstm-tiny` run on a real slice of the Bible corpus is "killed" (an
exception raised from a callback, after the step's rows are written and before
its backup) several times and resumed each time.
"""

import dataclasses
import json
import os

import numpy as np
import pytest

from tests.corpus import lengthen_line, text_data, write_corpus_slice, write_text_files
from tf_outheads.training import callbacks as callbacks_module
from tf_outheads_zoo import cli, runs
from tf_outheads_zoo import train as train_module
from tf_outheads_zoo.curves import LossCurves
from tf_outheads_zoo.presets import get_preset, preset_config

STEPS_PER_EPOCH = 3
MAX_STEPS = 18
# Dev "BLEU" of each evaluation (the tiny model's real BLEU is 0 throughout): the best
# comes at step 6; a resumed run that forgot it would save a worse model over it.
SCORES = {3: 1.0, 6: 5.0, 9: 2.0, 12: 3.0, 15: 4.0, 18: 0.5}


class _Crash(Exception):
    pass


class _Score:
    def __init__(self, score):
        self.score, self.text, self.signature = score, f"BLEU = {score}", "fake"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 300, 20, 20)


def _overrides(corpus, **extra):
    overrides = {"data.corpus": corpus, "data.vocab_size": 300,
                 "train.steps_per_epoch": STEPS_PER_EPOCH, "train.epochs": 100,
                 "train.max_steps": MAX_STEPS, "train.backup_every_n_steps": 1,
                 "train.keep_backups": 1, "train.patience": None,
                 "decode.max_length_offset": 3}
    overrides.update(extra)
    return overrides


@pytest.fixture()
def scripted_scores(monkeypatch):
    original = callbacks_module.BleuCallback.evaluate

    def evaluate(self):
        monkeypatch.setattr(callbacks_module, "corpus_bleu",
                            lambda hypotheses, references: _Score(SCORES[self._step]))
        return original(self)

    monkeypatch.setattr(callbacks_module.BleuCallback, "evaluate", evaluate)


def _crash_at(monkeypatch, step, where):
    """Raise `_Crash` once, at `step`: after its loss row ("batch") or after its dev
    evaluation, best weights and history.csv row, before its backup ("epoch")."""
    from tf_outheads.training.callbacks import EpochHistory

    if where == "batch":
        cls, method = LossCurves, "on_train_batch_end"
    else:
        cls, method = EpochHistory, "on_epoch_end"
    original = getattr(cls, method)

    def crash(self, index, logs=None):
        original(self, index, logs)
        if int(self.model.optimizer.iterations.numpy()) == step:
            monkeypatch.setattr(cls, method, original)
            raise _Crash(step)

    monkeypatch.setattr(cls, method, crash)


def _steps(path, key=None):
    if key is None:  # loss_curves.csv
        with open(path, encoding="utf-8") as f:
            return [int(line.split(",")[0]) for line in f.read().splitlines()[1:]]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)[key] for line in f if line.strip()]


def _epochs(run_dir):
    with open(os.path.join(run_dir, "history.csv"), encoding="utf-8") as f:
        return [line.split(",")[0] for line in f.read().splitlines()[1:]]


@pytest.mark.slow  # five trainings, 30 s
def test_killed_and_resumed_run_keeps_its_best_model_and_continuous_history(
        corpus, tmp_path, monkeypatch, scripted_scores):
    run_dir = str(tmp_path / "run")
    overrides = _overrides(corpus)
    best_file = os.path.join(run_dir, "checkpoints", "best.weights.h5")
    best_bytes = None
    for step, where in ((4, "batch"), (8, "batch"), (9, "epoch"), (13, "batch"),
                        (15, "epoch")):
        _crash_at(monkeypatch, step, where)
        with pytest.raises(_Crash):
            train_module.run_training("lstm-tiny", run_dir, overrides, log=lambda *_: None)
        # Never more steps in the curves than trained, never a step twice.
        steps = _steps(os.path.join(run_dir, "loss_curves.csv"))
        assert steps == list(range(1, steps[-1] + 1))
        bleu_steps = _steps(os.path.join(run_dir, "bleu.jsonl"), "step")
        assert bleu_steps == sorted(set(bleu_steps))
        if step == 9:  # epoch 3's row written, its backup not: the resume writes it again
            assert _epochs(run_dir) == ["0", "1", "2"]
        if step > 6:
            # Written at step 6, the best: never replaced by the worse steps 9 to 15.
            with open(best_file, "rb") as f:
                best_bytes = best_bytes or f.read()
                f.seek(0)
                assert f.read() == best_bytes
            # The best model's backup is kept although keep_backups is 1.
            assert os.path.isdir(os.path.join(run_dir, "backup", "ckpt-000000006"))

    results = train_module.run_training("lstm-tiny", run_dir, overrides, log=lambda *_: None)
    assert results["steps"] == MAX_STEPS
    assert [step for step, _ in results["dev_bleu_history"]] == sorted(SCORES)
    assert _steps(os.path.join(run_dir, "bleu.jsonl"), "step") == sorted(SCORES)
    assert _steps(os.path.join(run_dir, "loss_curves.csv")) == list(range(1, MAX_STEPS + 1))
    # One row per epoch although epochs 3 and 5 were written twice (issue 36).
    assert _epochs(run_dir) == [str(epoch) for epoch in range(MAX_STEPS // 3)]
    with open(best_file, "rb") as f:
        assert f.read() == best_bytes
    backups = sorted(os.listdir(os.path.join(run_dir, "backup")))
    assert backups == ["ckpt-000000006", f"ckpt-{MAX_STEPS:09d}"]
    # The final model is the best one (step 6), not the last.
    import keras

    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
    final = model.get_weights()
    model.load_weights(best_file)
    assert all(np.array_equal(a, b) for a, b in zip(final, model.get_weights()))


@pytest.mark.slow  # four CLI trainings
def test_a_finished_run_is_not_trained_again(corpus, tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    base = ["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", corpus,
            "--set", "data.vocab_size=300", "--set", "train.steps_per_epoch=3",
            "--set", "train.epochs=100", "--set", "decode.max_length_offset=3"]
    cli.main(base + ["--max-steps", "6"])
    # The progress bar shows the step budget, not Keras' "Epoch 1/100".
    output = capsys.readouterr().out
    assert "Epoch 1 · step 0 of 6" in output and "Epoch 2 · step 3 of 6" in output
    assert "Epoch 1/100" not in output
    model_file = os.path.join(run_dir, "model.keras")
    stamp = os.stat(model_file).st_mtime_ns
    with open(os.path.join(run_dir, "loss_curves.csv")) as f:
        curves = f.read()
    capsys.readouterr()
    for max_steps in ("6", "4"):  # at, then below, the step reached
        cli.main(base + ["--max-steps", max_steps])
        assert "is already trained to step 6" in capsys.readouterr().out
    # Without --preset: the run directory's own preset (lstm-tiny, its overrides).
    cli.main(["train", "--run-dir", run_dir, "--max-steps", "6"])
    assert "nothing to do" in capsys.readouterr().out
    assert os.stat(model_file).st_mtime_ns == stamp
    with open(os.path.join(run_dir, "loss_curves.csv")) as f:
        assert f.read() == curves
    # A resume without --preset trains on with the stored settings.
    cli.main(["train", "--run-dir", run_dir, "--max-steps", "8"])
    with open(os.path.join(run_dir, "results.json")) as f:
        assert json.load(f)["steps"] == 8
    with open(os.path.join(run_dir, "run.json")) as f:
        stored = json.load(f)
    assert stored["preset"] == "lstm-tiny" and stored["data"]["vocab_size"] == 300


@pytest.mark.slow  # two CLI trainings
def test_a_run_directory_of_preset_json_loads_translates_and_resumes(corpus, tmp_path, capsys):
    # Run directories written before run.json hold preset.json (the preset's name under
    # "name"): they load, translate as before, and resume; the resume stores run.json.
    run_dir = tmp_path / "run"
    base = ["train", "--preset", "lstm-tiny", "--run-dir", str(run_dir), "--corpus", corpus,
            "--set", "data.vocab_size=300", "--set", "train.steps_per_epoch=3",
            "--set", "train.epochs=100", "--set", "decode.max_length_offset=3"]
    cli.main(base + ["--max-steps", "3"])
    capsys.readouterr()
    source = tmp_path / "source.txt"
    source.write_text("En el principio creó Dios los cielos y la tierra.\nY dijo Dios.\n",
                      encoding="utf-8")
    translate = ["translate", "--run-dir", str(run_dir), "--input", str(source),
                 "--beam-size", "2"]
    cli.main(translate)
    expected = capsys.readouterr().out
    _, config = runs.stored_run(str(run_dir))
    stored = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    (run_dir / "preset.json").write_text(json.dumps({"name": stored.pop("preset"), **stored}),
                                         encoding="utf-8")
    (run_dir / "run.json").unlink()
    assert runs.stored_run(str(run_dir)) == ("lstm-tiny", config)
    assert runs.load_run(str(run_dir))[3] == config
    cli.main(translate)
    assert capsys.readouterr().out == expected
    cli.main(["train", "--run-dir", str(run_dir), "--max-steps", "6"])  # its own settings
    with open(run_dir / "results.json", encoding="utf-8") as f:
        assert json.load(f)["steps"] == 6
    assert not (run_dir / "preset.json").exists()
    assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["preset"] == "lstm-tiny"
    assert runs.stored_run(str(run_dir))[1] == config.with_overrides({"train.max_steps": 6})


def _contents(directory):
    """`{path: bytes}` of every file below `directory`."""
    contents = {}
    for root, _, files in os.walk(directory):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                contents[os.path.join(root, name)] = f.read()
    return contents


@pytest.mark.slow  # CLI training end to end (issue 37: CI runs it)
def test_a_refused_train_leaves_the_run_as_it_was(corpus, tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", corpus,
              "--max-steps", "3", "--set", "data.vocab_size=300",
              "--set", "train.steps_per_epoch=3", "--set", "decode.max_length_offset=3"])
    before = _contents(run_dir)
    capsys.readouterr()
    for argv in (["--preset", "lstm-cpu-tied"],  # another preset
                 ["--preset", "lstm-tiny", "--set", "data.vocab_size=500"],
                 ["--set", "model.head=softmax"]):  # the stored preset, another head
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["train", "--run-dir", run_dir, "--corpus", corpus] + argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert run_dir in err and "lstm-tiny" in err and "Nothing was changed" in err
    assert _contents(run_dir) == before
    # The run still translates with its own tokenizer.
    source = tmp_path / "source.txt"
    source.write_text("En el principio creó Dios los cielos y la tierra.\n", encoding="utf-8")
    cli.main(["translate", "--run-dir", run_dir, "--input", str(source)])


def test_a_second_trainer_on_the_same_directory_is_refused(tmp_path):
    run_dir = str(tmp_path / "run")
    with runs.run_directory_lock(run_dir):
        with pytest.raises(runs.RunDirectoryError,
                           match=rf"in use by another tf-outheads process \(pid {os.getpid()}"):
            with runs.run_directory_lock(run_dir):
                pass
    with runs.run_directory_lock(run_dir):  # released
        pass


def _text_sets(directory):
    """`data.train/dev/test` overrides naming `write_text_files`' files in `directory`."""
    return {f"data.{split}": value for split, value in text_data(directory).items()}


def test_a_resume_after_a_data_file_changed_is_refused_naming_it(corpus, tmp_path):
    directory = write_text_files(corpus, str(tmp_path / "text"))
    data = preset_config("lstm-tiny", _overrides(corpus, **_text_sets(directory))).data
    run_dir = tmp_path / "run"
    os.makedirs(run_dir / "backup" / "ckpt-000000003")  # it holds a run
    logged = []
    recorded = runs.check_data_fingerprints(str(run_dir), data, log=logged.append)
    # A run of older code has no fingerprints: resumed, and they are recorded from then on.
    assert len(logged) == 1 and "before data files were fingerprinted" in logged[0]
    assert {entry["key"] for entry in recorded["files"].values()} == {
        "data.train.source", "data.train.target", "data.dev.source", "data.dev.target",
        "data.test.source", "data.test.target", "data.test.references[0]"}
    (run_dir / runs.DATA_FILES).write_text(json.dumps(recorded), encoding="utf-8")
    # Touched, same bytes: accepted with one line.
    source = os.path.join(directory, "train.es")
    stamp = os.stat(source).st_mtime + 60
    os.utime(source, (stamp, stamp))
    logged.clear()
    assert runs.check_data_fingerprints(str(run_dir), data, log=logged.append)
    assert len(logged) == 1 and source in logged[0] and "modification time" in logged[0]
    # One line made longer (same line count): the backup's byte positions would
    # pair sources with other lines' targets.
    size = os.path.getsize(source)
    lengthen_line(source, 9)
    with pytest.raises(runs.RunDirectoryError) as error:
        runs.check_data_fingerprints(str(run_dir), data, log=logged.append)
    message = str(error.value)
    assert f"{source} (data.train.source) changed" in message
    assert f"size {size:,} -> {size + 5:,} bytes" in message
    assert "new run directory (another --run-dir)" in message


@pytest.mark.slow  # one tiny training, 30 s on a busy 2-core machine
def test_a_text_file_run_says_what_stopped_it_and_refuses_a_resume_once_a_line_grew(
        corpus, tmp_path, capsys):
    directory = write_text_files(corpus, str(tmp_path / "text"))
    run_dir = str(tmp_path / "run")
    logged = []
    # 3 steps asked, 1 epoch of 2 steps: the epochs budget stops the run, and says so.
    results = train_module.run_training("lstm-tiny", run_dir, _overrides(
        corpus, **_text_sets(directory), **{"train.max_steps": 3, "train.epochs": 1,
                                            "train.steps_per_epoch": 2}), log=logged.append)
    assert results["steps"] == 2 and results["stopped_by"] == "epochs"
    with open(os.path.join(run_dir, "results.json"), encoding="utf-8") as f:
        assert json.load(f)["stopped_by"] == "epochs"
    assert any("the epochs budget stops this run at step 2" in line for line in logged)
    assert "[train] stopped at step 2 by its epochs budget (train.epochs × " \
           "train.steps_per_epoch = 1 × 2 steps)" in logged
    with open(os.path.join(run_dir, runs.DATA_FILES), encoding="utf-8") as f:
        assert os.path.join(directory, "train.es") in json.load(f)["files"]
    before = _contents(run_dir)
    lengthen_line(os.path.join(directory, "train.es"), 9)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--run-dir", run_dir, "--set", "train.epochs=2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"{os.path.join(directory, 'train.es')} (data.train.source) changed" in err
    assert _contents(run_dir) == before


def test_a_missing_data_file_is_refused_before_anything_is_written(corpus, tmp_path, capsys):
    directory = write_text_files(corpus, str(tmp_path / "text"))
    typo = {"source": os.path.join(directory, "train.ES"),
            "target": os.path.join(directory, "train.en.gz")}
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--preset", "lstm-tiny", "--run-dir", str(run_dir),
                  "--corpus", corpus, "--set", f"data.train={json.dumps(typo)}"])
    assert exit_info.value.code == 2
    assert not run_dir.exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"data.train.source: {typo['source']}: no such file" in err


def test_a_preset_file_without_a_tokenizer_or_backup_takes_new_settings(corpus, tmp_path,
                                                                        capsys):
    # What a first start that failed left (before data files were checked first).
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = get_preset("lstm-tiny", _overrides(corpus, **{"data.vocab_size": 500}))
    (run_dir / "preset.json").write_text(json.dumps({"name": "lstm-tiny", **first}),
                                         encoding="utf-8")
    name, config = runs.resolve_run_config("lstm-tiny", str(run_dir), _overrides(corpus))
    assert config.data.vocab_size == 300
    logged = capsys.readouterr().out.splitlines()
    assert len(logged) == 1 and "data.vocab_size" in logged[0] and "replace" in logged[0]
    # With a tokenizer, it is a run: other settings are refused as before.
    (run_dir / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(runs.RunDirectoryError, match="holds a run of preset"):
        runs.resolve_run_config("lstm-tiny", str(run_dir), _overrides(corpus))


def test_a_step_budget_beyond_the_epochs_budget_is_reported():
    train = preset_config("lstm-tiny", {"train.max_steps": 60, "train.epochs": 20,
                                        "train.steps_per_epoch": 2}).train
    note = train_module.smaller_epochs_budget(train)
    assert note.startswith("train.max_steps 60 is more than train.epochs × "
                           "train.steps_per_epoch = 20 × 2 = 40 steps")
    assert "stops this run at step 40" in note
    assert train_module.smaller_epochs_budget(dataclasses.replace(train, max_steps=40)) is None
    assert train_module.smaller_epochs_budget(dataclasses.replace(train, max_steps=None)) is None


def test_a_run_of_the_embedded_corpus_resumes_from_another_installation(tmp_path):
    """`run.json` holds the embedded corpus's path in the installation that trained (a
    checkout since moved, another venv): it reads as this installation's, and the
    recorded fingerprint still guards the resume."""
    from tf_outheads_zoo.config import EMBEDDED_CORPUS
    from tf_outheads_zoo.stored import read_stored_run

    run_dir = tmp_path / "run"
    os.makedirs(run_dir / "backup" / "ckpt-000000003")  # it holds a run
    elsewhere = os.path.join("/old/checkout", *EMBEDDED_CORPUS.split(os.sep)[-3:])
    stored = get_preset("lstm-tiny")
    stored["data"]["corpus"] = elsewhere
    (run_dir / "run.json").write_text(json.dumps({"preset": "lstm-tiny", **stored}))
    name, config = read_stored_run(str(run_dir / "run.json"))
    assert name == "lstm-tiny" and config.data.corpus == EMBEDDED_CORPUS
    # Resuming with the preset's settings: nothing differs.
    assert runs.resolve_run_config("lstm-tiny", str(run_dir), {})[1] == config
    other = dict(stored["data"], corpus="/old/checkout/my-corpus.tsv.gz")
    (run_dir / "run.json").write_text(json.dumps({"preset": "lstm-tiny", **stored,
                                                  "data": other}))
    assert read_stored_run(str(run_dir / "run.json"))[1].data.corpus == other["corpus"]
    recorded = {"files": {elsewhere: {
        "key": "data.corpus", **runs.tfo_data.file_fingerprint(EMBEDDED_CORPUS)}}}
    (run_dir / runs.DATA_FILES).write_text(json.dumps(recorded), encoding="utf-8")
    checked = runs.check_data_fingerprints(str(run_dir), config.data, log=lambda *_: None)
    assert list(checked["files"]) == [EMBEDDED_CORPUS]
    recorded["files"][elsewhere]["sha256"] = "0" * 64  # other bytes: refused
    (run_dir / runs.DATA_FILES).write_text(json.dumps(recorded), encoding="utf-8")
    with pytest.raises(runs.RunDirectoryError, match=r"\(data.corpus\) changed since"):
        runs.check_data_fingerprints(str(run_dir), config.data, log=lambda *_: None)
