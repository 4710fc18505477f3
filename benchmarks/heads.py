"""Training and greedy-decoding speed of the output heads, as ratios to the tied head.

One run on CPU times the full zoo model, `tf_outheads_zoo.lstm.LSTMSeq2Seq` (by default 2
layers, embedding = hidden = 512, dropout 0.3: the setup of Pappas et al. 2018
§4.1), with four output heads:

- `softmax`: the untied output layer (`SoftmaxHead`, its own `(V, d_h)` weights);
- `tied`: weight tying (`TiedSoftmaxHead`, the target embedding `E` is the output
  weight matrix). Every ratio is to this head at the same `|V|`;
- `joint(512)` and `joint(2048)`: `JointEmbeddingHead` (Eq. 15) with `d_j` 512 and
  2048 (`--joint-dims`), which computes `E' = σ(E·U + b_u)` once per training
  step and once per decode call.

at each target vocabulary size of `--vocab-sizes` (16000 and 32000 by default).

Data. Synthetic batches of fixed shape: `--batch-size` sentences × `--source-length`
source tokens and `--target-length` target tokens, random ids, no padding (every
target token counts). Vocabularies of 16k/32k are the sizes the paper's
comparisons are about; they are not what a tokenizer trained on the embedded
Bible corpus gives (its preset uses 8000 pieces and ~31k verse pairs), so the
ids are random rather than real. The speed of these models does not depend on
which ids they see.

Training. Each model is built with the same seed and compiled with
`tf_outheads.training.fit.compile_for_translation` (Adam 1e-3, clipnorm 5,
`MaskedSequenceCrossEntropy`, graph mode unless `--jit-compile`). After
`--warmup-steps` untimed `train_on_batch` calls (tracing), each repeat times
`--steps` calls of `train_on_batch` on the same list of batches. Models take
turns within a repeat and the order reverses on every repeat (A B C D,
D C B A, ...) so that load from other processes hits every head alike.
Reported: median steps/s over repeats, target tokens/s, and the ratio to the
tied head (ratio of the medians; the JSON also has the median of the
per-repeat ratios, and the same numbers per process CPU-second, which move
less with the machine's load).

Greedy decoding. One decode call translates `--decode-batches` batches of
`--decode-batch-size` random source sentences of `--source-length` tokens, the way
`tf_outheads.decoding.translator.Translator` does: `Translator.head_cache()`
gives the head's `inference_cache()`, computed once and kept until the weights
change (each call pays only the weights fingerprint check; timed, as it is part
of what a user waits for), then each batch runs one `tf.function` of
`tf_outheads.decoding.greedy_search` over `model.make_step_fn(cache)` from
`model.initial_decoding_state(source_ids, max_length)`. The weights are untrained, so a
sentence would stop at whatever step EOS happens to win; to give every head the
same work, every sentence emits exactly `--decode-length` tokens (EOS blocked
with `min_length` until that limit). Reported: sentences/s, emitted tokens/s,
the cache's time and share of the call, the ratio to tied, and the ratio to
tied without the cache time (the limit for a call of many sentences: a joint
head's cache costs `|V|·d·d_j` multiply-adds, amortized over the sentences of
one call, so the with-cache ratio depends on `--decode-batches ×
--decode-batch-size`). Decoding is timed before training, with the initial
weights; models are interleaved as for training.

Goals (from the issue that asked for this benchmark), printed next to the
ratios: joint(512) training >= 0.90× tied; joint decoding >= 0.97× tied. The
decoding goal is checked for `d_j = --goal-joint-dim` (512, the paper's `d`):
with `d_j` > `d` every decoding step multiplies by a `(d_j, V)` kernel instead of
a `(d, V)` one, `d_j / d` times the tied head's output work, so joint(2048) is
reported for scale, not against the goal. Expect in training, too, a cost that
no implementation removes: `E'` takes `|V|·d·d_j` multiply-adds per step against
`B·T·d_j·|V|` for the logits, i.e. `d / (B·T)` more output-layer work (0.53 at
the defaults, 32 × 30 target tokens), so the training ratio rises with the batch.
With `--quick` the joint heads are `d_j = d` and `4·d` (32 and 128) and the goal
is checked for joint(32); its numbers are a smoke test, not a measurement.

Sizes are per vocabulary: the four models of one `|V|` are built, timed and
freed before the next `|V|` (the 32k models with Adam state take ~1 GB each).

Run from the repository root:

    python benchmarks/heads.py --quick         # tiny sizes, a smoke test (< 1 min)
    python benchmarks/heads.py                 # the full comparison (tens of minutes on 2 cores)
    python benchmarks/heads.py --vocab-sizes 32000 --joint-dims 512 --repeats 5

Results go to `--output` (JSON, default benchmarks/results/heads.json).
"""

