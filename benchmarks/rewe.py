"""Training-step overhead of the ReWE head against the same model without it.

ReWE (Jauregi Unanue et al. 2019) adds, next to the categorical output layer, a
two-layer network on the decoder state (Linear(d_h→200) → ReLU →
Linear(200→m), Eq. 5) and its cosine loss against the gold words' embeddings
(Eq. 6), weighted by λ = 20 (Eq. 7). The paper says the module "adds
negligible computational costs and training time"; the issue that asked for
this benchmark set the goal at most 5% more time per training step.

One run on the CPU times `tf_outheads_zoo.lstm.LSTMSeq2Seq` `train_on_batch` steps for each
variant of `--variants`:

- `plain`: the model as it is, `MaskedSequenceCrossEntropy` (the reference);
- `rewe`: the same model with `rewe={"hidden_dim": --rewe-units}` regressing its
  own target input embedding (stop-gradient), compiled by
  `compile_for_translation(..., auxiliary_weights={"rewe": --rewe-weight})`: two-term
  objective, `ReWELoss("cosine")` for the `"rewe"` head;
- `rewe-pretrained` (optional): the same with a frozen `(V, m)` table of
  pretrained vectors (random here: their values do not change the speed);
- `rewe-mse` (optional): the `rewe` model with the squared-error loss;
- `contrastive-a` (optional): supplementary C's set-up A, the loss on the
  input embedding of the arg-max word (no ReWE weights).

Default sizes are the paper's (supplementary A): 1-layer BiLSTM encoder and
LSTM decoder of 1024, embeddings 300, ReWE 1024 → 200 → 300, batches of 40
sentences, dropout 0.3, |V| 32000 (their BPE vocabulary for en-fr; 50K with
words), the untied softmax. `--quick` makes every size tiny (a smoke test,
not a measurement).

Data. Synthetic batches of fixed shape: `--batch-size` sentences ×
`--source-length` / `--target-length` tokens, random ids, no padding (every
target token counts). Every model is built with the same seed (the ReWE head is
built after every other weight, so the rest of the model starts equal) and
compiled the same way (Adam 1e-3, clipnorm 5, graph mode unless
`--jit-compile`).

Timing. After `--warmup-steps` untimed steps (tracing), each repeat times
`--steps` calls of `train_on_batch` on the same list of batches; the variants
take turns and the order reverses on every repeat (A B, B A, ...:
`benchmarks/common.py`'s `interleaved`) so that load from other processes
hits each alike. Reported: median ms/step over repeats, target tokens/s, and
the overhead against `plain` (ratio of the medians minus one; the JSON also
has the median of the per-repeat ratios and the same per process CPU-second),
next to the parameters in training and at inference (the ReWE group is not
part of the inference model).

Run from the repository root:

    python benchmarks/rewe.py --quick      # tiny sizes, a smoke test (< 1 min)
    python benchmarks/rewe.py              # the paper's sizes (several minutes on 2 cores)
    python benchmarks/rewe.py --variants plain,rewe,rewe-pretrained,contrastive-a --repeats 7

Results go to `--output` (JSON, default benchmarks/results/rewe.json).
"""

import argparse
import statistics
import sys
import time

from common import (  # benchmarks/ is the script's folder
    QUICK_BATCHES, add_batch_arguments, add_model_arguments, add_step_arguments,
    add_thread_arguments, add_variants_argument, benchmark_parser, check_args, described_machine,
    interleaved, parse_benchmark_args, parse_variants, per_unit, print_header, progress_printer,
    release, start, stats, training_batches, warm_up, write_record,
)

PLAIN = "plain"
VARIANTS = (PLAIN, "rewe", "rewe-pretrained", "rewe-mse", "contrastive-a")
OVERHEAD_GOAL = 0.05  # at most 5% more time per training step
GOAL_VARIANT = "rewe"

