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


def start(parse_args, module_name):
    """A script's arguments, parsed only when it runs (None when it is imported),
    then `setup` with them: call it before importing TensorFlow."""
    args = parse_args() if module_name == "__main__" else None
    setup(args)
    return args


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


def described_machine(seed=None, versions="", tail=""):
    """`machine_info()`, after seeding TensorFlow with `seed` (unless None), with its
    line printed: TensorFlow and Keras versions (then `versions`), CPUs, devices, `tail`."""
    import tensorflow as tf

    if seed is not None:
        tf.random.set_seed(seed)
    machine = machine_info()
    print(f"TensorFlow {machine['tensorflow']}, Keras {machine['keras']}{versions}, "
          f"{machine['cpu_count']} CPUs, devices {machine['devices']}{tail}", flush=True)
    return machine


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


def zipf_sentences(rng, rows, length, vocab):
    """`(rows, length)` int32 word ids, log-uniform over the ranks of the words
    (TensorFlow's log-uniform sampler: `P(r) = log((r + 2) / (r + 1)) / log(n + 1)`,
    by its inverse CDF), the last one EOS: no padding."""
    import math

    import numpy as np
    from tf_outheads.data.special_tokens import EOS_ID

    words = vocab - FIRST_WORD_ID
    u = rng.random((rows, length))
    ranks = np.clip(np.floor(np.exp(u * math.log(words + 1.0))) - 1.0, 0, words - 1)
    ids = (FIRST_WORD_ID + ranks).astype(np.int32)
    ids[:, -1] = EOS_ID
    return ids


def training_batches(args, rng, source_vocab, target_vocab, sentences=random_sentences):
    """`args.steps` batches `(features, target_out)` of `args.batch_size` sentences
    drawn by `sentences(rng, rows, length, vocab)` (default: uniform word ids),
    `args.source_length` / `args.target_length` tokens, no padding."""
    import numpy as np
    import tensorflow as tf
    from tf_outheads.data.special_tokens import BOS_ID

    batches = []
    for _ in range(args.steps):
        source = sentences(rng, args.batch_size, args.source_length, source_vocab)
        target_out = sentences(rng, args.batch_size, args.target_length, target_vocab)
        target_in = np.concatenate(
            [np.full((args.batch_size, 1), BOS_ID, np.int32), target_out[:, :-1]], axis=1)
        batches.append(({"source_ids": tf.constant(source), "target_in": tf.constant(target_in)},
                        tf.constant(target_out)))
    return batches


def corpus_batches(args):
    """Batches of the embedded Bible corpus (es-en): a joint SentencePiece model of
    `args.vocab_size` trained on the train split (cached under `args.workdir`),
    `args.steps` training batches of `args.batch_tokens` padded tokens (examples up
    to `args.max_length`, shuffled with `args.seed`) and `args.decode_batches`
    dev-split source batches of `args.decode_batch_size` sentences.

    Returns `(batches, decode sources, source vocab, target vocab)`.
    """
    from tf_outheads.data import (
        build_tokenizers, make_inference_dataset, make_training_dataset, read_tsv,
    )
    from tf_outheads_zoo.config import EMBEDDED_CORPUS

    train = read_tsv(EMBEDDED_CORPUS, split="train")
    directory = pathlib.Path(args.workdir) / f"spm_joint_bpe_{args.vocab_size}"
    tokenizer, _ = build_tokenizers(train.sources, train.targets, directory,
                                    vocab_size=args.vocab_size)
    dataset = make_training_dataset(
        train.sources, train.targets, tokenizer, tokenizer, batch_tokens=args.batch_tokens,
        max_length=args.max_length, shuffle=True, seed=args.seed, repeat=True,
    )
    batches = list(dataset.take(args.steps))
    decode = []
    if args.decode_batches:
        dev = read_tsv(EMBEDDED_CORPUS, split="dev")
        inference = make_inference_dataset(dev.sources, tokenizer,
                                           batch_size=args.decode_batch_size)
        decode = [features["source_ids"] for features in inference.take(args.decode_batches)]
    return batches, decode, tokenizer.vocab_size, tokenizer.vocab_size


