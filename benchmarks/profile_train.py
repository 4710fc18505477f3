"""Where a training step's time goes: a per-op profile of the trainer's compiled step.

The training counterpart of `profile_decode.py`. For a zoo preset (`--preset`, default
`lstm-cpu-tied`; `--set section.key=value` changes a setting as `tf-outheads train
--set` does), what `tf-outheads train` builds before its first step is built by its own
functions: the training batches of the corpus (`tf_outheads_zoo.train._prepare_data`: the
preset's token batching, length buckets, shuffling), the model compiled with the preset's
loss and optimizer (`_build_model`) and a `tf_outheads.training.Trainer`,
whose step function (`StepFunctions.train_function`, the one `Trainer.fit` calls:
forward, loss, gradients, clipping and the Adam update in one `tf.function`) is timed.
The host loop around it (callbacks, logs, backups) is not.

1. `--batches` training batches are taken from the dataset into memory; the pipeline's
   time per batch (after the first) is reported, and its share of a step's time.
2. `--warmup` untimed steps (tracing; oneDNN, and XLA under `--jit-compile`, prepare
   each padded shape at first sight; TensorFlow's cost model runs a cheap kernel inline
   once some 90 runs have measured it), then `--steps` timed steps over the batches in
   memory: wall ms per step (median, min) and target tokens per second (the tokens a
   step counts, as `loss_curves.csv`'s `tokens`), then `--profile-steps` steps under
   TensorFlow's profiler.
3. The trace's events on the executor threads (`profile_decode.op_events`) are summed
   (`profile_decode.attribute`, `summarize`) by kind of op (`CATEGORIES`), inside
   recurrent loops (`while/` in their names) or outside, and by phase: forward and
   backward from the traced graph (`tape_ranges`: the ops `tape.gradient` made,
   hand-written gradients included), update (the optimizer's name scope: Adam,
   clipping). The executor's own time, its `Process` events' time that no kernel they
   enclose takes, is a kind of its own: scheduling, and the kernels TensorFlow runs
   inline, which the trace leaves out even at `host_tracer_level=3` (cheap ones: a
   loop's element-wise ops, most of all). The most expensive op types follow, with
   calls per step and µs per call.
4. Achieved training GFLOP/s: `flops.train_flops_per_target_token` (matrix products
   only, 3 × forward, the batches' mean lengths) × tokens/s, and its share of this
   machine's `matmul_peak_gflops`; and the traced product kernels' own rate: the same
   count on the profiled batches' padded shapes over those kernels' seconds.

`--jit-compile` profiles the XLA-compiled step (`train.jit_compile`): the kinds are then
XLA's ops and runtime, named as the trace names them (its wait for the work it hands to
other threads included).

    python benchmarks/profile_train.py --quick                       # smoke test
    python benchmarks/profile_train.py                               # lstm-cpu-tied
    python benchmarks/profile_train.py --preset transformer-cpu --jit-compile

One step per call (`train.steps_per_execution` 1). The tokenizer learns from a seeded
sample of `--tokenizer-sentences` training pairs (`data.tokenizer_sample`; 0: the
preset's) with `--vocab-size` pieces (0: the preset's), once: it is cached in
benchmarks/.cache/ and reused while its fingerprint matches. The profiled steps are slower than the timed ones (the
profiler's own cost): their shares, not their times, are the result. Results go to
`--output` (JSON, default benchmarks/results/profile_train.json).
"""

import collections
import contextlib
import functools
import re
import statistics
import tempfile
import time

from common import (  # benchmarks/ is the script's folder
    REPO_ROOT, benchmark_parser, machine_info, parse_benchmark_args, start, stats,
    write_record,
)

QUICK = {"preset": "lstm-tiny", "vocab_size": 500, "tokenizer_sentences": 2000,
         "batches": 4, "warmup": 4, "steps": 4, "profile_steps": 2, "peak_size": 512}