# `--quick`: every size small, one repeat. Options given explicitly still win.
QUICK = {
    "embedding_dim": 16,
    "hidden_dim": 32,
    "rewe_units": 8,
    "vocab_size": 500,
    **QUICK_BATCHES,
}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    add_variants_argument(parser, "plain,rewe", VARIANTS, PLAIN)
    model = parser.add_argument_group("model (defaults: the paper's, supplementary A)")
    add_model_arguments(model, 300, 1024, num_layers=1, dropout=0.3,
                        jit_help="compile the train steps with XLA",
                        helps={"embedding_dim": "embeddings, = m, the size ReWE regresses"})
    model.add_argument("--bidirectional-encoder", action=argparse.BooleanOptionalAction,
                       default=True)
    model.add_argument("--head", default="softmax", help="LSTMSeq2Seq's head (a short name)")
    model.add_argument("--rewe-units", type=int, default=200, help="ReWE's ReLU layer")
    model.add_argument("--rewe-weight", type=float, default=20.0, help="λ of Eq. 7")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    data.add_argument("--vocab-size", type=int, default=32000,
                      help="target (and source) vocabulary size")
    add_batch_arguments(data, batch_size=40)
    timing = parser.add_argument_group("timing")
    add_step_arguments(timing, steps=3, repeats=5, warmup=2)
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "rewe", QUICK, positive=(
        "embedding_dim", "hidden_dim", "num_layers", "rewe_units", "batch_size",
        "source_length", "target_length", "steps", "repeats"))
    check_args(parser, args, ("warmup_steps",), dropout=True)
    if args.vocab_size < 8:
        parser.error("--vocab-size must be >= 8 (4 special ids plus words)")
    if args.bidirectional_encoder and args.hidden_dim % 2:
        parser.error("a bidirectional encoder needs an even --hidden-dim")
    args.variant_list = parse_variants(parser, args.variants, VARIANTS, PLAIN)
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tf_outheads.losses import ReWELoss  # noqa: E402
from tf_outheads.metrics import parameter_report  # noqa: E402
from tf_outheads.training.translation import compile_for_translation  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402



# --------------------------------------------------------------------------
# Models and data
# --------------------------------------------------------------------------
def rewe_spec(args, variant):
    """`LSTMSeq2Seq(rewe=...)` and `compile_for_translation` keywords of a variant."""
    if variant == PLAIN:
        return None, {}
    compile_keywords = {"auxiliary_weights": {"rewe": args.rewe_weight}}
    if variant == "rewe":
        return {"hidden_dim": args.rewe_units}, compile_keywords
    if variant == "rewe-pretrained":
        return {"hidden_dim": args.rewe_units, "targets": "pretrained"}, compile_keywords
    if variant == "rewe-mse":
        return {"hidden_dim": args.rewe_units}, dict(
            compile_keywords, auxiliary_losses={"rewe": ReWELoss("mse")})
    return {"prediction": "predicted_word"}, compile_keywords  # contrastive-a


def build_model(args, variant):
    # Same seed for every variant: the ReWE head is built last, so every other
    # weight starts from the same value.
    keras.utils.set_random_seed(args.seed)
    rewe, compile_keywords = rewe_spec(args, variant)
    model = LSTMSeq2Seq(
        args.vocab_size, args.vocab_size, embedding_dim=args.embedding_dim,
        hidden_dim=args.hidden_dim, num_layers=args.num_layers,
        bidirectional_encoder=args.bidirectional_encoder, dropout=args.dropout,
        head=args.head, rewe=rewe,
    )
    if variant == "rewe-pretrained":
        rng = np.random.default_rng([args.seed, 1])
        model.rewe.set_target_vectors(
            rng.standard_normal((args.vocab_size, args.embedding_dim)).astype(np.float32))
    compile_for_translation(model, jit_compile=args.jit_compile, **compile_keywords)
    return model


def parameters(model):
    report = parameter_report(model)
    rewe = report.groups.get("rewe", 0)
    return {"total": report.total, "trainable": report.trainable, "rewe": rewe,
            "rewe_trainable": report.trainable_groups.get("rewe", 0),
            "inference": report.total - rewe, "groups": report.groups}


def synthetic_batches(args):
    rng = np.random.default_rng(args.seed)
    return training_batches(args, rng, args.vocab_size, args.vocab_size)


# --------------------------------------------------------------------------
# Timing and summaries
# --------------------------------------------------------------------------
def summarize(args, timings, params, warmup, last_losses):
    tokens = args.batch_size * args.target_length  # no padding
    base_wall, base_cpu = per_unit(timings[PLAIN]), per_unit(timings[PLAIN], "cpu_seconds")
    rows = []
    for name, timing in timings.items():
        wall, cpu = per_unit(timing), per_unit(timing, "cpu_seconds")
        rows.append({
            "variant": name,
            "ms_per_step": stats(wall),
            "cpu_ms_per_step": stats(cpu),
            "tokens_per_second_median": tokens * 1000.0 / statistics.median(wall),
            "overhead_vs_plain": {
                "ratio_of_medians_minus_one":
                    statistics.median(wall) / statistics.median(base_wall) - 1.0,
                "median_of_paired_ratios_minus_one": statistics.median(
                    w / b for w, b in zip(wall, base_wall)) - 1.0,
                "cpu_ratio_of_medians_minus_one":
                    statistics.median(cpu) / statistics.median(base_cpu) - 1.0,
            },
            "parameters": params[name],
            "warmup_seconds": warmup[name],
            "last_logs": last_losses[name],
            "timings": timing,
        })
    return rows


