"""Where greedy decoding's time goes: a per-op profile of `Translator` passes.

One warm-up pass of greedy `Translator` decoding over the first `--sentences` dev
sentences, one timed pass, then one pass under TensorFlow's profiler
(`tf.profiler.experimental`); the trace's op events on the executor threads
(`tf_Compute`) are summed:

- by kind of op (`CATEGORIES`: dense products, attention products, the key/value
  cache's concatenations, the output's softmax and arg-max, element-wise ops, ...),
  inside the decoding loop (`while/`) or outside it (encoder, tokenization);
- per decoding step (the loop's iterations, counted by its `ArgMax` or `LogSoftmax`)
  and per call;
- the executor's own time: its `ExecutorState::Process` events enclose the kernels,
  so what they hold beyond them is the cost of running ops one by one (`attribute`:
  the events nest and overlap, and each instant of a thread is counted once).

    python benchmarks/profile_decode.py --quick                              # smoke test
    python benchmarks/profile_decode.py --run-dir runs/transformer-cpu --sentences 640

Model as in `benchmarks/decode.py` (`--run-dir`, or an untrained `--preset`). The
profiled pass is slower than the timed one (the profiler's own cost); the shares, not
the absolute times, are the result. Results go to `--output` (JSON, default
benchmarks/results/profile_decode.json).
"""

import collections
import glob
import re
import tempfile
import time

from common import (  # benchmarks/ is the script's folder
    add_run_or_preset_arguments, benchmark_parser, machine_info, parse_benchmark_args,
    start, write_record,
)

QUICK = {"preset": "lstm-tiny", "vocab_size": 500, "tokenizer_sentences": 2000,
         "sentences": 16, "batch_size": 8}
# Op types by kind; the first pattern that matches a type names its kind.
CATEGORIES = (
    ("dense products", r"MatMul$|FusedMatMul|^MatMul|Tensordot"),
    ("attention products", r"BatchMatMul"),
    ("cache concatenation", r"^ConcatV2$"),
    ("softmax, arg-max, reductions", r"Softmax|^ArgMax$|^Max$|^Sum$|^Mean$|^Exp$"),
    ("gathers and scatters", r"Gather|Scatter"),
    ("element-wise", r"^(Mul|AddV2|Add|Sub|RealDiv|SquaredDifference|SelectV2|Rsqrt|Relu|"
                     r"BiasAdd|Cos|Sin|Sqrt|Neg|Tanh|Sigmoid|Maximum|Minimum|Cast|Less|"
                     r"Greater|LogicalAnd|LogicalOr|Equal|NotEqual|AddN)$"),
    ("tokenization", r"Sentencepiece"),
)
EXECUTOR = "ExecutorState::Process"
NESTED = ("ParallelFor",)  # a kernel's own worker calls, inside its event
# Events of the executor threads that take no part: instants, the executor's callback.
IGNORED = re.compile(r"^ThreadpoolListener::|^Memory(De)?[Aa]llocation$|"
                     r"^ExecutorDoneCallback$")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    add_run_or_preset_arguments(parser, "transformer-cpu")
    return parse_benchmark_args(parser, argv, "profile_decode", QUICK,
                                positive=("sentences", "batch_size"))


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

from decode import length_options, load_model_and_split  # noqa: E402
from tf_outheads.decoding import Translator  # noqa: E402


def category(op_type):
    for name, pattern in CATEGORIES:
        if re.search(pattern, op_type):
            return name
    return "other"


def op_events(log_dir, details=False):
    """`[(op name, op type, seconds)]` of the executor threads' events in the trace; with
    `details`, each also has its thread (the line's index), its start (ps, on that line)
    and its loop iteration (the executor's `iter_num` stat, None without one)."""
    paths = sorted(glob.glob(f"{log_dir}/**/*.xplane.pb", recursive=True))
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    iteration = [k for k, stat in plane.stat_metadata.items() if stat.name == "iter_num"]
    events = []
    for index, line in enumerate(plane.lines):
        if not line.name.startswith("tf_Compute"):
            continue
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            # A kernel is "op name:op type"; the executor's own events are not.
            op_name, _, op_type = name.rpartition(":")
            if "::" in name or not op_name:
                op_name = op_type = name
            seconds = event.duration_ps * 1e-12
            if not details:
                events.append((op_name, op_type, seconds))
                continue
            iter_num = next((stat.int64_value for stat in event.stats
                             if stat.metadata_id in iteration), None)
            events.append((op_name, op_type, seconds, index, event.offset_ps, iter_num))
    return events


