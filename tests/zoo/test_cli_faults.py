"""Faults a training run meets on a real machine, through the CLI in a subprocess:
a scheduler's SIGTERM, a full disk. Each ends in one line, never a traceback."""

import csv
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from tests.corpus import write_corpus_slice

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 600, 30, 30)


def _train_command(run_dir, corpus, *extra):
    return [sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", "lstm-tiny",
            "--run-dir", str(run_dir), "--corpus", corpus, "--set", "data.vocab_size=400",
            "--set", "decode.max_length_offset=3", *extra]


def _epochs(run_dir):
    with open(os.path.join(run_dir, "history.csv"), newline="") as f:
        return [row["epoch"] for row in csv.DictReader(f)]


@pytest.mark.slow  # two CLI trainings in subprocesses
def test_sigterm_writes_a_backup_and_the_same_command_resumes_from_it(small_corpus, tmp_path):
    # No periodic backup before the signal (every 1,000 steps): what the run trained
    # since its start would be lost without the handler's backup.
    run_dir = tmp_path / "run"
    command = _train_command(run_dir, small_corpus, "--max-steps", "30", "--set",
                             "train.steps_per_epoch=4", "--set",
                             "train.backup_every_n_steps=1000", "--set", "train.epochs=8")
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    curves = run_dir / "loss_curves.csv"
    deadline = time.time() + 300
    while not (curves.exists() and len(curves.read_text().splitlines()) >= 7):  # 6 steps
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "Traceback" not in err
    stopped = [line for line in err.splitlines() if line.startswith("stopped:")]
    assert len(stopped) == 1 and "stopped by SIGTERM after step" in stopped[0], err
    step = int(stopped[0].split("after step ")[1].split(";")[0])
    assert step >= 6 and os.path.isdir(run_dir / "backup" / f"ckpt-{step:09d}")
    assert not (run_dir / "model.keras").exists()  # not a finished run

    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"[backup] resumed from step {step} " in resumed.stdout
    assert (run_dir / "model.keras").exists()
    # One row per epoch, none twice, although epoch 2 (steps 5-8) was split by the signal.
    epochs = _epochs(run_dir)
    assert epochs == [str(epoch) for epoch in range(len(epochs))] and len(epochs) >= 7


@pytest.mark.slow  # a CLI training in a subprocess
def test_a_full_disk_ends_in_one_error_line(small_corpus, tmp_path):
    # A file-size limit of 1 MiB (what a full disk does to a write, without root): the
    # first backup cannot be written; CPython ignores SIGXFSZ, so the write fails.
    run_dir = tmp_path / "run"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    result = subprocess.run(
        _train_command(run_dir, small_corpus, "--max-steps", "12", "--set",
                       "train.steps_per_epoch=6", "--set", "train.backup_every_n_steps=4"),
        cwd=REPO, capture_output=True, text=True, timeout=600, preexec_fn=limit)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "File too large" in lines[0], result.stderr
    assert str(run_dir / "backup") in lines[0] and "run the same command again" in lines[0]
    assert not (run_dir / "backup" / "ckpt-000000004").exists()  # no half backup


@pytest.mark.slow  # three short trainings (~20-50 s)
def test_a_truncated_best_weights_file_is_named_with_what_to_do(small_corpus, tmp_path,
                                                                 capsys):
    from tf_outheads_zoo import cli

    run_dir = tmp_path / "run"
    command = _train_command(run_dir, small_corpus, "--max-steps", "2",
                             "--set", "train.steps_per_epoch=1")[3:]
    cli.main(command)
    best = run_dir / "checkpoints" / "best.weights.h5"
    best.write_bytes(best.read_bytes()[:1000])  # truncated
    for name in ("results.json", "model.keras"):  # as if stopped before its end
        (run_dir / name).unlink()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(command)
    assert exit_info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and f"{best}: damaged" in err[0] and "delete it" in err[0], err
    best.unlink()
    cli.main(command)  # the advice works: the run ends with its last weights
    assert (run_dir / "model.keras").exists()