# TensorFlow kernels ("op name:op type" events) by op type; the first pattern that
# matches names the kind. Products are then split by phase (forward, backward).
CATEGORIES = (
    ("batch matmuls", r"BatchMatMul"),
    ("dense products", r"MatMul|Tensordot|Einsum"),
    ("softmax, cross-entropy, reductions",
     r"Softmax|CrossEntropy|^OneHot$|^(_Mkl)?(Max|Min|Sum|Mean|Prod|ArgMax|Exp|Log|Log1p|"
     r"L2Loss)$"),
    ("gathers, scatters, segment sums", r"Gather|Scatter|Segment|Stitch|^Unique|^Bincount"),
    ("layer norms", r"LayerNorm|BatchNorm|Moments"),
    ("element-wise", r"^(_Mkl)?(Mul|AddV2|Add|Sub|RealDiv|DivNoNan|SquaredDifference|"
                     r"Select|SelectV2|Rsqrt|RsqrtGrad|Relu|ReluGrad|BiasAdd|BiasAddGrad|"
                     r"Sqrt|Square|Neg|Tanh|TanhGrad|Sigmoid|SigmoidGrad|Maximum|Minimum|Sin|Cos|"
                     r"Cast|Less|LessEqual|Greater|GreaterEqual|LogicalAnd|LogicalOr|"
                     r"LogicalNot|Equal|NotEqual|AddN|Reciprocal|Pow|Erf|Floor|FloorDiv|"
                     r"FloorMod|IsFinite|ClipByValue|OnesLike|ZerosLike|Fill)$"),
    ("copies, slices, transposes", r"^(_Mkl)?(ConcatV2|Concat|Transpose|Pack|Unpack|Slice|"
                                   r"StridedSlice|StridedSliceGrad|Pad|PadV2|Tile|Split|"
                                   r"SplitV|ReverseSequence|ReverseV2|Reshape|Squeeze|"
                                   r"ExpandDims|Identity|IdentityN|Snapshot|BroadcastTo|"
                                   r"Range|Shape|ShapeN|Size|Rank|Const)$"),
    ("loop bookkeeping (tensor lists, control flow)",
     r"TensorList|TensorArray|^(Enter|Exit|Merge|Switch|NextIteration|LoopCond|"
     r"StatelessWhile|While|If|StatelessIf|PartitionedCall|StatefulPartitionedCall)$"),
    ("variables", r"VariableOp|^(VarHandleOp|VarIsInitializedOp)$"),
    ("random numbers (dropout)", r"Random"),
    ("input (IteratorGetNext)", r"^IteratorGetNext"),
)
PRODUCTS = ("batch matmuls", "dense products")
GATHERS = "gathers, scatters, segment sums"
UPDATE = "optimizer update"
EXECUTOR_KIND = "executor: scheduling, untraced kernels"
# Events that are no TensorFlow kernel: the runtime's (an async kernel's launch, XLA's
# executable and its wait) and, under XLA, its HLO ops (fusions, calls, loops), whose
# names are no TensorFlow op type (CamelCase).
RUNTIME_KIND, XLA_KIND = "async launches, XLA runtime", "XLA ops (fusions, thunks)"
RUNTIME = re.compile(r"::|^BlockUntilReady$")
TF_OP_TYPE = re.compile(r"^_?[A-Z][A-Za-z0-9]*$")
# The optimizer's name scope (Keras names it after the optimizer's class).
OPTIMIZER = re.compile(r"(^|/)(adam|adamw|lazy_adam|sgd|rmsprop|adafactor|"
                       r"loss_scale_optimizer)(_\d+)?/")
INLINED = re.compile(r"/(body|cond|then|else)/_\d+/")
GRAPPLER = re.compile(r"(^|/)ArithmeticOptimizer/[A-Za-z]+_")  # a rewrite, then the op's name


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    parser.add_argument("--preset", default="lstm-cpu-tied", help="the zoo preset trained")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a preset setting, as `tf-outheads train --set`")
    parser.add_argument("--jit-compile", action="store_true",
                        help="profile the XLA-compiled step (train.jit_compile=True)")
    parser.add_argument("--vocab-size", type=int, default=0,
                        help="tokenizer size (0: the preset's data.vocab_size)")
    parser.add_argument("--tokenizer-sentences", type=int, default=0,
                        help="pairs the tokenizer learns from, data.tokenizer_sample (0: the preset's)")
    parser.add_argument("--batches", type=int, default=20,
                        help="training batches taken into memory (and timed from the pipeline)")
    parser.add_argument("--warmup", type=int, default=100,
                        help="untimed steps first (tracing; TensorFlow's cost model settles)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps")
    parser.add_argument("--profile-steps", type=int, default=5, help="steps under the profiler")
    parser.add_argument("--peak-size", type=int, default=2048,
                        help="matrix size of the matmul peak measurement (flops.py)")
    return parse_benchmark_args(parser, argv, "profile_train", QUICK, positive=(
        "batches", "warmup", "steps", "profile_steps", "peak_size"))


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from flops import forward_flops, matmul_peak_gflops, train_flops_per_target_token  # noqa: E402
from profile_decode import attribute, op_events  # noqa: E402
from tf_outheads.data.special_tokens import PAD_ID  # noqa: E402
from tf_outheads.training import strategy as tfo_strategy  # noqa: E402
from tf_outheads.training.step import gradients_summed_by_caller  # noqa: E402
from tf_outheads.training.trainer import Trainer  # noqa: E402


