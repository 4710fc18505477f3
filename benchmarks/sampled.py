"""Training step time of sampled softmax against the full softmax, per output head.

Heads `softmax`, `tied` and `joint(D)` (`--joint-dims`), each with its full
softmax and `SampledSoftmaxLoss(fraction=p)` rows (`--fractions`), at each
`|V|` of `--vocab-sizes`: (1) the output layer + loss + optimizer step alone,
(2) its peak memory, one child process per configuration (`--memory`),
(3) the whole `LSTMSeq2Seq` (`--model`). What each measures, the expected
costs and the goals: benchmarks/docs/sampled.md.

Run from the repository root:

    python benchmarks/sampled.py --quick          # tiny sizes, a smoke test (< 1 min)
    python benchmarks/sampled.py                  # the full comparison (about 1 h on 2 cores)
    python benchmarks/sampled.py --vocab-sizes 128000 --no-model --no-memory

Results go to `--output` (JSON, default benchmarks/results/sampled.json).
"""

import argparse
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

from common import (  # benchmarks/ is the script's folder
    add_joint_arguments, add_model_arguments, add_step_arguments, add_thread_arguments,
    benchmark_parser, check_args, described_machine, fmt_ms, goal_text, interleaved, ms_cell,
    paired_ratios, parse_benchmark_args, parse_list, per_unit, print_header, progress_printer,
    release, start, stats, train_on_batches, warm_up, write_record,
)

# `--quick`: every size small, one repeat. Options given explicitly still win.
QUICK = {
    "embedding_dim": 32,
    "hidden_dim": 32,
    "joint_dims": "32,64,128",  # d_j = d, 2·d, 4·d, as 512 / 2048 / 4096 are to d = 512 (roughly)
    "goal_joint_dim": 128,
    "vocab_sizes": "500,2000",
    "goal_vocab": 2000,
    "batch_size": 8,
    "target_length": 10,
    "source_length": 10,
    "num_layers": 1,
    "model_heads": "joint(32)",
    "model_fractions": "0.05",
    "model_vocab_sizes": "2000",
    "memory": False,  # 40 child processes; `--quick --memory` probes them anyway
    "warmup_steps": 1,
    "steps": 2,
    "repeats": 1,
}

