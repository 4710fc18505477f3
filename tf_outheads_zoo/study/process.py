"""The subprocesses of a study's runs (`tf-outheads train`, `translate`), and how the study
ends with them (issue 54).

Each child runs in its own process group (a terminal's Ctrl-C reaches the study alone),
with its output appended to a log (`train.log`). While `stop_on_signals` is active (the
whole of `runner.run_study`), SIGTERM or SIGINT of the study is forwarded to the child's
group as SIGTERM and the study waits for it (the trainer writes a backup and exits with
status 143), then `Interrupted` is raised, for the study to stop in one line. On Linux a
child also gets SIGTERM when the study dies by kill -9 (`PR_SET_PDEATHSIG`), so no
training is left running under PID 1. A child that fails raises `StudyRunError`, one
line naming the run, its exit status and its log.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading

from tf_outheads_zoo.errors import PREEMPTED_EXIT_STATUS

# Run by the child before its command, on Linux: SIGTERM when the study's process dies,
# even by kill -9 (the trainer then writes its backup); ended at once if the study died
# before the setting took. In the child's own interpreter, not in a `preexec_fn`:
# Python code between fork and exec may deadlock in a process with threads
# (TensorFlow's, once the study has scored a run). argv: the study's PID, the command.
_DIE_WITH_THE_STUDY = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(128 + signal.SIGTERM)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n")

# The child of `run_child` that is running, for `stop_on_signals`' handler.
_running = [None]


class StudyRunError(ValueError):
    """A run of a study that failed, or whose directory another process trains in: a
    `ValueError`, which `tf-outheads` prints as one `error: ...` line (`errors.user_errors`)."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT stopped the study (`stop_on_signals`); `signal_name` says which.
    A `BaseException`, as `KeyboardInterrupt`: no `except Exception` on its way takes it."""

    def __init__(self, signum):
        self.signal_name = signal.Signals(signum).name
        super().__init__(self.signal_name)


def _terminate(child):
    """SIGTERM to `child`'s process group (its own: `start_new_session`)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)


@contextlib.contextmanager
def stop_on_signals():
    """While the block runs, SIGTERM and SIGINT stop it with `Interrupted`: after the
    running child (`run_child`) has ended on the SIGTERM forwarded to it, or at once when
    none runs. Signal handlers are the main thread's: elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum, frame):
        del frame
        child = _running[0]
        if child is None:
            raise Interrupted(signum)
        child.interrupted = signum  # `run_child` raises once the child has ended
        _terminate(child)

    previous = {signum: signal.signal(signum, handle)
                for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _last_line(path):
    """The last non-empty line of a log, shortened (what the child said last)."""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 4000))
        lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines()
                 if line.strip()]
    return (lines[-1][:200] + ("..." if len(lines[-1]) > 200 else "")) if lines else ""


def run_child(command, log_path, what, env=None, cwd=None):
    """Runs `command` to its end in its own process group, its output appended to
    `log_path`; `what` names it in the errors (`arm tied seed 1: tf-outheads train`).

    Raises:
        Interrupted: SIGTERM or SIGINT reached the study (`stop_on_signals`); the child got
            SIGTERM and has ended.
        StudyRunError: the child failed; the message names `what`, its exit status (or the
            signal that killed it), its last line and `log_path`.
    """
    if sys.platform.startswith("linux"):
        command = [sys.executable, "-c", _DIE_WITH_THE_STUDY, str(os.getpid()), *command]
    with open(log_path, "a", encoding="utf-8") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 cwd=cwd, start_new_session=True)
    child.interrupted = None
    _running[0] = child
    try:
        status = None
        while status is None:  # in steps: the study's signal handlers run in between
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = child.wait(timeout=1.0)
    finally:
        _running[0] = None
        if child.poll() is None:  # the study ends on an error: its child with it
            _terminate(child)
            child.wait()
    if child.interrupted:
        raise Interrupted(child.interrupted)
    if status:
        ended = (f"was killed by signal {_signal_name(-status)}" if status < 0
                 else f"failed with exit status {status}"
                 + (" (stopped by SIGTERM after writing its backup: the same command "
                    "resumes it)" if status == PREEMPTED_EXIT_STATUS else ""))
        last = _last_line(log_path)
        raise StudyRunError(f"{what} {ended}" + (f"; it said: {last}" if last else "")
                            + f". Its log: {log_path}")


def check_not_in_use(run_dir, what):
    """Refuses a run directory that another live process trains in (its `.lock`,
    `runs.run_directory_lock`): the training of an earlier study, say, killed in a way
    that left it running. A `StudyRunError` naming its PID, before anything is written."""
    from tf_outheads_zoo.runs import LOCK_FILE, RunDirectoryError, run_directory_lock

    try:
        with run_directory_lock(run_dir):
            pass
    except RunDirectoryError:
        with open(os.path.join(run_dir, LOCK_FILE), encoding="utf-8") as f:
            owner = f.read().strip() or "unknown"
        raise StudyRunError(
            f"{what}: {run_dir} is in use by another process (pid {owner}; lock "
            f"{os.path.join(run_dir, LOCK_FILE)}), a training still running. Wait for it to "
            f"end (or end it: `kill {owner}` lets a training write its backup first), then "
            "run the same command again: it resumes the run.") from None