def kind_of(op_type):
    """The kind of an event: the runtime's, XLA's (no TensorFlow op type), `CATEGORIES`."""
    if RUNTIME.search(op_type):
        return RUNTIME_KIND
    if not TF_OP_TYPE.match(op_type):
        return XLA_KIND
    for name, pattern in CATEGORIES:
        if re.search(pattern, op_type):
            return name
    return "other"


@contextlib.contextmanager
def tape_ranges(ranges):
    """While the step is traced inside the block: `(graph, first, end)` appended to
    `ranges` for every `tf.GradientTape.gradient` call, the positions in its graph's
    creation order of the ops the gradient made (the backward pass; the hand-written
    gradients of `tf_outheads.ops.recurrent` included, whose ops the tape does not put
    under `gradient_tape/`)."""
    original = tf.GradientTape.gradient

    def gradient(tape, *args, **kwargs):
        graph = tf.compat.v1.get_default_graph()
        first = len(graph.get_operations())
        result = original(tape, *args, **kwargs)
        ranges.append((graph, first, len(graph.get_operations())))
        return result

    tf.GradientTape.gradient = gradient
    try:
        yield ranges
    finally:
        tf.GradientTape.gradient = original


def graph_phases(ranges):
    """`{op name: phase}` of the traced step's graph(s) from `tape_ranges`: `backward`
    within a gradient, `forward` before one (with accumulation, the next micro-batch's
    forward comes after a gradient), `rest` after the last (the step's loss and token
    sums, the finite check, the update's `cond`)."""
    phases, graphs = {}, {}
    for graph, first, end in ranges:
        graphs.setdefault(id(graph), (graph, []))[1].append((first, end))
    for graph, spans in graphs.values():
        last = max(end for _, end in spans)
        for index, op in enumerate(graph.get_operations()):
            phases[op.name] = ("backward" if any(f <= index < e for f, e in spans)
                               else "forward" if index < last else "rest")
    return phases


def outer_op(op_name, phases):
    """The op of the traced graph an executed kernel comes from: a loop or a branch
    runs as `<op>/body/_<n>/...` (`cond`, `then`, `else` alike); a node that
    Grappler made is named after, or under, one it came from."""
    op_name = GRAPPLER.sub(r"\1", op_name)
    match = INLINED.search(op_name)
    parts = (op_name[:match.start()] if match else op_name).split("/")
    for end in range(len(parts), 0, -1):
        if "/".join(parts[:end]) in phases:
            return "/".join(parts[:end])
    return None


def row_of(op_name, op_type, phases=None):
    """`(phase, where, kind)` of one kernel event. The phase is `update` in the
    optimizer's name scope, else the traced graph's (`graph_phases`; without it, or
    for a name it does not know, `backward` under `gradient_tape/`, else `forward`;
    `XLA, async` for the events that are no TensorFlow kernel); where is `loop`
    inside a `while/`; the products' kind is split by phase."""
    kind = kind_of(op_type)
    if kind in (RUNTIME_KIND, XLA_KIND):
        phase = "XLA, async"
    elif OPTIMIZER.search(op_name):
        phase = "update"
    elif op_type.startswith("IteratorGetNext"):
        phase = "input"
    else:
        op = outer_op(op_name, phases or {})
        phase = (phases[op] if op is not None else
                 "backward" if "gradient_tape/" in op_name else "forward")
    where = "loop" if "while/" in op_name else "outside"
    if phase == "update" and kind != GATHERS:  # a sparse gradient's densifying stays there
        kind = UPDATE
    if kind in PRODUCTS:
        kind = f"{kind}, {phase}"
    return phase, where, kind