SOFTMAX = "softmax"  # as sampled_step's (imported after TensorFlow)
SPEEDUP_GOALS = {0.25: 3.0, 0.05: 10.0}  # p → output-layer speed-up vs the head's own full softmax
JOINT_GOAL_FRACTION = 0.05
JOINT_GOAL = 1.0  # joint(4096) at 5% against softmax full: tokens/s ratio


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    heads = parser.add_argument_group("heads and sampling")
    add_model_arguments(
        heads, 512, 512,
        jit_help="XLA-compile the steps (the candidate set then has a shape-only size)",
        helps={"embedding_dim": "d, the target embedding size",
               "hidden_dim": "d_h, the decoder output size"})
    add_joint_arguments(heads, "512,2048,4096", 4096, "",
                        "the joint head of the 'no slower than softmax full' goal")
    heads.add_argument("--fractions", default="0.5,0.25,0.05",
                       help="comma-separated sampling fractions p of the output-layer table "
                            "(the full softmax row is always timed)")
    heads.add_argument("--goal-vocab", type=int, default=128000,
                       help="the |V| at which the goals are checked")
    optim = parser.add_argument_group("optimizer (compile_for_translation's by default)")
    optim.add_argument("--optimizer", choices=("adam", "lazy_adam", "sgd"), default="adam",
                       help="lazy_adam: tf_outheads.LazyAdam, sparse rows updated only")
    optim.add_argument("--learning-rate", type=float, default=1e-3)
    optim.add_argument("--clipnorm", type=float, default=5.0, help="per-variable clipnorm (0: none)")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    data.add_argument("--vocab-sizes", default="32000,128000",
                      help="comma-separated target vocabulary sizes |V|")
    data.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    data.add_argument("--target-length", type=int, default=30, help="target tokens per sentence")
    data.add_argument("--source-length", type=int, default=30,
                      help="source tokens per sentence (whole-model table)")
    data.add_argument("--source-vocab-size", type=int, default=0,
                      help="source vocabulary of the whole model (0: the same as each |V|)")
    data.add_argument("--targets", choices=("zipf", "uniform"), default="zipf",
                      help="distribution of the target ids (zipf: log-uniform over the ids)")
    data.add_argument("--seed", type=int, default=0)
    timing = parser.add_argument_group("timing")
    add_step_arguments(timing, steps=3, repeats=3, warmup=1, calls="steps", per="configuration",
                       between="the configurations")
    add_thread_arguments(timing)
    memory = parser.add_argument_group("peak memory")
    memory.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                        help="probe the peak memory of every configuration in a child process")
    memory.add_argument("--memory-steps", type=int, default=1,
                        help="steps each memory probe runs after building and tracing")
    memory.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    model = parser.add_argument_group("whole LSTMSeq2Seq model")
    model.add_argument("--model", action=argparse.BooleanOptionalAction, default=True,
                       help="time train_on_batch of the whole model")
    model.add_argument("--model-heads", default="softmax,tied,joint(512)",
                       help="comma-separated heads: softmax, tied, joint(D) (or jointD)")
    model.add_argument("--model-fractions", default="0.25,0.05",
                       help="sampling fractions of the model table (plus the full softmax)")
    model.add_argument("--model-vocab-sizes", default="",
                       help="|V| of the model table (empty: --vocab-sizes)")
    model.add_argument("--num-layers", type=int, default=2)
    model.add_argument("--dropout", type=float, default=0.3)
    args = parse_benchmark_args(parser, argv, "sampled", QUICK, positive=(
        "embedding_dim", "hidden_dim", "batch_size", "target_length", "source_length",
        "steps", "repeats", "num_layers", "memory_steps"))
    check_args(parser, args, ("warmup_steps", "source_vocab_size", "clipnorm"), dropout=True)
    try:
        args.vocab_list = parse_list(args.vocab_sizes)
        args.joint_list = parse_list(args.joint_dims)
        args.fraction_list = parse_list(args.fractions, float)
        args.model_fraction_list = parse_list(args.model_fractions, float)
        args.model_vocab_list = parse_list(args.model_vocab_sizes) or list(args.vocab_list)
    except ValueError as error:
        parser.error(f"size and fraction lists are comma-separated numbers ({error})")
    if not args.vocab_list or min(args.vocab_list + args.model_vocab_list) < 8:
        parser.error("--vocab-sizes needs at least one size >= 8 (4 special ids plus words)")
    if args.joint_list and min(args.joint_list) < 1:
        parser.error("--joint-dims must be positive")
    for p in args.fraction_list + args.model_fraction_list:
        if not 0.0 < p < 1.0:
            parser.error(f"fractions must be in (0, 1) (the full softmax row is always there): {p}")
    args.model_head_list = [name.strip() for name in args.model_heads.split(",") if name.strip()]
    for name in args.model_head_list:
        if name not in (SOFTMAX, "tied") and not re.fullmatch(r"joint\(?\d+\)?", name):
            parser.error(f"--model-heads: unknown head {name!r} (softmax, tied, joint(D))")
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss  # noqa: E402
from tf_outheads.training.translation import compile_for_translation  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402

from sampled_step import (  # noqa: E402  (benchmarks/ is the script's folder)
    FULL, PROBE_TAG, OutputStep, build_output_head, candidate_count, head_specs, make_optimizer,
    model_batches, model_head_spec, output_layer_batches, output_layer_macs, row_name, run_probe,
)