# `--quick` sizes of `add_batch_arguments` and `add_step_arguments`, for a script's QUICK.
QUICK_BATCHES = {"batch_size": 8, "source_length": 10, "target_length": 10, "warmup_steps": 1,
                 "steps": 2, "repeats": 1}


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
    `quick` as defaults: a smoke test, not a measurement; no `--quick` if None)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    if quick is not None:
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
    if getattr(args, "quick", False):
        parser.set_defaults(**quick)
        args = parser.parse_args(argv)
    for option in positive:
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be >= 1")
    return args


# --------------------------------------------------------------------------
# Arguments shared by several scripts
# --------------------------------------------------------------------------
def parse_list(text, cast=int):
    """`"1,2, 3"` → `[1, 2, 3]` (empty items skipped); `cast` raises ValueError on a bad item."""
    return [cast(value) for value in text.split(",") if value.strip()]


def add_variants_argument(parser, default, known, first):
    """`--variants`: comma-separated, among `known`; `first` (the reference) is always
    timed (`parse_variants`)."""
    parser.add_argument("--variants", default=default,
                        help=f"comma-separated, among {', '.join(known)}; {first} is always "
                             "timed (the reference)")


def parse_variants(parser, text, known, first):
    """The comma-separated `--variants`: each known (else an argparse error), `first`
    always first, no repeats."""
    variants = [v.strip() for v in text.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(known))
    if unknown:
        parser.error(f"--variants: unknown {unknown}; known: {', '.join(known)}")
    return [first] + [v for v in dict.fromkeys(variants) if v != first]


def add_run_or_preset_arguments(parser, preset):
    """`--run-dir` (a trained run) or an untrained `--preset` model with its tokenizer
    (`--vocab-size`, `--tokenizer-sentences`): the model of `decode.load_model`; and
    `--sentences` / `--batch-size` of the dev sentences decoded."""
    parser.add_argument("--run-dir", help="a trained run (default: an untrained --preset model)")
    parser.add_argument("--preset", default=preset, help="untrained model's preset")
    parser.add_argument("--vocab-size", type=int, default=0,
                        help="untrained model's tokenizer size (0: the preset's)")
    parser.add_argument("--tokenizer-sentences", type=int, default=0,
                        help="train sentences for that tokenizer (0: all)")
    parser.add_argument("--sentences", type=int, default=200, help="dev sentences translated")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per batch")


def add_model_arguments(group, embedding_dim, hidden_dim, num_layers=None, dropout=None,
                        jit_help=None, helps=None):
    """The model options the LSTM scripts share: `--embedding-dim`, `--hidden-dim` and,
    unless None, `--num-layers`, `--dropout` and `--jit-compile` (with `jit_help`);
    `helps` maps an option's name (`embedding_dim`, ...) to its help."""
    helps = helps or {}
    group.add_argument("--embedding-dim", type=int, default=embedding_dim,
                       help=helps.get("embedding_dim"))
    group.add_argument("--hidden-dim", type=int, default=hidden_dim, help=helps.get("hidden_dim"))
    if num_layers is not None:
        group.add_argument("--num-layers", type=int, default=num_layers,
                           help=helps.get("num_layers"))
    if dropout is not None:
        group.add_argument("--dropout", type=float, default=dropout, help=helps.get("dropout"))
    if jit_help is not None:
        group.add_argument("--jit-compile", action="store_true", help=jit_help)


def add_joint_arguments(group, joint_dims, goal_joint_dim, joint_help, goal_help):
    """`--joint-dims` (comma-separated d_j of the joint heads timed) and `--goal-joint-dim`
    (the joint head a goal is checked for)."""
    group.add_argument("--joint-dims", default=joint_dims,
                       help=f"comma-separated d_j of the joint heads{joint_help}")
    group.add_argument("--goal-joint-dim", type=int, default=goal_joint_dim, help=goal_help)