def summarize(events, steps, phases=None):
    """Per-step sums of `op_events(details=True)` over `steps` profiled steps (`phases`:
    `graph_phases`): by `(where, kind)` (the executor's time beyond the traced kernels
    a kind of its own), by phase, and the op types by time (`attribute`)."""
    steps = max(steps, 1)
    executor, kernels, spare = attribute(events)
    kernel_seconds = sum(seconds for _, _, seconds in kernels)
    rows = collections.defaultdict(lambda: {"seconds": 0.0, "calls": 0})
    types = collections.defaultdict(lambda: {"seconds": 0.0, "calls": 0})
    by_phase = collections.Counter()
    for name, op_type, seconds in kernels:
        phase, where, kind = row_of(name, op_type, phases)
        for row in (rows[(where, kind)], types[op_type]):
            row["seconds"] += seconds
            row["calls"] += 1
        by_phase[phase] += seconds
    for where, (seconds, runs) in spare.items():
        if runs:
            rows[(where, EXECUTOR_KIND)] = {"seconds": seconds, "calls": runs}
    busy = max(executor, 1e-12)  # the kernels and the executor's own time add up to it

    def per_step(row, **more):
        return {**more, "ms_per_step": row["seconds"] / steps * 1e3,
                "calls_per_step": row["calls"] / steps,
                "us_per_call": row["seconds"] / row["calls"] * 1e6,
                "share": row["seconds"] / busy}

    table = [per_step(row, where=where, kind=kind)
             for (where, kind), row in sorted(rows.items(), key=lambda x: -x[1]["seconds"])]
    top = [per_step(row, op_type=op_type)
           for op_type, row in sorted(types.items(), key=lambda x: -x[1]["seconds"])[:15]]
    products = sum(row["seconds"] for (_, kind), row in rows.items()
                   if kind.split(",")[0] in PRODUCTS)
    return {"profiled_steps": steps, "executor_ms_per_step": executor / steps * 1e3,
            "kernel_ms_per_step": kernel_seconds / steps * 1e3,
            "beyond_kernels_ms_per_step": sum(s for s, _ in spare.values()) / steps * 1e3,
            "kernels_per_step": len(kernels) / steps,
            "executor_runs_per_step": sum(n for _, n in spare.values()) / steps,
            "product_ms_per_step": products / steps * 1e3,
            "phases_ms_per_step": {p: s / steps * 1e3 for p, s in by_phase.most_common()},
            "table": table, "top_op_types": top}


# --------------------------------------------------------------------------
# The trainer's pieces
# --------------------------------------------------------------------------
def run_config(args):
    """The preset's `RunConfig` with `--set` (and `--jit-compile`, `--vocab-size`,
    `--tokenizer-sentences` as `data.tokenizer_sample`)."""
    from tf_outheads_zoo.commands import parse_overrides
    from tf_outheads_zoo.presets import preset_config

    overrides = parse_overrides(args.set)
    if args.jit_compile:
        overrides["train.jit_compile"] = True
    if args.vocab_size:
        overrides["data.vocab_size"] = args.vocab_size
    if args.tokenizer_sentences:
        overrides["data.tokenizer_sample"] = args.tokenizer_sentences
    overrides["train.steps_per_execution"] = 1
    return preset_config(args.preset).with_overrides(overrides, "--set")


def training_pieces(args, config):
    """`(dataset, trainer, target vocabulary size)` built by `tf-outheads train`'s own
    steps (`_run_training`: precision and seed, `_prepare_data`, `_build_model`), its
    files (tokenizers, checked by fingerprint) cached in benchmarks/.cache/."""
    from tf_outheads_zoo import train as zoo_train

    quiet = lambda *_: None  # noqa: E731
    train_config = config.train
    strategy = tfo_strategy.make_strategy(train_config.strategy, num_gpus=train_config.num_gpus)
    tfo_strategy.set_precision(train_config.precision)
    keras.utils.set_random_seed(train_config.seed)
    chief_first = functools.partial(tfo_strategy.chief_first, strategy)
    cache = REPO_ROOT / "benchmarks" / ".cache" / f"train_{args.preset}"
    cache.mkdir(parents=True, exist_ok=True)
    data = zoo_train._prepare_data(config, str(cache), strategy, chief_first, quiet)
    config, model, _ = zoo_train._build_model(config, data, str(cache), strategy, chief_first,
                                              quiet)
    trainer = Trainer(model, accumulation_steps=train_config.accumulation_steps,
                      nonfinite=train_config.nonfinite, jit_compile=train_config.jit_compile,
                      max_skipped_share=train_config.max_skipped_share,
                      max_loss=train_config.max_loss, per_worker_data=data.per_worker_data)
    return data.train_dataset, trainer, data.target_tokenizer.vocab_size


