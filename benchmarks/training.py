"""Training throughput: `tf_outheads.training.fit` against Keras `model.fit`, heads, precisions.

`tf_outheads.training.fit` replaced Keras `model.fit` in the zoo: its own
`strategy.run` loop (one `tf.function` per step that takes the dataset's
iterator), the loss brought to the host after every step, gradients summed
over replicas before clipping, gradient accumulation. This script measures
what that loop costs and what the heads and precisions give through it, in
target tokens per second of training.

Every variant of the product `--loops` × `--heads` × `--precision` gets one
table row:

- loops: `keras` is `model.fit(dataset, steps_per_epoch=N, epochs=1,
  verbose=0)`; `tf_outheads` is one `tf_outheads.training.Trainer` per model
  and `trainer.fit(dataset, steps_per_epoch=N, epochs=1, verbose=0)` per pass:
  the code of `tf_outheads.training.fit`, traced once like Keras' cached
  `train_function`; `tf_outheads-xla` the same with `jit_compile=True` (each
  replica's step XLA-compiled), `tf_outheads-spe` with
  `steps_per_execution=--steps-per-execution` (several steps per host round
  trip), `tf_outheads-xla-spe` both; `tf_outheads-call` (optional) calls
  `tf_outheads.training.fit(model, dataset, ...)` itself on every pass: a new
  `Trainer` each call, so each pass traces its step function again (the cost
  of calling the public function repeatedly, e.g. once per epoch).
- heads: `softmax` (untied), `tied`, `joint<D>` (`JointEmbeddingHead`,
  `{"class_name": "joint", "config": {"joint_dim": D}}`), `sampled<P>`: the
  joint head of `--sampled-joint-dim` (512) trained with
  `SampledSoftmaxLoss(fraction=P/100)`; `<head>+sampled<P>` samples under
  another head.
- precision: `float32`, `mixed_float16`, `mixed_bfloat16`
  (`tf_outheads.training.set_precision`), set while the variant's model is
  built and while it trains, and reset to float32 after each use. On a CPU
  `mixed_float16` is slow (no fast float16 kernels); the same command reports
  them on a GPU machine.

Model. `tf_outheads_zoo.LSTMSeq2Seq` (default: the `lstm-cpu` preset's shape, 1-layer
BiLSTM encoder and LSTM decoder of 256, embeddings 256, dropout 0.1) or
`tf_outheads_zoo.TransformerSeq2Seq` (`--model transformer`: `--hidden-dim` as d_model,
`--ffn-dim`, `--num-heads`, `--num-layers` encoder and decoder layers). Each
variant's model is built with the same seed inside `strategy.scope()`
(`tf_outheads.training.make_strategy(--strategy, devices=--devices)`) and
compiled with `compile_for_translation` (Adam 1e-3, clipnorm 5; `--jit-compile`
reaches Keras' `model.fit` only, the trainer's XLA is its `tf_outheads-xla` loops). `--split-cpu N` exposes the CPU as N logical devices before
TensorFlow starts, so `--strategy mirrored` runs N replicas on one CPU
(`--devices` defaults to those N then).

Data. `--steps` synthetic batches of one fixed shape (`benchmarks/common.py`
`training_batches`: `--batch-size` sentences × `--source-length` /
`--target-length` random ids, no padding), held in memory as
`tf.data.Dataset.from_tensor_slices(...).repeat()`. Both loops open a new
iterator on every call, so every pass of every variant reads the same batches
in the same order. With `--accumulation-steps k` one step (optimizer update)
takes k global batches: the trainer's `accumulation_steps=k`, and for
`keras` an Adam with `gradient_accumulation_steps=k` run for N·k batches, so
both read N·k batches per pass.

Timing. Every model is built first (building re-seeds, which clears
TensorFlow's kernel cache: a function run before it would be instantiated
again inside a timed pass). A warm-up call of `--warmup-steps` steps per
variant is untimed (it traces the step functions; its seconds are reported).
Then each repeat times
one pass of `--steps` steps per variant; the variants take turns and the order
reverses on every repeat (A B C, C B A, ...: `common.interleaved`) so that load
from other processes hits each alike. Reported per variant: median ms per
step of the whole call, and "in loop" (a callback's clock from the first
step's start to `on_train_end`, without the call's set-up and teardown:
iterator, callbacks; Keras still dispatches its batch logs asynchronously),
target tokens/s (non-padding target tokens read in the pass / wall seconds of
the call), the same per process CPU-second, and the ratio of tokens/s to the
first row (ratio of the medians; the JSON adds the median of the per-repeat
ratios). A ratio below 1 is slower than the first row. The dataset has
tf.data autotuning off: with it, a `fit` call here often ended by waiting for
the autotune thread (see `make_dataset`), a cost of the measurement, not of
the loops. Keras' distributed iterator (`--strategy mirrored`) makes its own
pipeline, where that wait can come back: compare "in loop" there.

Run from the repository root:

    python benchmarks/training.py --quick     # tiny sizes, a smoke test (< 1 min)
    python benchmarks/training.py             # keras vs tf_outheads × softmax, joint512, sampled5
    python benchmarks/training.py --loops tf_outheads --precision float32,mixed_bfloat16
    python benchmarks/training.py --split-cpu 2 --strategy mirrored --heads joint512
    python benchmarks/training.py --accumulation-steps 4 --steps 5

Results go to `--output` (JSON, default benchmarks/results/training.json).
"""

