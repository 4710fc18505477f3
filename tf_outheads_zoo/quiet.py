"""TensorFlow imported without its start-up noise, for the command line.

On a machine without a GPU, importing TensorFlow 2.21 and listing its devices
prints lines such as `failed call to cuInit: ... UNKNOWN ERROR (303)`, oneDNN
and CPU-feature notices and absl's "All log messages before
absl::InitializeLog() ..." warning. `TF_CPP_MIN_LOG_LEVEL` does not silence
them: most are written by absl before its logging is initialised. On a CPU
machine they read like a failure. `import_tensorflow()` imports TensorFlow and
initialises its devices with the standard error stream (file descriptor 2)
sent to a temporary file, then writes back every line that is not such a
notice, so real errors still reach the user. Later C++ log lines (e.g. the
"E ... oneDNN supports DT_BOOL only on platforms with AVX-512" notice of the
first training step) are left to `TF_CPP_MIN_LOG_LEVEL`, which the command
line sets to 3 unless it is set (`tf-outheads --debug` sets 0): TensorFlow's
errors still reach the user as Python exceptions.
"""

import os
import re
import sys
import tempfile

# Start-up lines that carry no news for a user: INFO lines (I<mmdd> ...), absl's
# pre-initialisation warning, the CPU-feature notice's second line, and the CUDA
# probes' failures on a machine without a GPU driver.
NOISE = (
    re.compile(r"^I\d{4} "),
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called"),
    re.compile(r"^To enable the following instructions: .* rebuild TensorFlow"),
    re.compile(r"^[EW]\d{4} .*(cuInit|cuda_driver|cuda_platform|cuda_diagnostics|cudart_stub)"),
)


def is_noise(line):
    """Whether `line` (one line of TensorFlow's start-up stderr) is a known notice."""
    return any(pattern.search(line) for pattern in NOISE)


def import_tensorflow(log_level="3"):
    """Imports TensorFlow and lists its devices without the start-up notices.

    Sets `TF_CPP_MIN_LOG_LEVEL` to `log_level` unless it is set. Lines that are
    not known notices (`NOISE`) are written back to stderr. Does nothing once
    TensorFlow's devices were listed in this process.

    Returns:
        The `tensorflow` module.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", log_level)
    if getattr(import_tensorflow, "done", False):
        import tensorflow as tf

        return tf
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()  # the CUDA probe happens here
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        for raw in captured:
            line = raw.decode("utf-8", errors="replace")
            if not is_noise(line):
                sys.stderr.write(line)
    sys.stderr.flush()
    import_tensorflow.done = True
    return tf