def take_batches(dataset, count):
    """`(batches, seconds per batch after the first)`: `count` batches of the pipeline."""
    iterator = iter(dataset)
    batches = [next(iterator)]
    began = time.perf_counter()
    for _ in range(count - 1):
        batches.append(next(iterator))
    seconds = (time.perf_counter() - began) / (count - 1) if count > 1 else None
    return batches, seconds


def in_memory(batches):
    """The batches, endlessly in turn, as a dataset (no pipeline work, no autotuning)."""
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.repeat().with_options(options)


def batch_shapes(batch):
    """`(rows, padded source length, padded target length, source tokens, target tokens)`."""
    features, labels = batch[0], batch[1]
    if isinstance(labels, dict):
        labels = next(iter(labels.values()))
    source = features["source_ids"].numpy()
    target = labels.numpy()
    return (source.shape[0], source.shape[1], target.shape[1],
            int(np.count_nonzero(source != PAD_ID)), int(np.count_nonzero(target != PAD_ID)))


def executed_flops(model_config, vocab_size, shape):
    """Training FLOPs of the products on a batch's padded shape (3 × forward)."""
    rows, source_length, target_length = shape[:3]
    flops = forward_flops(model_config, vocab_size, source_length, target_length)
    return 3 * rows * (flops["per_target"] * target_length + flops["per_source"] * source_length)


def run_steps(train_function, iterator, count):
    """`count` steps, each timed with its outputs fetched (as `Trainer.fit` does);
    returns `(seconds, target tokens)` per step."""
    one = tf.constant(1, tf.int32)
    seconds, tokens = [], []
    for _ in range(count):
        began = time.perf_counter()
        outputs = [value.numpy() for value in train_function(iterator, one)]
        seconds.append(time.perf_counter() - began)
        tokens.append(float(outputs[2].sum()))
        if not outputs[3].all():
            raise SystemExit(f"profile_train: a step's loss was not finite ({outputs[1]})")
    return seconds, tokens


def profile(trainer, iterator, args):
    """`--warmup`, `--steps` (timed) and `--profile-steps` (traced) steps of the
    trainer's step function, called as `Trainer.fit` calls it. Returns `(warm-up
    seconds, timed `run_steps`, profiled wall seconds, trace directory, phases)`."""
    train_function = trainer._step_functions().train_function(
        1, keep_going_after_nan=trainer.nonfinite == "skip")  # `Trainer.fit`'s
    with gradients_summed_by_caller(trainer.model.optimizer):
        began = time.perf_counter()
        with tape_ranges([]) as ranges:  # the first call traces the step
            run_steps(train_function, iterator, 1)
        run_steps(train_function, iterator, args.warmup - 1)
        warmup_seconds = time.perf_counter() - began
        timed = run_steps(train_function, iterator, args.steps)
        log_dir = tempfile.mkdtemp(prefix="profile-train-")
        # Level 3 asks for every kernel; TensorFlow still leaves out those its cost
        # model runs inline (their time stays in the executor's events).
        tf.profiler.experimental.start(log_dir, options=tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=3))
        began = time.perf_counter()
        run_steps(train_function, iterator, args.profile_steps)
        profiled_wall = time.perf_counter() - began
        tf.profiler.experimental.stop()
    return warmup_seconds, timed, profiled_wall, log_dir, graph_phases(ranges)


def print_report(summary):
    print(f"executor threads busy {summary['executor_ms_per_step']:.1f} ms a step: traced "
          f"kernels {summary['kernel_ms_per_step']:.1f} ms ({summary['kernels_per_step']:.0f} "
          f"a step), beyond them {summary['beyond_kernels_ms_per_step']:.1f} ms (scheduling, "
          "and the kernels TensorFlow runs inline untraced)")
    print("traced kernels by phase, ms a step: " + ", ".join(
        f"{phase} {ms:.1f}" for phase, ms in summary["phases_ms_per_step"].items()))
    print(f"\n{'where':<8}{'kind':<46}{'ms/step':>9}{'calls/step':>12}{'share':>8}")
    for row in summary["table"]:
        print(f"{row['where']:<8}{row['kind']:<46}{row['ms_per_step']:>9.2f}"
              f"{row['calls_per_step']:>12.1f}{row['share']:>8.1%}")
    print(f"\n{'op type':<40}{'ms/step':>9}{'calls/step':>12}{'µs/call':>10}{'share':>8}")
    for row in summary["top_op_types"]:
        print(f"{row['op_type'][:39]:<40}{row['ms_per_step']:>9.2f}"
              f"{row['calls_per_step']:>12.1f}{row['us_per_call']:>10.1f}{row['share']:>8.1%}")


