"""Helpers shared by the benchmark scripts (run as `python benchmarks/NAME.py`)."""

import os
import platform
import statistics
import time

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


def stats(values):
    """Median, min, max and every value of a list of numbers (for the JSON records)."""
    values = list(values)
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def interleaved(names, run_once, repeats, progress=None):
    """Times `run_once(name) -> (units, extra)` in the order A B C, C B A, A B C, ...

    Alternating the order spreads the load of other processes (and any drift
    of the machine) over every name alike.

    Args:
        names: list of str, what to time.
        run_once: callable `name -> (units, extra)`: one timed pass; `units` is
            what the pass did (steps, tokens...), `extra` anything JSON-able.
        repeats: int, passes per name.
        progress: optional callable `(repeat, order, timings)`, called after
            each repeat (e.g. to print a line).

    Returns:
        dict name → {"seconds", "cpu_seconds", "units", "extra"}: lists with
        one entry per repeat; wall-clock seconds (`time.perf_counter`) and
        process CPU seconds summed over all threads (`time.process_time`).
    """
    timings = {name: {"seconds": [], "cpu_seconds": [], "units": [], "extra": []}
               for name in names}
    for repeat in range(repeats):
        order = list(names) if repeat % 2 == 0 else list(names)[::-1]
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            units, extra = run_once(name)
            timing = timings[name]
            timing["seconds"].append(time.perf_counter() - wall)
            timing["cpu_seconds"].append(time.process_time() - cpu)
            timing["units"].append(units)
            timing["extra"].append(extra)
        if progress is not None:
            progress(repeat, order, timings)
    return timings