def add_step_arguments(group, steps, repeats, warmup=None, calls="train_on_batch calls",
                       per="model", between="the variants"):
    """`--warmup-steps` (unless `warmup` is None), `--steps` and `--repeats`: the
    untimed and timed calls of `interleaved`, with their defaults."""
    if warmup is not None:
        group.add_argument("--warmup-steps", type=int, default=warmup,
                           help=f"untimed {calls} per {per} (tracing)")
    group.add_argument("--steps", type=int, default=steps, help=f"{calls} per {per} and repeat")
    group.add_argument("--repeats", type=int, default=repeats,
                       help=f"timed passes per {per}, interleaved between {between}")


def add_decode_arguments(group, batches, batch_size=64, batches_help="batches per decode call",
                         length=None):
    """`--decode-batches` (0: no decoding), `--decode-batch-size` and, unless `length`
    is None, `--decode-length` (tokens every sentence emits)."""
    group.add_argument("--decode-batches", type=int, default=batches,
                       help=f"{batches_help} (0: no decoding benchmark)")
    group.add_argument("--decode-batch-size", type=int, default=batch_size)
    if length is not None:
        group.add_argument("--decode-length", type=int, default=length,
                           help="tokens every sentence emits (EOS blocked until then)")


def int_list(parser, option, text, minimum):
    """`--option`'s comma-separated ints, at least one, each >= `minimum` (else an
    argparse error)."""
    try:
        values = parse_list(text)
    except ValueError as error:
        parser.error(f"--{option} is a comma-separated list of ints ({error})")
    if not values or min(values) < minimum:
        parser.error(f"--{option} needs values >= {minimum}")
    return values


def choice_list(parser, option, text, choices):
    """`--option`'s comma-separated values, at least one, each among `choices`."""
    values = parse_list(text, str)
    if not values or set(values) - set(choices):
        parser.error(f"--{option} must be among {', '.join(choices)}")
    return values


def check_args(parser, args, nonnegative=(), dropout=False):
    """argparse errors for an option of `nonnegative` below 0, or `--dropout` outside [0, 1)."""
    for option in nonnegative:
        if getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} must be >= 0")
    if dropout and not 0.0 <= args.dropout < 1.0:
        parser.error("--dropout must be in [0, 1)")


# --------------------------------------------------------------------------
# Training and decoding loops, summaries and tables
# --------------------------------------------------------------------------
def train_on_batches(model, batches):
    """One timed pass for `interleaved`: `train_on_batch` over `batches`;
    `(steps, {"last_loss": ...})`."""
    import numpy as np

    loss = None
    for features, target_out in batches:
        loss = model.train_on_batch(features, target_out)
    return len(batches), {"last_loss": float(np.ravel(loss)[0])}


def warm_up(models, batches, steps, label=""):
    """`steps` untimed `train_on_batch` calls per model (tracing), cycling through
    `batches`; prints `label` and the seconds of each, returns name → seconds."""
    seconds = {}
    for name, model in models.items():
        start = time.perf_counter()
        for step in range(steps):
            features, target_out = batches[step % len(batches)]
            model.train_on_batch(features, target_out)
        seconds[name] = time.perf_counter() - start
        print(f"  {label}{name}: {seconds[name]:.1f} s", flush=True)
    return seconds


def release():
    """Frees the models of a finished measurement (after `del` of the caller's names)."""
    import gc

    import keras

    gc.collect()
    keras.backend.clear_session()


def time_greedy_decoding(models, sources, args, title, progress):
    """Greedy decoding of `sources` by every model (`greedy_decoder`, each sentence
    `args.decode_length` tokens): a warm-up call each, then `args.repeats` calls each,
    interleaved. Returns (sentences per call, `interleaved`'s timings; `extra` holds
    `emitted_tokens` and `cache_seconds`)."""
    decoders = {name: greedy_decoder(model, args.decode_length) for name, model in models.items()}
    sentences = args.decode_batches * args.decode_batch_size
    warm_up_decoders(decoders, sources, sentences * args.decode_length)

    def decode_once(name):
        emitted, cache_seconds = decoders[name](sources)
        return sentences, {"emitted_tokens": emitted, "cache_seconds": cache_seconds}

    print(title, flush=True)
    return sentences, interleaved(list(models), decode_once, args.repeats, progress)