def main(args):
    started = time.perf_counter()
    info = machine_info()
    config = run_config(args)
    dataset, trainer, vocab_size = training_pieces(args, config)
    batches, pipeline_seconds = take_batches(dataset, args.batches)
    shapes = [batch_shapes(batch) for batch in batches]
    rows = sum(s[0] for s in shapes)
    lengths = {"source": sum(s[3] for s in shapes) / rows,
               "target": sum(s[4] for s in shapes) / rows}
    padding = 1 - sum(s[4] for s in shapes) / sum(s[0] * s[2] for s in shapes)
    accumulation, xla = trainer.accumulation_steps, trainer.jit_compile
    if xla and args.warmup < len(batches) * accumulation:  # one compilation per shape
        args.warmup = len(batches) * accumulation
        print(f"--jit-compile: {args.warmup} warm-up steps, one per batch (shape)")
    memory = in_memory(batches)
    trainer._build(memory)  # what `Trainer.fit` does before its first step
    warmup_seconds, (seconds, tokens), profiled_wall, log_dir, phases = profile(
        trainer, iter(memory), args)
    summary = summarize(op_events(log_dir, details=True), args.profile_steps, phases)
    step_ms = statistics.median(seconds) * 1e3
    tokens_per_second = sum(tokens) / sum(seconds)
    per_token = train_flops_per_target_token(config.model, vocab_size, lengths)
    peak = matmul_peak_gflops(size=args.peak_size)
    gflops = per_token * tokens_per_second / 1e9
    first = (args.warmup + args.steps) * accumulation  # the profiled steps' first batch
    profiled = [shapes[(first + i) % len(shapes)]
                for i in range(args.profile_steps * accumulation)]
    product_seconds = summary["product_ms_per_step"] * 1e-3 * args.profile_steps
    product_gflops = (None if xla or product_seconds <= 0 else sum(
        executed_flops(config.model, vocab_size, s) for s in profiled) / product_seconds / 1e9)
    pipeline_ms = pipeline_seconds * 1e3 if pipeline_seconds is not None else None
    print(f"\n{args.preset}{' XLA' if xla else ''}: {len(batches)} batches of "
          f"{config.data.batch_tokens} padded tokens (mean {statistics.fmean(tokens):.0f} "
          f"target tokens a step, {padding:.0%} of target positions padding), vocabulary "
          f"{vocab_size}")
    if pipeline_ms is not None:
        print(f"input pipeline: {pipeline_ms:.1f} ms a batch ({pipeline_ms / step_ms:.0%} of a "
              "step's time, were it not overlapped)")
    print(f"step: {step_ms:.1f} ms median, {min(seconds) * 1e3:.1f} min over {args.steps} "
          f"steps ({warmup_seconds:.1f} s warm-up of {args.warmup}); "
          f"{tokens_per_second:,.0f} target tokens/s; profiled "
          f"{profiled_wall / args.profile_steps * 1e3:.1f} ms a step")
    print(f"training {gflops:.2f} GFLOP/s = {gflops / peak:.1%} of the matmul peak "
          f"({peak:.1f} GFLOP/s; {per_token / 1e6:.2f} MFLOP a target token)"
          + (f"; the traced product kernels {product_gflops:.1f} GFLOP/s (padded shapes)"
             if product_gflops else ""))
    print_report(summary)
    return write_record("profile_train", args, info, started, {
        "preset": args.preset, "settings": config.to_dict(), "vocab_size": vocab_size,
        "batches": len(batches), "mean_lengths": lengths, "padding_share": padding,
        "pipeline_ms_per_batch": pipeline_ms,
        "pipeline_share_of_step": pipeline_ms / step_ms if pipeline_ms else None,
        "warmup_seconds": warmup_seconds, "step_ms": stats(s * 1e3 for s in seconds),
        "tokens_per_step": stats(tokens), "tokens_per_second": tokens_per_second,
        "profiled_ms_per_step": profiled_wall / args.profile_steps * 1e3,
        "train_flops_per_target_token": per_token, "train_gflops": gflops,
        "matmul_peak_gflops": peak, "share_of_peak": gflops / peak,
        "product_kernel_gflops": product_gflops, **summary})


if __name__ == "__main__":
    main(ARGS)