def probe_command(args, name, vocab, fraction):
    spec = json.dumps({"head": name, "vocab": vocab, "fraction": fraction})
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--probe", spec,
               "--embedding-dim", str(args.embedding_dim), "--hidden-dim", str(args.hidden_dim),
               "--joint-dims", args.joint_dims, "--vocab-sizes", str(vocab),
               "--batch-size", str(args.batch_size), "--target-length", str(args.target_length),
               "--steps", "1", "--targets", args.targets, "--seed", str(args.seed),
               "--optimizer", args.optimizer, "--learning-rate", str(args.learning_rate),
               "--clipnorm", str(args.clipnorm), "--memory-steps", str(args.memory_steps),
               "--intra-op-threads", str(args.intra_op_threads),
               "--inter-op-threads", str(args.inter_op_threads)]
    if args.jit_compile:
        command.append("--jit-compile")
    return command


def run_memory(args, specs):
    """Parent side: every (|V|, head, row) in a fresh child; MiB above its own baselines."""
    fractions = [None] + args.fraction_list
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    results = {}
    print(f"\npeak memory: one child process per configuration ({args.memory_steps} step(s) each)",
          flush=True)
    for vocab in args.vocab_list:
        rows = []
        for name in specs:
            for fraction in fractions:
                start = time.perf_counter()
                completed = subprocess.run(probe_command(args, name, vocab, fraction), env=env,
                                           capture_output=True, text=True, check=False)
                seconds = time.perf_counter() - start
                row = {"head": name, "vocab": vocab, "row": row_name(fraction),
                       "fraction": fraction, "child_seconds": seconds,
                       "returncode": completed.returncode}
                lines = [line for line in completed.stdout.splitlines()
                         if line.startswith(PROBE_TAG)]
                if completed.returncode == 0 and lines:
                    probe = json.loads(lines[-1][len(PROBE_TAG):])
                    row.update(probe)
                    row["peak_mib"] = (probe["peak_maxrss_kb"] - probe["import_maxrss_kb"]) / 1024
                    row["step_mib"] = (probe["peak_maxrss_kb"] - probe["built_rss_kb"]) / 1024
                    print(f"  |V| {vocab:,} {name} {row_name(fraction)}: peak {row['peak_mib']:,.0f} "
                          f"MiB, step {row['step_mib']:,.0f} MiB ({seconds:.0f} s)", flush=True)
                else:
                    row["error"] = completed.stderr[-2000:]
                    print(f"  |V| {vocab:,} {name} {row_name(fraction)}: FAILED "
                          f"(exit {completed.returncode}); stderr tail in the JSON", flush=True)
                rows.append(row)
        results[str(vocab)] = {"rows": rows}
    return results


# --------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------
def ms_per_step(timing):
    return per_unit(timing), per_unit(timing, "cpu_seconds")


def ratio_cell(value):
    return "-" if value is None else f"{value:.2f}"