def greedy_decoder(model, length):
    """Decoding as `Translator` does it: the kept head cache fetched once per call
    (a fingerprint check; E' only if the weights changed), one tf.function per
    batch; every sentence emits exactly `length` tokens (EOS blocked until then).

    Returns `decode_call(sources) -> (emitted tokens, cache seconds)`.
    """
    import tensorflow as tf
    from tf_outheads.decoding import greedy_search
    from tf_outheads.decoding.translator import Translator

    translator = Translator(model, None, None)

    def decode_batch(source_ids, cache):
        step_fn = model.make_step_fn(cache)
        state = model.initial_decoding_state(source_ids, max_length=length)
        return greedy_search(step_fn, state, tf.shape(source_ids)[0], length,
                             min_length=length).lengths

    decode_batch = tf.function(decode_batch, reduce_retracing=True)

    def decode_call(sources):
        start = time.perf_counter()
        cache = translator.head_cache()
        cache_seconds = time.perf_counter() - start
        emitted = 0
        for source_ids in sources:
            emitted += int(tf.reduce_sum(decode_batch(source_ids, cache)))
        return emitted, cache_seconds

    return decode_call


def per_unit(timing, key="seconds", scale=1000.0):
    """`scale` × `timing[key]` / `timing["units"]` per repeat (default: ms per unit)."""
    return [scale * s / u for s, u in zip(timing[key], timing["units"])]


def paired_ratios(reference, timing):
    """How much faster `timing` is than `reference` (> 1: faster), wall clock and CPU:
    their `per_unit` times' ratio of medians, median of per-repeat ratios, CPU ratio."""
    wall, cpu = per_unit(timing), per_unit(timing, "cpu_seconds")
    ref_wall, ref_cpu = per_unit(reference), per_unit(reference, "cpu_seconds")
    return {
        "ratio_of_medians": statistics.median(ref_wall) / statistics.median(wall),
        "median_of_paired_ratios": statistics.median(r / w for r, w in zip(ref_wall, wall)),
        "cpu_ratio_of_medians": statistics.median(ref_cpu) / statistics.median(cpu),
    }


def goal_text(value, goal, fmt="g"):
    return f">= {goal:{fmt}} {'met' if value >= goal else 'MISSED'}"


def print_header(header, rule_extra=0):
    """A table's header line and its rule of dashes (`rule_extra` longer)."""
    print(header)
    print("-" * (len(header) + rule_extra))


def warm_up_decoders(decoders, sources, expected_tokens):
    """One untimed call of every `greedy_decoder` (tracing); each must emit
    `expected_tokens` (sentences × length)."""
    print("greedy decoding: warm-up (tracing)", flush=True)
    for name, decode_call in decoders.items():
        start = time.perf_counter()
        emitted, _ = decode_call(sources)
        if emitted != expected_tokens:
            raise AssertionError(f"{name}: emitted {emitted} tokens, expected {expected_tokens}")
        print(f"  {name}: {time.perf_counter() - start:.1f} s", flush=True)


def progress_printer(label, cell, repeats=None, show_order=False, in_order=False, sep=", "):
    """A `progress` for `interleaved`: one line a repeat, `label` then `name cell(timing)`
    for every name (in the repeat's order if `in_order`); `repeat r/repeats` when
    `repeats` is given, the order in brackets if `show_order`."""
    def progress(repeat, order, timings):
        count = f"{repeat + 1}/{repeats}" if repeats else f"{repeat + 1}"
        shown = f" ({' '.join(order)})" if show_order else ""
        names = order if in_order else list(timings)
        print(f"  repeat {count}{shown}: {label}"
              + sep.join(f"{n} {cell(timings[n])}" for n in names), flush=True)
    return progress


def ms_cell(digits=2):
    """A progress cell: the last repeat's ms per unit (`fmt_ms`)."""
    return lambda timing: fmt_ms(1000 * timing["seconds"][-1] / timing["units"][-1], digits)


def fmt_ms(ms, digits=2):
    """ms to 0 decimals from 100, 1 from 1, else `digits`."""
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.{digits}f}"
