"""How a command reports what went wrong: which exceptions are the user's (printed as
one `error: ...` line, `tf_outheads_zoo.cli.main`), the line printed for them, and the
library's warnings on stderr."""

import logging
import re
import signal
import sys


def user_errors():
    """The exception types a command reports as one line: bad input, missing or damaged
    files, refused run directories and options (every library check raises one)."""
    from tf_outheads.training.backup import CheckpointError
    from tf_outheads.training.trainer import NonFiniteLossError

    return (ValueError, OSError, CheckpointError, NonFiniteLossError)


# What the operating system says when a write cannot be done (a full disk, a quota,
# a file-size limit, a read-only or forbidden directory): TensorFlow's file ops raise
# an `OpError` (`ResourceExhaustedError`, `OutOfRangeError`, ...) with this text.
FILE_SYSTEM_FAILURES = ("no space left on device", "file too large", "disk quota exceeded",
                        "read-only file system", "permission denied")
DISK_FULL = FILE_SYSTEM_FAILURES[:3]

# Exit status of a run stopped by SIGTERM after writing its backup (128 + 15, what a
# shell reports for a process that SIGTERM ended): not 0, since the run is not finished.
PREEMPTED_EXIT_STATUS = 143
# The same after Ctrl-C (SIGINT: 128 + 2).
INTERRUPTED_EXIT_STATUS = 130


def stopped_exit_status(error):
    """The exit status of a training stopped by `error`, a `TrainingPreempted`: 130
    after Ctrl-C (SIGINT), else 143 (SIGTERM)."""
    return (INTERRUPTED_EXIT_STATUS if getattr(error, "signal", None) == signal.SIGINT
            else PREEMPTED_EXIT_STATUS)


def _is_user_error(error):
    """A user error (`user_errors()`), or a TensorFlow op that failed on the file system
    or on memory (the device's limit: a batch too large)."""
    if isinstance(error, user_errors()):
        return True
    tf = sys.modules.get("tensorflow")  # an op error implies TensorFlow was imported
    text = str(error).lower()
    return tf is not None and isinstance(error, tf.errors.OpError) and (
        any(failure in text for failure in FILE_SYSTEM_FAILURES)
        or isinstance(error, tf.errors.ResourceExhaustedError))


def error_message(error):
    """The one line printed for a user error: its message, and what to do for a full disk
    or memory."""
    message = " ".join(str(error).split()) or type(error).__name__
    text = message.lower()
    if any(failure in text for failure in DISK_FULL):
        message += (" (the disk is full or the file too large for it: free space, then run "
                    "the same command again; a training run resumes from its last complete "
                    "backup)")
    elif re.search(r"\boom\b", text) or "out of memory" in text:  # not "room" in a path
        message += (" (out of memory: lower data.batch_tokens or decode.batch_size; "
                    "train.accumulation_steps keeps the effective batch)")
    return message


class _StderrHandler(logging.StreamHandler):
    """Writes to the `sys.stderr` of the moment (not the one at creation)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _show_library_warnings():
    """The library's warnings (`tf_outheads` logger: sources cut, ...) as `warning: ...`
    lines on stderr, once, whatever handlers TensorFlow's absl puts on the root logger."""
    logger = logging.getLogger("tf_outheads")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("warning: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