import contextlib
import gc
import re
import statistics
import sys
import time

from common import (  # benchmarks/ is the script's folder
    add_batch_arguments, add_thread_arguments, benchmark_parser, check_args, interleaved,
    machine_info, parse_benchmark_args, per_unit, print_header, progress_printer, release, start,
    stats, training_batches, write_record,
)

MODELS = ("lstm", "transformer")
LOOPS = ("keras", "tf_outheads", "tf_outheads-call", "tf_outheads-xla", "tf_outheads-spe",
         "tf_outheads-xla-spe")
# The trainer's options of each `tf_outheads*` loop that keeps one Trainer.
TRAINER_LOOPS = {"tf_outheads": {}, "tf_outheads-xla": {"jit_compile": True},
                 "tf_outheads-spe": {"spe": True},
                 "tf_outheads-xla-spe": {"jit_compile": True, "spe": True}}
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("default", "mirrored")
BASE_HEAD = re.compile(r"softmax|tied|joint(\d+)")
SAMPLED = re.compile(r"sampled(\d+(?:\.\d+)?)")

# `--quick`: every size small, one repeat. Options given explicitly still win.
QUICK = {
    "vocab_size": 500,
    "embedding_dim": 16,
    "hidden_dim": 16,
    "ffn_dim": 32,
    "num_heads": 2,
    "sampled_joint_dim": 32,
    "heads": "softmax,joint32,sampled5",
    "batch_size": 8,
    "source_length": 8,
    "target_length": 8,
    "warmup_steps": 1,
    "steps": 2,
    "repeats": 1,
}


def _names(text):
    return list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))