def attribute(events):
    """`(busy seconds, kernels, spare)` of `op_events(details=True)`, thread by thread.
    Each instant of a thread goes to its innermost event: the latest begun of those not
    yet ended. (The executor's `Process` events nest, and in loops one often ends a
    fraction of a µs after the next has begun inside it; XLA's events nest in its
    launch's.) `busy`: the time any event runs (their union, not their sum); `kernels`:
    every other event's `(name, type, own seconds)`; `spare`: `{where: [seconds, runs]}`,
    the `Process` events' own time: scheduling, and the kernels TensorFlow ran untraced.
    A `Process` is in a loop when its `iter_num` is above 0 or it holds a kernel of a
    `while/`. So kernels and spare add up to `busy`, and none is below 0."""
    busy, kernels, spare = 0.0, [], {"loop": [0.0, 0], "outside": [0.0, 0]}
    lines = collections.defaultdict(list)
    for event in events:
        if event[1] not in NESTED and not IGNORED.search(event[1]):
            lines[event[3]].append(event)
    for line in lines.values():
        # [own seconds, end (ps), event, in a loop], in the order they began
        active, done, now = [], [], None
        for event in sorted(line, key=lambda e: (e[4], -e[2])):
            name, op_type, seconds, _, start, iter_num = event
            end = start + seconds * 1e12
            while active:  # the time up to this event's start, to the innermost ones
                first = min(range(len(active)), key=lambda i: active[i][1])
                until = min(active[first][1], start)
                if until > now:
                    active[-1][0] += (until - now) * 1e-12
                    busy += (until - now) * 1e-12
                    now = until
                if active[first][1] > start:
                    break
                done.append(active.pop(first))
            now = start
            if op_type != EXECUTOR and "while/" in name:
                process = next((f for f in reversed(active) if f[2][1] == EXECUTOR), None)
                if process:
                    process[3] = True
            active.append([0.0, end, event, bool(iter_num)])
        while active:
            first = min(range(len(active)), key=lambda i: active[i][1])
            active[-1][0] += (active[first][1] - now) * 1e-12
            busy += (active[first][1] - now) * 1e-12
            now = active[first][1]
            done.append(active.pop(first))
        for own, _, (name, op_type, *_), loop in done:
            if op_type == EXECUTOR:
                spare["loop" if loop else "outside"][0] += own
                spare["loop" if loop else "outside"][1] += 1
            else:
                kernels.append((name, op_type, own))
    return busy, kernels, spare


def summarize(events):
    """The table rows and totals of `op_events(details=True)`: the kernels at their own
    time, the executor threads' busy time as `attribute` counts it."""
    steps = max(sum(1 for name, op_type, *_ in events
                    if op_type == counted and name.startswith("while/"))
                for counted in ("ArgMax", "LogSoftmax"))  # once a greedy step
    executor, kernels, _ = attribute(events)
    rows = collections.defaultdict(lambda: {"seconds": 0.0, "calls": 0})
    for name, op_type, seconds in kernels:
        where = "loop" if name.startswith("while/") else "outside"
        row = rows[(where, category(op_type))]
        row["seconds"] += seconds
        row["calls"] += 1
    kernel_seconds = sum(s for _, _, s in kernels)
    table = [{"where": where, "kind": kind, **row,
              "us_per_step": row["seconds"] / max(steps, 1) * 1e6 if where == "loop" else None,
              "calls_per_step": row["calls"] / max(steps, 1) if where == "loop" else None,
              "share": row["seconds"] / max(executor, 1e-12)}
             for (where, kind), row in sorted(rows.items(), key=lambda x: -x[1]["seconds"])]
    top = collections.Counter()
    for name, op_type, seconds in kernels:
        top[f"{re.sub(r'_[0-9]+', '', name)}:{op_type}"] += seconds
    return {"steps": steps, "executor_seconds": executor, "kernel_seconds": kernel_seconds,
            "executor_overhead_seconds": executor - kernel_seconds,
            "loop_calls_per_step": sum(r["calls"] for (w, _), r in rows.items()
                                       if w == "loop") / max(steps, 1),
            "table": table,
            "top_ops": [{"op": op, "seconds": s} for op, s in top.most_common(15)]}


def main(args):
    started = time.perf_counter()
    info = machine_info()
    model, source_tokenizer, target_tokenizer, config, description, dev = (
        load_model_and_split(args))
    sentences = dev.sources[:args.sentences]
    translator = Translator(model, source_tokenizer, target_tokenizer,
                            batch_size=args.batch_size, **length_options(config))
    translator.translate(sentences)  # tracing
    began = time.perf_counter()
    translator.translate(sentences)
    wall = time.perf_counter() - began
    log_dir = tempfile.mkdtemp(prefix="profile-decode-")
    tf.profiler.experimental.start(log_dir, options=tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=3))  # every op, the inexpensive ones run inline included
    began = time.perf_counter()
    translator.translate(sentences)
    profiled_wall = time.perf_counter() - began
    tf.profiler.experimental.stop()
    summary = summarize(op_events(log_dir, details=True))
    steps = summary["steps"]
    print(f"\ngreedy Translator, {len(sentences)} dev sentences, batches of "
          f"{args.batch_size} ({description}): {wall:.3f} s a pass ({profiled_wall:.3f} s "
          f"profiled), {steps} decoding steps, {wall / max(steps, 1) * 1e3:.2f} ms a step")
    print(f"executor threads busy {summary['executor_seconds']:.3f} s: kernels "
          f"{summary['kernel_seconds']:.3f} s, running them one by one "
          f"{summary['executor_overhead_seconds']:.3f} s; "
          f"{summary['loop_calls_per_step']:.0f} kernels a step")
    print(f"{'where':<8}{'kind':<32}{'ms':>9}{'µs/step':>10}{'calls/step':>12}{'share':>8}")
    for row in summary["table"]:
        per_step = (f"{row['us_per_step']:>10.0f}{row['calls_per_step']:>12.1f}"
                    if row["where"] == "loop" else f"{'':>10}{'':>12}")
        print(f"{row['where']:<8}{row['kind']:<32}{row['seconds'] * 1e3:>9.1f}{per_step}"
              f"{row['share']:>8.1%}")
    print("\nthe most expensive ops (seconds over the pass)")
    for row in summary["top_ops"][:10]:
        print(f"  {row['seconds']:.3f}  {row['op']}")
    return write_record("profile_decode", args, info, started, {
        "model": description, "sentences": len(sentences), "pass_seconds": wall,
        "profiled_pass_seconds": profiled_wall, **summary})


if __name__ == "__main__":
    main(ARGS)