def goal_text(overhead):
    return f"<= {100 * OVERHEAD_GOAL:.0f}% {'met' if overhead <= OVERHEAD_GOAL else 'MISSED'}"


def print_table(args, rows):
    print(f"\ntraining: train_on_batch after warm-up, median of {args.repeats} repeat(s) × "
          f"{args.steps} step(s); {args.batch_size * args.target_length} target tokens per step")
    header = (f"{'variant':16s} {'params':>12s} {'inference':>12s} {'ReWE':>9s} {'ms/step':>9s} "
              f"{'tok/s':>8s} {'overhead':>9s} {'paired':>8s} {'CPU':>8s}  goal")
    print_header(header, 12)
    for row in rows:
        p, o = row["parameters"], row["overhead_vs_plain"]
        overhead = o["ratio_of_medians_minus_one"]
        goal = goal_text(overhead) if row["variant"] == GOAL_VARIANT else ""
        print(f"{row['variant']:16s} {p['total']:>12,} {p['inference']:>12,} {p['rewe']:>9,} "
              f"{row['ms_per_step']['median']:>9.1f} {row['tokens_per_second_median']:>8,.0f} "
              f"{100 * overhead:>+8.1f}% "
              f"{100 * o['median_of_paired_ratios_minus_one']:>+7.1f}% "
              f"{100 * o['cpu_ratio_of_medians_minus_one']:>+7.1f}%  {goal}")
    print("(overhead: ms/step against plain, ratio of the medians − 1; paired: median of the "
          "per-repeat ratios − 1; CPU: the same per process CPU-second; inference: parameters "
          "without the ReWE group, which decoding and export never touch)")
    sys.stdout.flush()


def main(args):
    machine = described_machine(args.seed)
    encoder = " (BiLSTM encoder)" if args.bidirectional_encoder else ""
    print(f"LSTMSeq2Seq: {args.num_layers} layer(s){encoder}, "
          f"embedding {args.embedding_dim}, hidden {args.hidden_dim}, dropout {args.dropout}, "
          f"head {args.head}, |V| {args.vocab_size:,}; ReWE {args.hidden_dim} → {args.rewe_units} "
          f"→ {args.embedding_dim}, λ = {args.rewe_weight:g}"
          + (" (--quick)" if args.quick else ""), flush=True)
    started = time.perf_counter()
    batches = synthetic_batches(args)
    models, params = {}, {}
    for name in args.variant_list:
        start = time.perf_counter()
        models[name] = build_model(args, name)
        params[name] = parameters(models[name])
        print(f"  built {name}: {params[name]['total']:,} parameters ({params[name]['rewe']:,} "
              f"ReWE, {params[name]['inference']:,} at inference) "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    for name in args.variant_list:
        if params[name]["inference"] != params[PLAIN]["total"]:
            raise AssertionError(f"{name}: {params[name]['inference']:,} inference parameters, "
                                 f"plain has {params[PLAIN]['total']:,}")

    print("training: warm-up (tracing)", flush=True)
    warmup = warm_up(models, batches, args.warmup_steps)

    last_logs = {}

    def train_once(name):
        logs = None
        for features, target_out in batches:
            logs = models[name].train_on_batch(features, target_out, return_dict=True)
        last_logs[name] = {k: float(v) for k, v in logs.items()}
        return len(batches), None

    progress = progress_printer(
        "ms/step ", lambda t: f"{1000 * t['seconds'][-1] / t['units'][-1]:.1f}", args.repeats,
        show_order=True)
    print("training: ms/step, interleaved", flush=True)
    timings = interleaved(args.variant_list, train_once, args.repeats, progress)
    rows = summarize(args, timings, params, warmup, last_logs)
    print_table(args, rows)

    goal = None
    by_name = {row["variant"]: row for row in rows}
    if GOAL_VARIANT in by_name:
        overhead = by_name[GOAL_VARIANT]["overhead_vs_plain"]["ratio_of_medians_minus_one"]
        goal = {"variant": GOAL_VARIANT, "overhead": overhead, "goal": OVERHEAD_GOAL,
                "met": overhead <= OVERHEAD_GOAL}
        print(f"\ngoal: ReWE training-step overhead {100 * overhead:+.1f}% "
              f"({goal_text(overhead)})")
    else:
        print(f"\ngoal: not checked ({GOAL_VARIANT} is not among --variants)")
    if args.quick:
        print("  (--quick sizes: a smoke test, not a measurement of the goal)")

    del models
    release()
    return write_record("rewe", args, machine, started, {
        "variants": {name: rewe_spec(args, name)[0] for name in args.variant_list},
        "rows": rows,
        "goal": goal,
    })


if __name__ == "__main__":
    main(ARGS)