def parse_head(name, sampled_joint_dim):
    """`(head spec, sampled fraction or None)` of a `--heads` name, or `ValueError`."""
    base, _, sampled = name.partition("+")
    if SAMPLED.fullmatch(base) and not sampled:  # `sampled5`: the joint head, 5 % sampled
        base, sampled = f"joint{sampled_joint_dim}", base
    match = BASE_HEAD.fullmatch(base)
    if match is None or (sampled and not SAMPLED.fullmatch(sampled)):
        raise ValueError(name)
    if match.group(1) is not None:
        head = {"class_name": "joint", "config": {"joint_dim": int(match.group(1))}}
    else:
        head = base
    fraction = None
    if sampled:
        fraction = float(SAMPLED.fullmatch(sampled).group(1)) / 100.0
        if not 0.0 < fraction <= 1.0:
            raise ValueError(name)
    return head, fraction


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    variants = parser.add_argument_group("variants (one row per loop × head × precision)")
    variants.add_argument("--loops", default="keras,tf_outheads",
                          help=f"comma-separated, among {', '.join(LOOPS)}")
    variants.add_argument("--heads", default="softmax,joint512,sampled5",
                          help="comma-separated: softmax, tied, joint<D>, sampled<P> (the joint "
                               "head of --sampled-joint-dim, P%% sampled softmax), "
                               "<head>+sampled<P>")
    variants.add_argument("--sampled-joint-dim", type=int, default=512,
                          help="d_j of the joint head under sampled<P>")
    variants.add_argument("--precision", default="float32",
                          help=f"comma-separated, among {', '.join(PRECISIONS)}")
    distribute = parser.add_argument_group("strategy")
    distribute.add_argument("--strategy", choices=STRATEGIES, default="default")
    distribute.add_argument("--devices", default=None,
                            help="comma-separated devices of --strategy mirrored, e.g. "
                                 "/cpu:0,/cpu:1 (default: every GPU, or the --split-cpu CPUs)")
    distribute.add_argument("--split-cpu", type=int, default=0,
                            help="expose the CPU as this many logical devices (0: as it is)")
    distribute.add_argument("--accumulation-steps", type=int, default=1,
                            help="global batches per optimizer update")
    model = parser.add_argument_group("model (defaults: the lstm-cpu preset's shape)")
    model.add_argument("--model", choices=MODELS, default="lstm",
                       help="tf_outheads_zoo.LSTMSeq2Seq or tf_outheads_zoo.TransformerSeq2Seq")
    model.add_argument("--embedding-dim", type=int, default=256, help="LSTM only")
    model.add_argument("--unidirectional-encoder", action="store_true",
                       help="LSTM only: a left-to-right encoder (lstm-pappas), not a BiLSTM")
    model.add_argument("--autodiff-encoder", action="store_true",
                       help="LSTM only: Keras' LSTM layers in the encoder (encoder.fused = "
                            "False), not tf_outheads.ops.masked_lstm")
    model.add_argument("--autodiff-decoder", action="store_true",
                       help="LSTM only: the decoder loop differentiated by autodiff "
                            "(decoder.fused = False), not tf_outheads.ops.attentional_lstm")
    model.add_argument("--hidden-dim", type=int, default=256, help="LSTM size, or d_model")
    model.add_argument("--num-layers", type=int, default=1,
                       help="LSTM layers, or Transformer encoder and decoder layers each")
    model.add_argument("--ffn-dim", type=int, default=1024, help="Transformer only")
    model.add_argument("--num-heads", type=int, default=4, help="Transformer only")
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--learning-rate", type=float, default=1e-3)
    variants.add_argument("--steps-per-execution", type=int, default=10,
                          help="of the tf_outheads-spe loops")
    model.add_argument("--jit-compile", action="store_true",
                       help="compile with XLA (Keras' model.fit only; for the trainer: "
                            "the tf_outheads-xla loops)")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    data.add_argument("--vocab-size", type=int, default=8000,
                      help="target (and source) vocabulary size")
    add_batch_arguments(data, batch_size=64, batch_help="sentences per global batch")
    timing = parser.add_argument_group("timing")
    timing.add_argument("--warmup-steps", type=int, default=2,
                        help="steps of the untimed first call per variant (tracing)")
    timing.add_argument("--steps", type=int, default=20,
                        help="steps (optimizer updates) per timed pass; also the number of "
                             "distinct batches")
    timing.add_argument("--repeats", type=int, default=3,
                        help="timed passes per variant, interleaved between the variants")
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "training", QUICK, positive=(
        "embedding_dim", "hidden_dim", "num_layers", "ffn_dim", "num_heads", "sampled_joint_dim",
        "batch_size", "source_length", "target_length", "steps", "repeats", "steps_per_execution",
        "accumulation_steps", "warmup_steps"))
    if args.vocab_size < 8:
        parser.error("--vocab-size must be >= 8 (4 special ids plus words)")
    check_args(parser, args, ("split_cpu",), dropout=True)
    if args.model == "lstm" and args.hidden_dim % 2:
        parser.error("the BiLSTM encoder needs an even --hidden-dim")
    if args.model == "transformer" and (args.hidden_dim % args.num_heads or args.hidden_dim % 2):
        parser.error("--hidden-dim (d_model) must be even and divisible by --num-heads")
    for option, known in (("loops", LOOPS), ("precision", PRECISIONS)):
        chosen = _names(getattr(args, option))
        unknown = [name for name in chosen if name not in known]
        if unknown or not chosen:
            parser.error(f"--{option}: unknown {unknown}; known: {', '.join(known)}")
        setattr(args, f"{option}_list", chosen)
    args.head_list = _names(args.heads)
    bad = []
    for name in args.head_list:
        try:
            parse_head(name, args.sampled_joint_dim)
        except ValueError:
            bad.append(name)
    if bad or not args.head_list:
        parser.error(f"--heads: unknown {bad}; known: softmax, tied, joint<D>, sampled<P>, "
                     "<head>+sampled<P> (0 < P <= 100)")
    args.device_list = _names(args.devices) if args.devices else None
    if args.device_list and args.strategy != "mirrored":
        parser.error("--devices needs --strategy mirrored")
    if args.strategy == "mirrored" and args.device_list is None and args.split_cpu > 1:
        args.device_list = [f"/cpu:{index}" for index in range(args.split_cpu)]
    if "keras" in args.loops_list and args.accumulation_steps > 1 and args.strategy != "default":
        # Keras 3.15 applies accumulated gradients in a `cond` that all-reduces
        # inside it: "merge_call called while defining a new graph".
        parser.error("--loops keras with --accumulation-steps > 1 runs only under --strategy "
                     "default (Keras' gradient_accumulation_steps fails under "
                     "MirroredStrategy); time --loops tf_outheads")
    args.variant_list = [f"{loop} / {head} / {precision}" for loop in args.loops_list
                         for head in args.head_list for precision in args.precision_list]
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