import statistics
import time

from common import (  # benchmarks/ is the script's folder
    QUICK_BATCHES, add_batch_arguments, add_decode_arguments, add_joint_arguments,
    add_model_arguments, add_step_arguments, add_thread_arguments, benchmark_parser, check_args,
    described_machine, goal_text, interleaved, parse_benchmark_args, parse_list, print_header,
    progress_printer, random_sentences, release, start, stats, time_greedy_decoding,
    train_on_batches, training_batches, warm_up, write_record,
)

# `--quick`: every size small, one repeat. Options given explicitly still win.
QUICK = {
    "embedding_dim": 32,
    "hidden_dim": 32,
    "num_layers": 1,
    "joint_dims": "32,128",  # d_j = d and 4·d, as 512 and 2048 are to d = 512
    "goal_joint_dim": 32,
    "vocab_sizes": "500,1000",
    **QUICK_BATCHES,
    "decode_batches": 1,
    "decode_batch_size": 8,
    "decode_length": 10,
}

TIED = "tied"
TRAINING_GOAL = 0.90
DECODING_GOAL = 0.97


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    model = parser.add_argument_group("model")
    add_model_arguments(
        model, 512, 512, num_layers=2, dropout=0.3,
        jit_help="compile the train steps with XLA (compile_for_translation's jit_compile)",
        helps={"dropout": "LSTMSeq2Seq's dropout (its default is 0.3)"})
    add_joint_arguments(model, "512,2048", 512, " to time",
                        "the joint head the goals are checked for")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    data.add_argument("--vocab-sizes", default="16000,32000",
                      help="comma-separated target vocabulary sizes |V|")
    data.add_argument("--source-vocab-size", type=int, default=0,
                      help="source vocabulary size (0: the same as each target |V|)")
    add_batch_arguments(data, batch_size=32)
    timing = parser.add_argument_group("timing")
    add_step_arguments(timing, steps=4, repeats=3, warmup=2, between="the heads")
    add_decode_arguments(timing, batches=4, length=30)
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "heads", QUICK, positive=(
        "embedding_dim", "hidden_dim", "num_layers", "batch_size", "source_length",
        "target_length", "steps", "repeats", "decode_batch_size", "decode_length"))
    check_args(parser, args, ("warmup_steps", "decode_batches", "source_vocab_size"), dropout=True)
    try:
        args.vocab_list = parse_list(args.vocab_sizes)
        args.joint_list = parse_list(args.joint_dims)
    except ValueError as error:
        parser.error(f"--vocab-sizes and --joint-dims are comma-separated ints ({error})")
    if not args.vocab_list or min(args.vocab_list) < 8:
        parser.error("--vocab-sizes needs at least one size >= 8 (4 special ids plus words)")
    if args.joint_list and min(args.joint_list) < 1:
        parser.error("--joint-dims must be positive")
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads.metrics import parameter_report  # noqa: E402
from tf_outheads.training.translation import compile_for_translation  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402



# --------------------------------------------------------------------------
# Heads and models
# --------------------------------------------------------------------------
def head_specs(joint_dims):
    """Display name → `LSTMSeq2Seq(head=...)` argument."""
    specs = {"softmax": "softmax", TIED: "tied"}
    for joint_dim in joint_dims:
        specs[f"joint({joint_dim})"] = {"class_name": "joint", "config": {"joint_dim": joint_dim}}
    return specs


def build_model(args, source_vocab, target_vocab, head):
    # Same seed for every head: all but the head's own weights start equal.
    keras.utils.set_random_seed(args.seed)
    model = LSTMSeq2Seq(
        source_vocab, target_vocab, embedding_dim=args.embedding_dim,
        hidden_dim=args.hidden_dim, num_layers=args.num_layers, dropout=args.dropout,
        head=head,
    )
    compile_for_translation(model, jit_compile=args.jit_compile)
    return model


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
def synthetic_batches(args, source_vocab, target_vocab, rng):
    batches = training_batches(args, rng, source_vocab, target_vocab)
    decode = [tf.constant(random_sentences(rng, args.decode_batch_size, args.source_length,
                                           source_vocab))
              for _ in range(args.decode_batches)]
    return batches, decode