# --------------------------------------------------------------------------
# One vocabulary size, output layer + loss
# --------------------------------------------------------------------------
def run_output_layer(args, vocab, specs):
    batches = output_layer_batches(args, vocab)
    tokens = args.batch_size * args.target_length  # no padding
    fractions = [None] + args.fraction_list
    distinct = [int(len(np.unique(y.numpy()))) for _, y in batches]
    print(f"\n=== output layer + loss, |V| = {vocab:,}: h {args.batch_size} × "
          f"{args.target_length} × {args.hidden_dim}, d = {args.embedding_dim}, {args.targets} "
          f"targets ({statistics.mean(distinct):.0f} distinct per batch on average) ===",
          flush=True)

    steps, configs = {}, {}
    for name, spec in specs.items():
        start = time.perf_counter()
        head = build_output_head(args, spec, vocab)
        optimizer = make_optimizer(args)
        optimizer.build(head.trainable_weights)
        params = sum(math.prod(w.shape) for w in head.trainable_weights)
        for fraction in fractions:
            key = f"{name} {row_name(fraction)}"
            steps[key] = OutputStep(args, head, optimizer, fraction)
            scored = statistics.mean(candidate_count(fraction, vocab, y.numpy(), args.jit_compile)
                                     for _, y in batches)
            configs[key] = {"head": name, "vocab": vocab, "row": row_name(fraction),
                            "fraction": fraction, "candidates_mean": scored,
                            "head_trainable_parameters": params,
                            "macs": output_layer_macs(spec, scored, tokens, args.embedding_dim,
                                                      args.hidden_dim)}
        print(f"  built {name}: {params:,} trainable weights incl. E for tied/joint "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    names = list(steps)

    # Per head: warm-up (tracing) of its rows, then the optimizer apply alone,
    # timed on the gradients of the first warm-up step (the rows of the head
    # interleaved); those gradients are dropped before the next head (at 128K a
    # full row's dense (V, d) gradient is 262 MB).
    def apply_once(key):
        iterations = None
        for _ in batches:
            iterations = steps[key].apply_only(sample_grads[key])
        int(iterations)
        return len(batches), None

    print(f"warm-up (tracing; {args.warmup_steps} step(s)), then the optimizer apply alone on "
          "the gradients of a step", flush=True)
    update, apply = {}, {}
    for name in specs:
        keys = [f"{name} {row_name(fraction)}" for fraction in fractions]
        sample_grads, line = {}, []
        for key in keys:
            start = time.perf_counter()
            h, y = batches[0]
            sample_grads[key] = steps[key].train_step(h, y)[2]  # traced here
            for index in range(1, args.warmup_steps):
                h, y = batches[index % len(batches)]
                float(steps[key].train_step(h, y)[0])
            update[key] = steps[key].update_ops(h, y)
            steps[key].apply_only(sample_grads[key])  # traced here
            configs[key]["warmup_seconds"] = time.perf_counter() - start
            line.append(f"{configs[key]['row']} {configs[key]['warmup_seconds']:.1f} s")
        print(f"  {name} warm-up: " + ", ".join(line), flush=True)
        apply.update(interleaved(keys, apply_once, args.repeats, progress_printer("ms/apply: ", ms_cell(), in_order=True)))
        del sample_grads

    def train_once(key):
        loss = None
        for h, y in batches:
            loss = steps[key].train_step(h, y)[0]
        return len(batches), {"last_loss": float(loss)}

    print("output layer + loss + optimizer step, every configuration interleaved", flush=True)
    train = interleaved(names, train_once, args.repeats, progress_printer("ms/step: ", ms_cell(), in_order=True))

    rows = []
    for key in names:
        row = dict(configs[key])
        name = row["head"]
        wall, cpu = ms_per_step(train[key])
        apply_wall, _ = ms_per_step(apply[key])
        own_full = f"{name} {FULL}"
        row.update(
            ms_per_step=stats(wall), cpu_ms_per_step=stats(cpu),
            tokens_per_second_median=tokens * 1000 / statistics.median(wall),
            optimizer_apply_ms=stats(apply_wall),
            speedup_vs_own_full=paired_ratios(train[own_full], train[key]),
            ratio_to_softmax_full=(paired_ratios(train[f"{SOFTMAX} {FULL}"], train[key])
                                   if SOFTMAX in specs else None),
            ideal_speedup_from_macs=configs[own_full]["macs"] / row["macs"],
            optimizer_update=update[key],
            timings=train[key], apply_timings=apply[key])
        rows.append(row)
    result = {"vocab": vocab, "tokens_per_step": tokens, "distinct_targets_per_batch": distinct,
              "rows": rows}
    print_output_table(args, result)
    del steps
    release()
    return result


def output_goal_cell(args, row):
    if row["vocab"] != args.goal_vocab:
        return ""
    cells = []
    goal = SPEEDUP_GOALS.get(row["fraction"])
    if goal is not None:
        cells.append(f"×own {goal_text(row['speedup_vs_own_full']['ratio_of_medians'], goal)}")
    if (row["head"] == f"joint({args.goal_joint_dim})" and row["fraction"] == JOINT_GOAL_FRACTION
            and row["ratio_to_softmax_full"] is not None):
        cells.append(f"×softmax {goal_text(row['ratio_to_softmax_full']['ratio_of_medians'], JOINT_GOAL)}")
    return "; ".join(cells)


def print_output_table(args, result):
    print(f"\noutput layer + loss + {args.optimizer} step, |V| = {result['vocab']:,}, "
          f"{result['tokens_per_step']} target tokens per step: median of {args.repeats} "
          f"repeat(s) × {args.steps} steps")
    header = (f"{'head':12s} {'row':>5s} {'cand.':>7s} {'ms/step':>9s} {'tok/s':>9s} "
              f"{'×own full':>9s} {'×softmax':>8s} {'×own CPU':>8s} {'ideal×':>7s} "
              f"{'opt ms':>7s}  goal")
    print_header(header, 24)
    for row in result["rows"]:
        to_softmax = row["ratio_to_softmax_full"]
        print(f"{row['head']:12s} {row['row']:>5s} {row['candidates_mean']:>7,.0f} "
              f"{fmt_ms(row['ms_per_step']['median']):>9s} {row['tokens_per_second_median']:>9,.0f} "
              f"{row['speedup_vs_own_full']['ratio_of_medians']:>9.2f} "
              f"{ratio_cell(to_softmax and to_softmax['ratio_of_medians']):>8s} "
              f"{row['speedup_vs_own_full']['cpu_ratio_of_medians']:>8.2f} "
              f"{row['ideal_speedup_from_macs']:>7.1f} "
              f"{fmt_ms(row['optimizer_apply_ms']['median']):>7s}  {output_goal_cell(args, row)}")
    print("(×own full: speed-up against the head's full softmax; ×softmax: against the untied "
          "head's full softmax; ideal×: multiply-adds of own full / this row; opt ms: the "
          "optimizer apply alone on this step's gradients)", flush=True)


def print_memory_table(memory):
    for vocab, result in memory.items():
        print(f"\npeak memory, |V| = {int(vocab):,} (child process per configuration; MiB)")
        header = f"{'head':12s} {'row':>5s} {'peak':>9s} {'step':>9s} {'×own full':>9s}"
        print_header(header)
        full = {r["head"]: r.get("peak_mib") for r in result["rows"] if r["row"] == FULL}
        for row in result["rows"]:
            if "peak_mib" not in row:
                print(f"{row['head']:12s} {row['row']:>5s}   failed (exit {row['returncode']})")
                continue
            ratio = row["peak_mib"] / full[row["head"]] if full.get(row["head"]) else None
            print(f"{row['head']:12s} {row['row']:>5s} {row['peak_mib']:>9,.1f} "
                  f"{row['step_mib']:>9,.1f} {ratio_cell(ratio):>9s}")
    print("(peak: child's ru_maxrss minus its ru_maxrss after importing TensorFlow = weights, "
          "optimizer slots and the step; step: minus its resident size once built)", flush=True)


# --------------------------------------------------------------------------
# Whole model
# --------------------------------------------------------------------------
def build_model(args, source_vocab, target_vocab, spec, fraction):
    keras.utils.set_random_seed(args.seed)  # the rows of one head start equal
    model = LSTMSeq2Seq(source_vocab, target_vocab, embedding_dim=args.embedding_dim,
                        hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                        dropout=args.dropout, head=spec)
    loss = None if fraction is None else SampledSoftmaxLoss(fraction=fraction, seed=args.seed)
    # The optimizer of the output-layer table: compile_for_translation's by default.
    compile_for_translation(model, optimizer=make_optimizer(args), loss=loss,
                            jit_compile=args.jit_compile)
    return model


def run_model(args, vocab):
    source_vocab = args.source_vocab_size or vocab
    batches = model_batches(args, source_vocab, vocab)
    tokens = args.batch_size * args.target_length
    fractions = [None] + args.model_fraction_list
    print(f"\n=== whole LSTMSeq2Seq, |V| = {vocab:,} (source {source_vocab:,}): "
          f"{args.num_layers} × {args.hidden_dim}, batch {args.batch_size} × "
          f"{args.source_length} / {args.target_length} ===", flush=True)
    rows = []
    for head_name in args.model_head_list:
        name, spec = model_head_spec(head_name)
        models = {}
        start = time.perf_counter()
        for fraction in fractions:
            models[f"{name} {row_name(fraction)}"] = build_model(
                args, source_vocab, vocab, spec, fraction)
        print(f"  built {', '.join(models)}: {time.perf_counter() - start:.1f} s", flush=True)
        # Warm up only once every model is built: building one (it reseeds
        # TensorFlow) made the next call of an already warmed-up model slow again.
        warm_up(models, batches, args.warmup_steps, label="warm-up ")
        timings = interleaved(list(models), lambda key: train_on_batches(models[key], batches), args.repeats, progress_printer("ms/step: ", ms_cell(), in_order=True))
        full_key = f"{name} {FULL}"
        for key, timing in timings.items():
            wall, cpu = ms_per_step(timing)
            fraction = fractions[list(models).index(key)]
            rows.append({
                "head": name, "vocab": vocab, "row": row_name(fraction), "fraction": fraction,
                "ms_per_step": stats(wall), "cpu_ms_per_step": stats(cpu),
                "steps_per_second_median": 1000 / statistics.median(wall),
                "tokens_per_second_median": tokens * 1000 / statistics.median(wall),
                "speedup_vs_own_full": paired_ratios(timings[full_key], timing),
                "timings": timing,
            })
        del models
        release()
    reference = next((r for r in rows if r["head"] == SOFTMAX and r["row"] == FULL), None)
    for row in rows:
        # Not interleaved across heads: the heads ran one after the other.
        row["ratio_to_softmax_full"] = (
            reference["ms_per_step"]["median"] / row["ms_per_step"]["median"]
            if reference else None)
    result = {"vocab": vocab, "source_vocab": source_vocab, "tokens_per_step": tokens, "rows": rows}
    print(f"\nwhole model, |V| = {vocab:,}: train_on_batch, median of {args.repeats} repeat(s) "
          f"× {args.steps} steps")
    header = (f"{'head':12s} {'row':>5s} {'ms/step':>9s} {'steps/s':>8s} {'tok/s':>8s} "
              f"{'×own full':>9s} {'×own CPU':>8s} {'×softmax':>8s}")
    print_header(header)
    for row in rows:
        to_softmax = row["ratio_to_softmax_full"]
        print(f"{row['head']:12s} {row['row']:>5s} {fmt_ms(row['ms_per_step']['median']):>9s} "
              f"{row['steps_per_second_median']:>8.2f} {row['tokens_per_second_median']:>8,.0f} "
              f"{row['speedup_vs_own_full']['ratio_of_medians']:>9.2f} "
              f"{row['speedup_vs_own_full']['cpu_ratio_of_medians']:>8.2f} "
              f"{ratio_cell(to_softmax):>8s}")
    print("(×softmax: heads timed one after the other, not interleaved)", flush=True)
    return result


# --------------------------------------------------------------------------
# Goals and main
# --------------------------------------------------------------------------
def check_goals(args, output_layer):
    result = output_layer.get(str(args.goal_vocab))
    if result is None:
        print(f"\ngoals: |V| = {args.goal_vocab:,} not timed (--vocab-sizes), no goal checked")
        return None
    goals = {"vocab": args.goal_vocab, "speedup": [], "joint_vs_softmax": None}
    print(f"\ngoals at |V| = {args.goal_vocab:,} (output layer + loss + optimizer step, "
          "ratio of medians):")
    for fraction, goal in SPEEDUP_GOALS.items():
        cells = []
        for row in result["rows"]:
            if row["fraction"] == fraction:
                value = row["speedup_vs_own_full"]["ratio_of_medians"]
                goals["speedup"].append({"head": row["head"], "fraction": fraction,
                                         "speedup": value, "goal": goal, "met": value >= goal})
                cells.append(f"{row['head']} {value:.2f}× ({'met' if value >= goal else 'MISSED'})")
        if cells:
            print(f"  {100 * fraction:g}% vs own full softmax, goal >= {goal:g}×: " + ", ".join(cells))
        else:
            print(f"  {100 * fraction:g}%: not among --fractions")
    joint = f"joint({args.goal_joint_dim})"
    row = next((r for r in result["rows"] if r["head"] == joint
                and r["fraction"] == JOINT_GOAL_FRACTION), None)
    if row is not None and row["ratio_to_softmax_full"] is not None:
        value = row["ratio_to_softmax_full"]["ratio_of_medians"]
        goals["joint_vs_softmax"] = {"head": joint, "fraction": JOINT_GOAL_FRACTION,
                                     "ratio": value, "goal": JOINT_GOAL, "met": value >= JOINT_GOAL}
        print(f"  {joint} at {100 * JOINT_GOAL_FRACTION:g}% vs softmax full (tokens/s ratio): "
              f"{value:.2f} ({goal_text(value, JOINT_GOAL)})")
    else:
        print(f"  {joint} at {100 * JOINT_GOAL_FRACTION:g}% or softmax full not timed")
    if args.quick:
        print("  (--quick sizes: a smoke test, not a measurement of the goals)")
    return goals


def describe_update(output_layer):
    """One line on what the optimizer did with the sparse gradients, from the traced graphs."""
    for result in output_layer.values():
        for row in result["rows"]:
            update = row["optimizer_update"]
            sparse = [path for path, kind in update["gradient_types"].items()
                      if kind == "IndexedSlices"]
            if row["fraction"] is not None and sparse:
                how = ("scatter (sparse) update" if update["scatter_update_ops"]
                       else "dense update over all |V| rows")
                print(f"\noptimizer: in sampled rows the gradients of {', '.join(sparse)} are "
                      f"IndexedSlices; the traced step has {update['scatter_update_ops']} scatter "
                      f"op(s) and {update['densifying_ops (UnsortedSegmentSum)']} "
                      f"UnsortedSegmentSum (densifying) op(s): a {how} (example: {row['head']} "
                      f"{row['row']}, |V| {row['vocab']:,})")
                return {"example": f"{row['head']} {row['row']} |V| {row['vocab']}",
                        "sparse_gradients": sparse, "update": how, **update}
    return None


def main(args):
    if args.probe:
        run_probe(args)
        return None
    machine = described_machine(args.seed)
    print(f"|V| {args.vocab_list}, d = {args.embedding_dim}, d_h = {args.hidden_dim}, joint "
          f"{args.joint_list}, p {args.fraction_list}, batch {args.batch_size} × "
          f"{args.target_length}, {args.optimizer} (clipnorm {args.clipnorm or 'none'})"
          + (" (--quick)" if args.quick else ""), flush=True)
    specs = head_specs(args.joint_list)
    started = time.perf_counter()

    memory = run_memory(args, specs) if args.memory else None
    output_layer = {}
    for vocab in args.vocab_list:
        output_layer[str(vocab)] = run_output_layer(args, vocab, specs)
    update = describe_update(output_layer)
    model = {}
    if args.model:
        for vocab in args.model_vocab_list:
            model[str(vocab)] = run_model(args, vocab)
    if memory is not None:
        print_memory_table(memory)
    goals = check_goals(args, output_layer)

    return write_record("sampled", args, machine, started, {
        "heads": specs,
        "optimizer_update": update,
        "output_layer": output_layer,
        "memory": memory,
        "model": model if args.model else None,
        "goals": goals,
    }, exclude=("probe",))


if __name__ == "__main__":
    main(ARGS)