from tf_outheads import training  # noqa: E402

if ARGS is not None and ARGS.split_cpu:
    training.split_cpu(ARGS.split_cpu)  # before TensorFlow initialises its devices

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads import SampledSoftmaxLoss, compile_for_translation  # noqa: E402
from tf_outheads.data.special_tokens import PAD_ID  # noqa: E402
from tf_outheads.metrics import parameter_report  # noqa: E402
from tf_outheads_zoo import LSTMSeq2Seq, TransformerSeq2Seq  # noqa: E402


# --------------------------------------------------------------------------
# Variants, models and data
# --------------------------------------------------------------------------
def split_variant(name):
    loop, head, precision = name.split(" / ")
    return loop, head, precision


@contextlib.contextmanager
def precision_policy(policy):
    """Keras' global dtype policy `policy` inside the block, float32 after it."""
    training.set_precision(policy)
    try:
        yield
    finally:
        training.set_precision("float32")


def build_model(args, strategy, name):
    """The variant's model, built with the same seed and compiled in `strategy.scope()`
    (call it under the variant's precision)."""
    loop, head_name, _ = split_variant(name)
    head, fraction = parse_head(head_name, args.sampled_joint_dim)
    keras.utils.set_random_seed(args.seed)
    with strategy.scope():
        if args.model == "lstm":
            model = LSTMSeq2Seq(
                args.vocab_size, args.vocab_size, embedding_dim=args.embedding_dim,
                hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                bidirectional_encoder=not args.unidirectional_encoder, dropout=args.dropout,
                head=head)
            model.encoder.fused = not args.autodiff_encoder
            model.decoder.fused = not args.autodiff_decoder
        else:
            model = TransformerSeq2Seq(
                args.vocab_size, args.vocab_size, model_dim=args.hidden_dim,
                ffn_dim=args.ffn_dim, num_heads=args.num_heads, encoder_layers=args.num_layers,
                decoder_layers=args.num_layers, dropout=args.dropout,
                attention_dropout=args.dropout, ffn_dropout=args.dropout, head=head)
        optimizer = None
        if loop == "keras" and args.accumulation_steps > 1:
            # Keras' own accumulation: one update every k `model.fit` batches.
            optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate, clipnorm=5.0,
                                              gradient_accumulation_steps=args.accumulation_steps)
        compile_for_translation(
            model, learning_rate=args.learning_rate, clipnorm=5.0, jit_compile=args.jit_compile,
            optimizer=optimizer,
            loss=None if fraction is None else SampledSoftmaxLoss(fraction=fraction))
    return model