# --------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------
def summarize(timing, reference):
    """Rates per wall and CPU second, with ratios to `reference` (the tied head)."""
    rates = [u / s for u, s in zip(timing["units"], timing["seconds"])]
    cpu_rates = [u / s for u, s in zip(timing["units"], timing["cpu_seconds"])]
    out = {"per_second": stats(rates), "per_cpu_second": stats(cpu_rates)}
    if reference is not None:
        base = [u / s for u, s in zip(reference["units"], reference["seconds"])]
        base_cpu = [u / s for u, s in zip(reference["units"], reference["cpu_seconds"])]
        out["ratio_to_tied"] = {
            "ratio_of_medians": statistics.median(rates) / statistics.median(base),
            "median_of_paired_ratios": statistics.median(a / b for a, b in zip(rates, base)),
            "per_cpu_second_ratio_of_medians":
                statistics.median(cpu_rates) / statistics.median(base_cpu),
        }
    return out


# --------------------------------------------------------------------------
# One vocabulary size
# --------------------------------------------------------------------------
def run_vocabulary(args, target_vocab, specs, goal_name):
    source_vocab = args.source_vocab_size or target_vocab
    rng = np.random.default_rng(args.seed)
    batches, decode_sources = synthetic_batches(args, source_vocab, target_vocab, rng)
    tokens_per_step = args.batch_size * args.target_length  # no padding
    print(f"\n=== |V| = {target_vocab:,} (source {source_vocab:,}); batch {args.batch_size} × "
          f"{args.source_length} source / {args.target_length} target tokens ===", flush=True)

    models, params = {}, {}
    for name, spec in specs.items():
        start = time.perf_counter()
        models[name] = build_model(args, source_vocab, target_vocab, spec)
        report = parameter_report(models[name])
        params[name] = {"total": report.total, "output_capacity": report.output_capacity}
        print(f"  built {name}: {report.total:,} parameters, output-layer capacity "
              f"{report.output_capacity['parameters']:,} ({time.perf_counter() - start:.1f} s)",
              flush=True)
    names = list(models)
    result = {"source_vocab": source_vocab, "target_vocab": target_vocab,
              "tokens_per_step": tokens_per_step, "parameters": params}

    progress = progress_printer("", lambda t: f"{t['units'][-1] / t['seconds'][-1]:,.2f}/s",
                                args.repeats, show_order=True, sep="  ")
    # Greedy decoding first, with the initial (same-seed) weights.
    if args.decode_batches:
        sentences, timings = time_greedy_decoding(models, decode_sources, args,
                                                  "greedy decoding: sentences/s", progress)
        decode = {}
        for name in names:
            summary = summarize(timings[name], None if name == TIED else timings[TIED])
            cache = [e["cache_seconds"] for e in timings[name]["extra"]]
            summary["cache_seconds"] = stats(cache)
            summary["cache_share"] = statistics.median(
                c / s for c, s in zip(cache, timings[name]["seconds"]))
            # Without the once-per-call cache: what a call of many sentences tends to.
            summary["per_second_excluding_cache"] = stats(
                [u / (s - c) for u, s, c in zip(timings[name]["units"], timings[name]["seconds"], cache)])
            summary["tokens_per_second_median"] = (
                summary["per_second"]["median"] * args.decode_length)
            summary.update(sentences_per_call=sentences, timings=timings[name])
            decode[name] = summary
        base = decode[TIED]["per_second_excluding_cache"]["median"]
        for name in names:
            if name != TIED:
                decode[name]["ratio_to_tied"]["excluding_cache_ratio_of_medians"] = (
                    decode[name]["per_second_excluding_cache"]["median"] / base)
        result["decode"] = decode

    # Training.
    print("training: warm-up (tracing)", flush=True)
    warmup = warm_up(models, batches, args.warmup_steps)
    print("training: steps/s", flush=True)
    timings = interleaved(names, lambda name: train_on_batches(models[name], batches),
                          args.repeats, progress)
    train = {}
    for name in names:
        summary = summarize(timings[name], None if name == TIED else timings[TIED])
        summary["tokens_per_second_median"] = summary["per_second"]["median"] * tokens_per_step
        summary.update(warmup_seconds=warmup[name], timings=timings[name])
        train[name] = summary
    result["train"] = train

    print_tables(args, target_vocab, result, goal_name)
    del models
    release()
    return result


