"""Helpers shared by the benchmark scripts (run as `python benchmarks/NAME.py`)."""

import os
import platform

import keras
import numpy as np
import tensorflow as tf


def machine_info():
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "numpy": np.__version__,
        "devices": [d.name for d in tf.config.list_logical_devices()],
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
    }
    if hasattr(os, "sched_getaffinity"):
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            names = [line.split(":", 1)[1].strip() for line in stream if line.startswith("model name")]
        if names:
            info["cpu_model"] = names[0]
    except OSError:
        pass
    if hasattr(os, "getloadavg"):
        info["load_average_at_start"] = list(os.getloadavg())
    return info