def make_dataset(args):
    """`(dataset, target tokens of each distinct batch)`: `--steps` fixed-shape batches,
    repeated."""
    rng = np.random.default_rng(args.seed)
    batches = training_batches(args, rng, args.vocab_size, args.vocab_size)
    features = {key: np.stack([batch[0][key].numpy() for batch in batches])
                for key in batches[0][0]}
    target_out = np.stack([batch[1].numpy() for batch in batches])
    tokens = [int(count) for count in np.count_nonzero(target_out != PAD_ID, axis=(1, 2))]
    dataset = tf.data.Dataset.from_tensor_slices((features, target_out)).repeat()
    # No tf.data autotuning (nothing here to tune). With it, releasing the
    # iterator at the end of each `fit` call waited for the autotune thread's
    # next wake-up, 10 ms · (2^k − 1) after the iterator was made: passes of
    # 6.9 s took 10.23 s, with either loop.
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options), tokens


def tokens_read(batch_tokens, batches):
    """Target tokens of the first `batches` batches of the repeated dataset."""
    return sum(batch_tokens[index % len(batch_tokens)] for index in range(batches))


class LoopClock(keras.callbacks.Callback):
    """Seconds from the first step's start to the end of training: the call
    without its set-up (iterator, callbacks) and its teardown.

    `async_safe` and no `on_train_batch_end`: Keras keeps dispatching its batch
    logs asynchronously, as without this callback. Keras flushes those logs
    (waits for the last step) before `on_train_end`; the trainer has read
    every step's loss by then.
    """

    async_safe = True

    def __init__(self):
        super().__init__()
        self.start = self.seconds = None

    def on_train_batch_begin(self, batch, logs=None):
        if self.start is None:
            self.start = time.perf_counter()

    def on_train_end(self, logs=None):
        self.seconds = time.perf_counter() - self.start


class Runner:
    """One variant: its model, and one call of its loop for `steps` optimizer updates."""

    def __init__(self, args, strategy, dataset, name):
        self.args, self.dataset, self.name = args, dataset, name
        self.loop, self.head, self.precision = split_variant(name)
        with precision_policy(self.precision):
            self.model = build_model(args, strategy, name)
        self.trainer = None
        if self.loop in TRAINER_LOOPS:
            options = dict(TRAINER_LOOPS[self.loop])
            if options.pop("spe", False):
                options["steps_per_execution"] = args.steps_per_execution
            self.trainer = training.Trainer(self.model,
                                            accumulation_steps=args.accumulation_steps,
                                            **options)

    def run(self, steps):
        """Trains `steps` updates (from a new iterator); returns the loop's last loss
        and the `LoopClock` seconds."""
        accumulation = self.args.accumulation_steps
        clock = LoopClock()
        with precision_policy(self.precision):
            if self.loop == "keras":
                history = self.model.fit(self.dataset, steps_per_epoch=steps * accumulation,
                                         epochs=1, shuffle=False, verbose=0, callbacks=[clock])
            elif self.loop in TRAINER_LOOPS:
                history = self.trainer.fit(self.dataset, steps_per_epoch=steps, epochs=1,
                                           verbose=0, callbacks=[clock])
            else:
                history = training.fit(self.model, self.dataset, steps_per_epoch=steps, epochs=1,
                                       accumulation_steps=accumulation, verbose=0,
                                       callbacks=[clock])
        return float(history.history["loss"][-1]), clock.seconds


