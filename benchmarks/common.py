"""Helpers shared by the benchmark scripts (run as `python benchmarks/NAME.py`)."""

import os
import pathlib
import platform
import statistics
import sys
import time

# TensorFlow is imported by `setup` and the helpers that need it, not here: a
# script imports this module before parsing its arguments, and `--help` or a bad
# argument should not wait for TensorFlow.

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def add_thread_arguments(group):
    """`--intra-op-threads` / `--inter-op-threads` on an argparse parser or group."""
    group.add_argument("--intra-op-threads", type=int, default=0,
                       help="TensorFlow intra-op threads (0: TensorFlow's default)")
    group.add_argument("--inter-op-threads", type=int, default=0,
                       help="TensorFlow inter-op threads (0: TensorFlow's default)")


def setup(args):
    """What every benchmark does before its first TensorFlow op.

    Sets the thread pools from `args` (the parsed `add_thread_arguments`; `None`
    when the script is imported, not run), silences TensorFlow's Python logger
    (each model has its own tf.function built from the same Python code, which
    TensorFlow reports as retracing; it is not) and puts the repository on
    `sys.path` so that `tf_outheads` and `tf_outheads_zoo` import from this checkout.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # C++ info logs out of the tables
    import tensorflow as tf

    if args is not None:
        if getattr(args, "intra_op_threads", 0):
            tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
        if getattr(args, "inter_op_threads", 0):
            tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    tf.get_logger().setLevel("ERROR")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))


def machine_info():
    import keras
    import numpy as np
    import tensorflow as tf

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


def write_record(benchmark, args, machine, started, fields, exclude=()):
    """Writes a benchmark's JSON record to `args.output`; returns the record.

    The record holds `benchmark`, `created`, `config` (`vars(args)` without
    the names in `exclude`), `machine` (with the load average at the end added),
    then `fields` in their order, and `wall_seconds` since `started`
    (`time.perf_counter()`).
    """
    import json

    if hasattr(os, "getloadavg"):
        machine["load_average_at_end"] = list(os.getloadavg())
    record = {
        "benchmark": benchmark,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "config": {k: v for k, v in vars(args).items() if k not in exclude},
        "machine": machine,
        **fields,
        "wall_seconds": time.perf_counter() - started,
    }
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w", encoding="utf-8") as stream:
        json.dump(record, stream, indent=2)
    print(f"wrote {output} ({record['wall_seconds']:.0f} s)")
    return record


FIRST_WORD_ID = 4  # ids below are PAD, UNK, BOS, EOS


def random_sentences(rng, rows, length, vocab):
    """`(rows, length)` int32 of word ids, the last one EOS: no padding."""
    import numpy as np
    from tf_outheads.data.special_tokens import EOS_ID

    ids = rng.integers(FIRST_WORD_ID, vocab, (rows, length)).astype(np.int32)
    ids[:, -1] = EOS_ID
    return ids


def training_batches(args, rng, source_vocab, target_vocab):
    """`args.steps` batches `(features, target_out)` of `args.batch_size` random
    sentences, `args.source_length` / `args.target_length` tokens, no padding."""
    import numpy as np
    import tensorflow as tf
    from tf_outheads.data.special_tokens import BOS_ID

    batches = []
    for _ in range(args.steps):
        source = random_sentences(rng, args.batch_size, args.source_length, source_vocab)
        target_out = random_sentences(rng, args.batch_size, args.target_length, target_vocab)
        target_in = np.concatenate(
            [np.full((args.batch_size, 1), BOS_ID, np.int32), target_out[:, :-1]], axis=1)
        batches.append(({"source_ids": tf.constant(source), "target_in": tf.constant(target_in)},
                        tf.constant(target_out)))
    return batches


def add_batch_arguments(group, batch_size, batch_help="sentences per batch"):
    """`--batch-size` (default `batch_size`), `--source-length`, `--target-length`
    (30 each) and `--seed`: the shape of `training_batches`' synthetic batches."""
    group.add_argument("--batch-size", type=int, default=batch_size, help=batch_help)
    group.add_argument("--source-length", type=int, default=30, help="source tokens per sentence")
    group.add_argument("--target-length", type=int, default=30, help="target tokens per sentence")
    group.add_argument("--seed", type=int, default=0)


def benchmark_parser(doc, quick):
    """The parser every benchmark starts from: the first paragraph of `doc` as its
    description, defaults shown in `--help`, and `--quick` (the sizes in the dict
    `quick` as defaults: a smoke test, not a measurement)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and one repeat, to check that the script runs: "
                             + ", ".join(f"{k}={v}" for k, v in quick.items()))
    return parser


def parse_benchmark_args(parser, argv, name, quick, positive=()):
    """Adds `--output` (default `benchmarks/results/NAME.json`), parses `argv`, and
    re-parses with `quick` as defaults under `--quick` (options given still win);
    each option in `positive` must be >= 1 (else the usual argparse error)."""
    parser.add_argument("--output", default=str(REPO_ROOT / "benchmarks" / "results" / f"{name}.json"),
                        help="JSON results path")
    args = parser.parse_args(argv)
    if args.quick:
        parser.set_defaults(**quick)
        args = parser.parse_args(argv)
    for option in positive:
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be >= 1")
    return args
