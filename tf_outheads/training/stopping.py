"""How training stops between two steps: on a signal, and on every worker at once.

With a backup directory, SIGTERM (a scheduler's preemption) and Ctrl-C (SIGINT) do
not end the process: :class:`SignalFlag` notes them, the step that runs ends, the
trainer writes a backup of it and raises :class:`TrainingPreempted`, and the same
call resumes from that backup. In a multi-worker job, :func:`agree_to_stop` makes
every worker stop at the same step, whoever got the signal or decided to stop.
"""

import signal
import threading

import tensorflow as tf

from tf_outheads.training.strategy import num_workers

__all__ = ["SignalFlag", "TrainingPreempted", "agree_to_stop"]


class TrainingPreempted(Exception):
    """The process got SIGTERM (a scheduler's preemption, `kill`) or SIGINT (Ctrl-C):
    training stopped at a step boundary after writing a backup, from which the same call
    resumes.

    Attributes:
        step: int, the last step trained (the backup's).
        backup: str or `None`, the backup written.
        signal: `signal.Signals`, the signal received (`SIGTERM` when another worker
            of a multi-worker job got it).

    `message`: what to say instead of the training's own words (a job of several runs
    names the run it stopped).
    """

    def __init__(self, step, backup, signum=signal.SIGTERM, message=None):
        self.step, self.backup = int(step), backup
        self.signal = signal.Signals(signum)
        super().__init__(message or (
            ("interrupted by Ctrl-C (SIGINT)" if self.signal == signal.SIGINT
             else f"stopped by {self.signal.name}") + f" after step {self.step}; "
            + (f"backup {backup} written: " if backup else "")
            + "the same command resumes from it"))


class SignalFlag:
    """While active, SIGTERM and SIGINT set `received` (the first one's number) instead
    of ending the process (main thread only: Python runs signal handlers there); the
    previous handlers come back after. A second SIGINT goes to the previous handler at
    once (Python's: `KeyboardInterrupt`), as a second Ctrl-C should; an ignored SIGINT
    (a process started in the background) stays ignored."""

    def __init__(self, enabled):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received = None
        self._previous = {}

    def __enter__(self):
        if self.enabled:
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
            if signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, None):
                self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        del frame
        self.received = self.received or signum
        if signum == signal.SIGINT:  # the next Ctrl-C interrupts at once
            signal.signal(signum, self._previous[signum])

    def __exit__(self, *exc_info):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        return False


def agree_to_stop(model, strategy, terminated=False):
    """In a multi-worker job every worker stops at the same step; returns whether
    any worker got SIGTERM (`terminated`), which stops them all too (sets
    `model.stop_training`).

    A callback's decision may differ between workers (a wall-clock limit),
    and a scheduler may signal one worker first; a worker that stopped alone
    would leave the others waiting in the next step's collectives. One
    all-reduce (sum) of the two flags per step.
    """
    if num_workers(strategy) >= 2:
        flags = tf.constant([float(bool(model.stop_training)), float(terminated)])
        values = strategy.experimental_distribute_values_from_function(
            lambda context: flags)
        summed = strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None).numpy()
        model.stop_training, terminated = bool(summed[0] > 0), bool(summed[1] > 0)
    if terminated:
        model.stop_training = True
    return terminated