# --------------------------------------------------------------------------
# Timing and summaries
# --------------------------------------------------------------------------
def summarize(args, timings, runners, warmup, tokens_per_pass):
    rows = []
    first = None
    for name, timing in timings.items():
        wall, cpu = per_unit(timing), per_unit(timing, "cpu_seconds")
        in_loop = [1000.0 * extra["loop_seconds"] / units
                   for extra, units in zip(timing["extra"], timing["units"])]
        speed = [tokens_per_pass / s for s in timing["seconds"]]
        cpu_speed = [tokens_per_pass / s for s in timing["cpu_seconds"]]
        if first is None:
            first = {"speed": speed, "cpu_speed": cpu_speed}
        runner = runners[name]
        report = parameter_report(runner.model)
        rows.append({
            "variant": name,
            "loop": runner.loop,
            "head": runner.head,
            "head_spec": parse_head(runner.head, args.sampled_joint_dim)[0],
            "sampled_fraction": parse_head(runner.head, args.sampled_joint_dim)[1],
            "precision": runner.precision,
            "optimizer": type(runner.model.optimizer).__name__,
            "parameters": {"total": report.total, "trainable": report.trainable},
            "ms_per_step": stats(wall),
            "loop_ms_per_step": stats(in_loop),
            "cpu_ms_per_step": stats(cpu),
            "tokens_per_second": stats(speed),
            "tokens_per_cpu_second": stats(cpu_speed),
            "ratio_vs_first_row": {
                "ratio_of_medians": statistics.median(speed) / statistics.median(first["speed"]),
                "median_of_paired_ratios": statistics.median(
                    s / f for s, f in zip(speed, first["speed"])),
                "cpu_ratio_of_medians":
                    statistics.median(cpu_speed) / statistics.median(first["cpu_speed"]),
            },
            "warmup": warmup[name],
            "timings": timing,
        })
    return rows


def print_table(args, rows, tokens_per_pass, replicas):
    per_step = args.accumulation_steps * args.batch_size * args.target_length
    print(f"\ntraining: one pass = {args.steps} step(s) of {args.accumulation_steps} × "
          f"{args.batch_size} × {args.target_length} target tokens ({tokens_per_pass:,} tokens); "
          f"median of {args.repeats} pass(es); {args.strategy} strategy, {replicas} replica(s)")
    width = max(len("variant"), *(len(row["variant"]) for row in rows))
    header = (f"{'variant':{width}s} {'ms/step':>9s} {'in loop':>8s} {'tok/s':>9s} {'min':>8s} "
              f"{'max':>8s} {'× first':>8s} {'paired':>7s} {'tok/CPU-s':>10s} {'× first':>8s} "
              f"{'warm-up s':>10s}")
    print_header(header)
    for row in rows:
        ratio, speed = row["ratio_vs_first_row"], row["tokens_per_second"]
        print(f"{row['variant']:{width}s} {row['ms_per_step']['median']:>9.1f} "
              f"{row['loop_ms_per_step']['median']:>8.1f} "
              f"{speed['median']:>9,.0f} {speed['min']:>8,.0f} {speed['max']:>8,.0f} "
              f"{ratio['ratio_of_medians']:>8.3f} {ratio['median_of_paired_ratios']:>7.3f} "
              f"{row['tokens_per_cpu_second']['median']:>10,.0f} "
              f"{ratio['cpu_ratio_of_medians']:>8.3f} {row['warmup']['seconds']:>10.1f}")
    print(f"(ms/step: the whole call / steps; in loop: from the first step's start to the end "
          "of training, without the call's set-up and teardown; tok/s: non-padding target "
          f"tokens / wall seconds of the call, {per_step:,} per step; × first: tokens/s over the "
          "first row's, ratio of the medians; paired: median of the per-pass ratios; tok/CPU-s: "
          "per process CPU-second; warm-up: the untimed first call of "
          f"{args.warmup_steps} step(s), tracing included)")
    if args.quick:
        print("  (--quick sizes: a smoke test, not a measurement)")
    sys.stdout.flush()