def print_tables(args, target_vocab, result, goal_name):
    def ratio_cell(row):
        return row["ratio_to_tied"]["ratio_of_medians"] if "ratio_to_tied" in row else 1.0

    print(f"\ntraining, |V| = {target_vocab:,}: train_on_batch after warm-up, median of "
          f"{args.repeats} repeat(s) × {args.steps} steps")
    header = (f"{'head':12s} {'params':>12s} {'out. cap.':>11s} {'steps/s':>8s} {'tok/s':>9s} "
              f"{'× tied':>7s} {'× tied CPU':>10s}  goal")
    print_header(header, 14)
    for name, row in result["train"].items():
        ratio = ratio_cell(row)
        cpu = row["ratio_to_tied"]["per_cpu_second_ratio_of_medians"] if "ratio_to_tied" in row else 1.0
        goal = goal_text(ratio, TRAINING_GOAL, ".2f") if name == goal_name else ""
        params = result["parameters"][name]
        print(f"{name:12s} {params['total']:>12,} {params['output_capacity']['parameters']:>11,} "
              f"{row['per_second']['median']:>8.3f} {row['tokens_per_second_median']:>9,.0f} "
              f"{ratio:>7.3f} {cpu:>10.3f}  {goal}")
    if "decode" not in result:
        return
    decode = result["decode"]
    any_row = next(iter(decode.values()))
    print(f"\ngreedy decoding, |V| = {target_vocab:,}: {any_row['sentences_per_call']} sentences "
          f"per call × {args.decode_length} tokens, head cache kept while the weights do not change (cache ms = fingerprint check), median of "
          f"{args.repeats} repeat(s)")
    header = (f"{'head':12s} {'sent/s':>8s} {'tok/s':>9s} {'cache ms':>9s} {'cache %':>8s} "
              f"{'× tied':>7s} {'× tied CPU':>10s} {'× tied no cache':>15s}  goal")
    print_header(header, 14)
    for name, row in decode.items():
        ratio = ratio_cell(row)
        cpu = row["ratio_to_tied"]["per_cpu_second_ratio_of_medians"] if "ratio_to_tied" in row else 1.0
        no_cache = (row["ratio_to_tied"]["excluding_cache_ratio_of_medians"]
                    if "ratio_to_tied" in row else 1.0)
        goal = goal_text(ratio, DECODING_GOAL, ".2f") if name == goal_name else ""
        print(f"{name:12s} {row['per_second']['median']:>8.2f} "
              f"{row['tokens_per_second_median']:>9,.0f} "
              f"{1000 * row['cache_seconds']['median']:>9.1f} {100 * row['cache_share']:>7.1f}% "
              f"{ratio:>7.3f} {cpu:>10.3f} {no_cache:>15.3f}  {goal}")


def main(args):
    machine = described_machine(args.seed)
    print(f"LSTMSeq2Seq: {args.num_layers} layer(s), embedding {args.embedding_dim}, hidden "
          f"{args.hidden_dim}, dropout {args.dropout}; |V| {args.vocab_list}"
          + (" (--quick)" if args.quick else ""), flush=True)
    specs = head_specs(args.joint_list)
    goal_name = f"joint({args.goal_joint_dim})"
    if goal_name not in specs:
        print(f"note: {goal_name} is not among --joint-dims, so no goal is checked", flush=True)

    started = time.perf_counter()
    results = {}
    for target_vocab in args.vocab_list:
        results[str(target_vocab)] = run_vocabulary(args, target_vocab, specs, goal_name)

    goals = {}
    for vocab, result in results.items():
        train = result["train"].get(goal_name)
        decode = result.get("decode", {}).get(goal_name)
        goals[vocab] = {
            "train_ratio": train and train["ratio_to_tied"]["ratio_of_medians"],
            "train_goal": TRAINING_GOAL,
            "decode_ratio": decode and decode["ratio_to_tied"]["ratio_of_medians"],
            "decode_goal": DECODING_GOAL,
        }
    print(f"\nsummary ({goal_name} / tied, ratio of medians):")
    for vocab, goal in goals.items():
        parts = []
        for what, ratio, target in (("training", goal["train_ratio"], TRAINING_GOAL),
                                    ("decoding", goal["decode_ratio"], DECODING_GOAL)):
            if ratio is not None:
                parts.append(f"{what} {ratio:.3f} ({goal_text(ratio, target, '.2f')})")
        print(f"  |V| = {int(vocab):,}: " + ("; ".join(parts) or "no goal head timed"))
    if args.quick:
        print("  (--quick sizes: a smoke test, not a measurement of the goals)")

    return write_record("heads", args, machine, started, {
        "heads": {name: spec for name, spec in specs.items()},
        "results": results,
        "goals": goals,
    })


if __name__ == "__main__":
    main(ARGS)
