"""How a study fails and stops (issue 54): bad settings refused before any run trains, a
failed or locked run said in one line, and its training ended with it when the study is
stopped (SIGTERM, SIGINT) or killed (kill -9). Fake `train` commands (small Python
scripts) stand in for the trainings: each test takes seconds."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tf_outheads_zoo.errors import _is_user_error, error_message
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.study import Arm, Study, runner
from tf_outheads_zoo.study.process import StudyRunError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Fake trainings, given their run directory: one finishes, one fails, one trains until
# SIGTERM, then writes a "backup" and exits with status 143, as the trainer does.
FINISHES = "import os, sys; open(os.path.join(sys.argv[1], 'results.json'), 'w').write('{}')"
FAILS = ("print('Traceback (most recent call last):'); "
         "print('ValueError: model.hidden_dim must be >= 1'); raise SystemExit(1)")
TRAINS_UNTIL_SIGTERM = """
import os, signal, sys, time
run_dir = sys.argv[1]
def stop(signum, frame):
    open(os.path.join(run_dir, "backup"), "w").write("step 3")
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
open(os.path.join(run_dir, "started"), "w").write(str(os.getpid()))
time.sleep(30)
"""


def _study(seeds=(1, 2), b_settings=(("model.dropout", 0.0),), b_seeds=None):
    return Study(title="Toy", paper="", baseline="a", steps=4, eval_every=2, seeds=seeds,
                 arms={"a": Arm("lstm-tiny"), "b": Arm("lstm-tiny", b_settings, seeds=b_seeds)})


@pytest.fixture()
def fake_train(tmp_path, monkeypatch):
    """`fake_train(script)`: the study's runs start `script` instead of `tf-outheads
    train`; returns the run directories started (no tokenizer, no scoring)."""
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    monkeypatch.setattr(runner, "tokenizer_dir", lambda *args, **kwargs: str(tokenizer))
    monkeypatch.setattr(runner, "score_run", lambda run_dir, log: None)
    monkeypatch.setattr(runner, "_run_progress", lambda run_dir, study: "step 4/4")
    started = []

    def use(script):
        def train_command(preset, run_dir, overrides):
            started.append(run_dir)
            return [sys.executable, "-c", script, run_dir]

        monkeypatch.setattr(runner, "train_command", train_command)
        return started

    return use


def _run(study, runs_dir, **kwargs):
    return runner.run_study("toy", str(runs_dir), study=study, log=lambda *_: None, **kwargs)


@pytest.mark.parametrize("study, steps, message", [
    (_study(b_settings=(("model.hidden_dim", "abc"),)), None,
     ("study toy: arms.b: preset 'lstm-tiny': model.hidden_dim must be int. "
      "Received: model.hidden_dim='abc'")),
    (_study(b_settings=(("model.hidden_dimm", 3),)), None,
     ("study toy: arms.b: preset 'lstm-tiny': unknown setting model.hidden_dimm; did you "
      "mean model.hidden_dim?")),
    # The run keys the study adds: `--steps -5` is the runs' train.max_steps.
    (_study(), -5, "study toy: arms.a: preset 'lstm-tiny': train.max_steps must be >= 1"),
])
def test_a_bad_setting_of_any_arm_is_refused_before_any_run_trains(
        tmp_path, fake_train, study, steps, message):
    """The probe's arm `set: {model.hidden_dim: -3}` trained the first arm's run, then
    ended in a traceback: every arm's settings, with the run keys, are checked first."""
    started = fake_train(FINISHES)
    with pytest.raises(ConfigError) as error:
        _run(study, tmp_path / "runs", steps=steps)
    assert str(error.value).startswith(message)
    assert started == [] and not (tmp_path / "runs").exists()  # nothing trained or written


def test_repeated_seeds_are_refused_naming_the_key_and_the_seed(tmp_path, fake_train):
    started = fake_train(FINISHES)
    for study, seeds, message in [
            (_study(seeds=(1, 1)), None, "seeds must name each seed once; repeated: 1 "),
            (_study(b_seeds=(3, 4, 3)), None,
             "arms.b.seeds must name each seed once; repeated: 3 "),
            (_study(), [2, 1, 2], "--seeds must name each seed once; repeated: 2 ")]:
        with pytest.raises(ConfigError) as error:
            _run(study, tmp_path / "runs", seeds=seeds)
        assert str(error.value).startswith(message)
    assert started == [] and not (tmp_path / "runs").exists()


def test_a_failed_training_is_one_line_naming_the_arm_seed_exit_status_and_log(
        tmp_path, fake_train):
    started = fake_train(FAILS)
    with pytest.raises(StudyRunError) as error:
        _run(_study(), tmp_path / "runs")
    log = os.path.join(tmp_path, "runs", "a", "s1", "train.log")
    assert str(error.value) == (
        "arm a seed 1: tf-outheads train failed with exit status 1; it said: ValueError: "
        f"model.hidden_dim must be >= 1. Its log: {log}")
    # `tf-outheads` prints it as one `error: ...` line (exit status 2), not a traceback.
    assert _is_user_error(error.value) and "\n" not in error_message(error.value)
    assert started == [os.path.dirname(log)]


def test_a_run_directory_another_process_trains_in_is_one_line(tmp_path, fake_train):
    """A rerun while the training of a killed study still runs (holding its run
    directory's lock) says so, and starts nothing."""
    from tf_outheads_zoo.runs import run_directory_lock

    started = fake_train(FINISHES)
    run_dir = os.path.join(tmp_path, "runs", "a", "s1")
    with run_directory_lock(run_dir), pytest.raises(StudyRunError) as error:
        _run(_study(), tmp_path / "runs")
    assert str(error.value).startswith(
        f"arm a seed 1: {run_dir} is in use by another process (pid {os.getpid()}; lock ")
    assert "run the same command again" in str(error.value) and started == []


def test_a_study_goes_on_from_its_records_where_its_runs_are_gone(tmp_path, fake_train,
                                                                  monkeypatch):
    """A fresh machine has the committed records, not the runs: a complete record of the
    study's settings comes back as a finished run (nothing trains), with the seed plan;
    a record without forced-decoding scores, or of other settings, trains again."""
    study, records, runs = _study(), tmp_path / "records", tmp_path / "runs"

    def record(arm, seed, scored=True, **changed):
        directory = records / arm / f"s{seed}"
        directory.mkdir(parents=True)
        settings = {**runner.run_settings(study, arm, seed), **changed}
        (directory / runner.SETTINGS_FILE).write_text(json.dumps(settings))
        (directory / "results.json").write_text('{"steps": 4}')
        (directory / "dev.hyp").write_text(f"{arm} {seed}\n")
        if scored:
            (directory / runner.CROSS_ENTROPY_FILE).write_text("{}")

    record("a", 1)
    record("b", 1)
    record("a", 2, scored=False)  # recorded before forced scoring
    record("b", 2, budget={"steps": 9})  # another budget
    (runs / "a" / "s1.tmp").mkdir(parents=True)  # what an interrupted restore left
    (runs / "a" / "s1.tmp" / "stale").write_text("")
    (records / runner.PLAN_FILE).write_text(json.dumps(
        {"seeds": {"a": [1, 2], "b": [1, 2]}, "started": "at first", "added": []}))
    monkeypatch.setattr(runner, "record_run", lambda *args, **kwargs: None)
    started, messages = fake_train(FINISHES), []
    runner.run_study("toy", str(runs), study=study, log=messages.append,
                     records_dir=str(records))
    assert sorted(started) == [str(runs / "a" / "s2"), str(runs / "b" / "s2")]
    assert (runs / "b" / "s1" / "dev.hyp").read_text() == "b 1\n"
    assert not (runs / "a" / "s1" / "stale").exists()
    assert json.loads((runs / runner.PLAN_FILE).read_text())["started"] == "at first"
    text = "\n".join(messages)
    assert "2 finished run(s) restored from their records" in text
    assert f"{records / 'b' / 's2'}: not restored ({records / 'b' / 's2'} was trained " in text
    assert not list(runs.glob("*/*.tmp"))


def _when_started(run_dir, action, deadline=20.0):
    """Calls `action()` in a thread once the fake training in `run_dir` has started."""
    def wait():
        end = time.monotonic() + deadline
        while not os.path.exists(os.path.join(run_dir, "started")):
            if time.monotonic() > end:
                return
            time.sleep(0.05)
        action()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_stops_the_study_after_its_training_wrote_its_backup(
        tmp_path, fake_train, signum):
    from tf_outheads.training.stopping import TrainingPreempted

    started = fake_train(TRAINS_UNTIL_SIGTERM)
    run_dir = os.path.join(tmp_path, "runs", "a", "s1")
    before = signal.getsignal(signum)

    def stop():
        if signal.getsignal(signum) is before:  # no handler of the study: fail, not die
            with open(os.path.join(run_dir, "started")) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signum)

    thread = _when_started(run_dir, stop)
    with pytest.raises(TrainingPreempted) as error:
        _run(_study(), tmp_path / "runs")
    thread.join()
    # One `stopped: ...` line of `tf-outheads` (exit status 143) naming the run.
    name = signal.Signals(signum).name
    assert str(error.value) == (f"study toy stopped by {name}: run 1/4 (arm a seed 1, "
                                f"{run_dir}) was interrupted; the same command resumes it")
    assert error.value.signal == signum  # the exit status: 143, or 130 after Ctrl-C
    # The training got SIGTERM, wrote its backup and ended before the study did.
    with open(os.path.join(run_dir, "backup")) as f:
        assert f.read() == "step 3"
    assert started == [run_dir] and signal.getsignal(signum) is before


def _ended(pid):
    """Whether process `pid` has ended (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG: Linux")
def test_a_study_killed_by_sigkill_takes_its_training_with_it(tmp_path):
    """kill -9 of the study cannot be caught: its training gets SIGTERM from the kernel
    (PR_SET_PDEATHSIG), writes its backup and ends, instead of training on under PID 1."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    study = ("import sys\n"
             "from tf_outheads_zoo.study.process import run_child\n"
             "run_child([sys.executable, '-c', sys.argv[1], sys.argv[2]], sys.argv[3], 'run')\n")
    process = subprocess.Popen([sys.executable, "-c", study, TRAINS_UNTIL_SIGTERM,
                                str(run_dir), str(run_dir / "train.log")], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not (run_dir / "started").exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    child = int((run_dir / "started").read_text())
    assert os.getpgid(child) == child != os.getpgid(process.pid)  # its own process group
    process.kill()
    process.wait()
    deadline = time.monotonic() + 20
    while not _ended(child):
        assert time.monotonic() < deadline, "the training outlived the study"
        time.sleep(0.05)
    assert (run_dir / "backup").read_text() == "step 3"