def main(args):
    tf.random.set_seed(args.seed)
    machine = machine_info()
    strategy = training.make_strategy(args.strategy, devices=args.device_list)
    replicas = strategy.num_replicas_in_sync
    devices = ": " + ", ".join(args.device_list) if args.device_list else ""
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {machine['cpu_count']} CPUs, "
          f"devices {machine['devices']}; strategy {type(strategy).__name__} "
          f"({replicas} replica(s){devices})", flush=True)
    if args.model == "lstm":
        shape = (f"LSTMSeq2Seq: {args.num_layers} layer(s), BiLSTM encoder, hidden "
                 f"{args.hidden_dim}, embedding {args.embedding_dim}")
    else:
        shape = (f"TransformerSeq2Seq: {args.num_layers}+{args.num_layers} layers, d_model "
                 f"{args.hidden_dim}, d_ff {args.ffn_dim}, {args.num_heads} heads")
    print(f"{shape}, dropout {args.dropout}, |V| {args.vocab_size:,}; batches of "
          f"{args.batch_size} × {args.source_length} / {args.target_length} tokens; accumulation "
          f"{args.accumulation_steps}" + (" (--quick)" if args.quick else ""), flush=True)
    started = time.perf_counter()
    dataset, batch_tokens = make_dataset(args)
    batches_per_pass = args.steps * args.accumulation_steps
    tokens_per_pass = tokens_read(batch_tokens, batches_per_pass)

    # Every model is built before any is traced: building one re-seeds
    # (`keras.utils.set_random_seed`), which clears TensorFlow's kernel cache,
    # and each function already run would be instantiated again (about a
    # second) on its next call, inside a timed pass.
    runners, built = {}, {}
    for name in args.variant_list:
        start = time.perf_counter()
        runners[name] = Runner(args, strategy, dataset, name)
        built[name] = time.perf_counter() - start
    warmup = {}
    for name in args.variant_list:
        start = time.perf_counter()
        loss, _ = runners[name].run(args.warmup_steps)
        warmup[name] = {"build_seconds": built[name], "seconds": time.perf_counter() - start,
                        "steps": args.warmup_steps, "loss": loss}
        print(f"  {name}: built in {built[name]:.1f} s, warm-up {warmup[name]['seconds']:.1f} s "
              f"(loss {loss:.4f}, {type(runners[name].model.optimizer).__name__})", flush=True)
    gc.collect()  # the tracing garbage, not inside the first timed pass

    last_loss = {}

    def train_once(name):
        last_loss[name], loop_seconds = runners[name].run(args.steps)
        return args.steps, {"loss": last_loss[name], "loop_seconds": loop_seconds}

    progress = progress_printer("tok/s ", lambda t: f"{tokens_per_pass / t['seconds'][-1]:,.0f}",
                                args.repeats)
    print("training: timed passes, interleaved", flush=True)
    timings = interleaved(args.variant_list, train_once, args.repeats, progress)
    rows = summarize(args, timings, runners, warmup, tokens_per_pass)
    print_table(args, rows, tokens_per_pass, replicas)

    del runners
    release()
    return write_record("training", args, machine, started, {
        "strategy": {"name": args.strategy, "class": type(strategy).__name__,
                     "replicas": replicas, "devices": args.device_list},
        "data": {"distinct_batches": len(batch_tokens), "batch_shape": {
                     "source_ids": [args.batch_size, args.source_length],
                     "target_in": [args.batch_size, args.target_length]},
                 "tokens_per_batch": batch_tokens, "batches_per_pass": batches_per_pass,
                 "tokens_per_pass": tokens_per_pass},
        "rows": rows,
    })


if __name__ == "__main__":
    main(ARGS)
