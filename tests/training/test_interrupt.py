"""Ctrl-C (SIGINT) while `tf_outheads.training.fit` trains with a backup directory
(issue 54): handled as a scheduler's SIGTERM (the step ends, a backup of it is written,
`TrainingPreempted` says it was interrupted; the same call resumes), a second Ctrl-C
interrupts at once, an ignored SIGINT stays ignored; the CLI's one `stopped:` line and
exit status 130."""

import os
import signal

import keras
import pytest

from tests.training.test_trainer import BATCHES, _dataset, _model
from tf_outheads import training
from tf_outheads.training import BackupManager
from tf_outheads_zoo import cli, commands


class _CtrlC(keras.callbacks.Callback):
    """Sends this process SIGINT as step `step` begins, and with `twice` again as it
    ends (a second Ctrl-C before the run could stop)."""

    def __init__(self, step, twice=False):
        super().__init__()
        self.step, self.twice, self.begun = step, twice, 0

    def on_train_batch_begin(self, batch, logs=None):
        self.begun += 1
        if self.begun == self.step:
            os.kill(os.getpid(), signal.SIGINT)

    def on_train_batch_end(self, batch, logs=None):
        if self.twice and logs["step"] == self.step:
            os.kill(os.getpid(), signal.SIGINT)


def _fit(model, backup_dir, callbacks=()):
    return training.fit(model, _dataset(BATCHES), epochs=2, steps_per_epoch=3, verbose=0,
                        backup_dir=backup_dir, backup_every_n_steps=100,
                        callbacks=list(callbacks))


def test_ctrl_c_backs_up_the_step_and_the_same_call_resumes(tmp_path):
    # No periodic backup before step 5 (every 100 steps, and the epoch's end at step 3):
    # the step Ctrl-C fell in is backed up, the handlers are put back.
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(training.TrainingPreempted) as caught:
            _fit(_model(), tmp_path, [_CtrlC(5)])
    except KeyboardInterrupt:  # (uncaught, it would end the whole test session)
        pytest.fail("Ctrl-C ended the training at once, without a backup")
    error = caught.value
    assert error.step == 5 and error.signal == signal.SIGINT
    assert str(error).startswith("interrupted by Ctrl-C (SIGINT) after step 5; backup ")
    assert str(error).endswith("ckpt-000000005 written: the same command resumes from it")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert [step for step, _ in BackupManager(tmp_path).checkpoints()] == [3, 5]
    steps = []
    resumed = _model()
    _fit(resumed, tmp_path, [keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: steps.append(logs["step"]))])
    assert steps == [6] and int(resumed.optimizer.iterations.numpy()) == 6


def test_a_second_ctrl_c_interrupts_at_once(tmp_path):
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        _fit(_model(), tmp_path, [_CtrlC(2, twice=True)])
    assert signal.getsignal(signal.SIGINT) is handler
    assert not BackupManager(tmp_path).checkpoints()  # stopped before any backup


def test_an_ignored_sigint_stays_ignored(tmp_path):
    # A process started in the background (`cmd &`) ignores SIGINT: it trains on.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        model = _model()
        _fit(model, tmp_path, [_CtrlC(2)])
        assert int(model.optimizer.iterations.numpy()) == 6
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum, status, words", [
    (signal.SIGINT, 130, "interrupted by Ctrl-C (SIGINT) after step 7"),
    (signal.SIGTERM, 143, "stopped by SIGTERM after step 7"),
])
def test_the_cli_says_stopped_in_one_line_with_the_signals_exit_status(
        monkeypatch, capsys, signum, status, words):
    def train(args):
        raise training.TrainingPreempted(7, "r/backup/ckpt-000000007", signum)

    monkeypatch.setattr(commands, "train", train)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--run-dir", "r"])
    err = capsys.readouterr().err
    assert exit_info.value.code == status
    assert err == (f"stopped: {words}; backup r/backup/ckpt-000000007 written: the same "
                   "command resumes from it\n")
