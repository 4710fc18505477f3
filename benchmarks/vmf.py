"""Continuous (vMF) outputs against the softmax: the Bessel op, and the whole model.

Two measurements in one run (the issue that asked for this benchmark: (a) our
log C_m at least 3× faster than `tensorflow_probability.math.log_bessel_ive`
at equal accuracy; (b) the LSTM model with the vMF head at least 2× faster per
training step than with the full softmax at |V| = 50K, with the output layer's
parameters cut by at least 90%).

(a) The vMF log-normalizer, forward + backward. `tf_outheads.ops.
    log_vmf_normalizer(κ, m)` (float64 inside, custom gradient
    −I_{m/2}/I_{m/2−1}) against the same quantity built on
    tensorflow-probability,

        log C_m(κ) = v·log κ − (v + 1)·log 2π − (tfp.math.log_bessel_ive(v, κ) + κ),
        v = m/2 − 1,

    (the log, the `+ κ` of the exponentially scaled Bessel function and the
    other terms included, differentiated by TensorFlow through tfp's own
    gradient of `log_bessel_ive`), on the same batch of `--op-batch` κ
    (log-uniform in [`--kappa-min`, `--kappa-max`], drawn in float32), for each
    m of `--op-dims`, dtype of `--op-dtypes` and mode of `--op-modes` (graph,
    XLA): value, `tf.reduce_sum`, gradient w.r.t. κ, fetched to the host, one
    `tf.function` per (op, m, dtype, mode); `--op-warmup` untimed calls, then
    `--op-repeats` repeats of `--op-steps` calls, the two ops taking turns in
    an order that reverses every repeat. Accuracy: on `--error-points` of the
    κ, the value's error relative to max(|ref|, 1) and the gradient's relative
    error (also on the points with κ >= 1 alone), ref from mpmath (40 digits),
    as `benchmarks/vmf_ops.py` defines them. Built on tfp, the gradient is
    v/κ − (d/dκ log_bessel_ive + 1): two terms of size v/κ whose difference is
    the Bessel ratio (~κ/m for small κ), so its relative error explodes as
    κ → 0 in any dtype; ours never forms v/κ. The speed ratio is reported per
    (m, mode) in the same dtype, and ours in float32 against tfp in float64
    (tfp's float32 value is much less accurate than ours, which works in
    float64 inside); "at equal accuracy" holds where our errors are no larger
    than tfp's (up to 4 ulp of our dtype).

    tensorflow-probability needs `tf-keras` (Keras 2), which cannot live next
    to this project's Keras 3 in its environment; it is not a dependency of the
    project. Part (a) therefore runs in a separate virtual environment (the
    Python of `--tfp-python`, default `$TFP_PYTHON` or /tmp/tfpvenv/bin/python)
    made with

        python3.11 -m venv /tmp/tfpvenv
        /tmp/tfpvenv/bin/pip install "tensorflow==2.21.*" tensorflow-probability tf-keras

    This script starts it as a child process (`vmf_tfp_worker.py SPEC`, which
    imports only TensorFlow, tfp, NumPy, `tf_outheads/ops/bessel.py`, loaded by
    path, and the standard-library helpers `op_steps.py` and `common.py`) that
    times *both* ops interleaved in the same process, with the same TensorFlow
    version as the project. `--tfp` (the default when that Python exists)
    asks for it; `--no-tfp`, a missing Python or a failed import print one line
    saying why there is no tfp comparison. Our op is also timed in this
    process with `benchmarks/vmf_ops.py`'s functions (same definitions), with
    or without tfp.

(b) The whole model. `tf_outheads_zoo.lstm.LSTMSeq2Seq` `train_on_batch` steps at each
    |V| of `--vocab-sizes` (16000 and 50000), with three heads:

    - `softmax`: the untied full softmax (`SoftmaxHead`, its own (V, d_h)
      weights and bias), `MaskedSequenceCrossEntropy`: the reference;
    - `tied`: `TiedSoftmaxHead` (the target embedding is the output matrix;
      with d != d_h a d_h → d projection): the VIVO report's baseline;
    - `continuous`: `ContinuousOutputHead(output_dim=--output-dim)` (300),
      `VMFLoss(norm_penalty=0.02, dot_scale=0.1)`, a random unit target table
      (seeded Gaussian rows, normalised; PAD row zero): frozen, not trained.

    The model follows the VIVO report's Table 3: 1 encoder layer and 2
    decoder layers (`--encoder-layers`, `--decoder-layers`), target embedding
    300 (`--embedding-dim`), source embedding 512 (`--source-embedding-dim`),
    input feeding, source vocabulary = |V| (`--source-vocab-size`; Table 3:
    50K both). It differs in: hidden size 512 (`--hidden-dim`; Table 3:
    1024, heavy on 2 cores), a unidirectional encoder, dropout 0.3, Adam
    1e-3 with clipnorm 5 for every head (`compile_for_translation`; Table 3
    uses 2e-4 / 5e-4: the learning rate does not change the step time).

    Data: `--steps` synthetic batches of `--batch-size` × `--source-length` /
    `--target-length` (32 × 30 / 30), ids Zipf-like (log-uniform over the word
    ids, as `benchmarks/sampled.py`), the last token EOS, no padding.
    Timing: the three models of one |V| are built with the same seed, then
    warmed up (`--warmup-steps` untimed steps), then timed interleaved
    (A B C, C B A, ...) for `--repeats` repeats; medians of wall clock and of
    process CPU time. Reported: ms/step, target tokens/s, the ratio to softmax
    (softmax ms / head ms: > 1 is faster), and parameter counts from
    `tf_outheads.metrics.parameter_report`: total, the output layer's
    trainable and frozen (non-trainable: the continuous head's (V, m) table)
    parameters, and the output layer's trainable parameters cut against
    softmax's, in %.

    Greedy decoding, as `tf_outheads.decoding.Translator` does it (the head
    cache from `Translator.head_cache()` once per call, then a
    `tf.function` of `greedy_search` over `model.make_step_fn(cache)` per
    batch): `--decode-batches` batches of `--decode-batch-size` source
    sentences, every sentence made to emit exactly `--decode-length` tokens
    (EOS blocked until then: untrained weights would stop anywhere), timed
    interleaved before training. The continuous head decodes by nearest
    neighbour (its default `"posterior"` scores: a log-softmax of ê·e(w), the
    arg-max of the cosine). Reported: sentences/s and the ratio to softmax.

(c) The target table's hubness (`benchmarks/vmf_table.py`, `--table`): the table
    a `--table-preset` run builds (its target tokenizer on the embedded corpus,
    vectors trained on the target side), for each vector model (fastText,
    word2vec) and post-processing (plain, centred, all-but-the-top with 3
    components): the skewness of the rows' 10-occurrence, the share of rows that
    are nobody's neighbour, the top neighbours, and how close each `</s>` choice
    comes to a piece. No goal: the diagnostic behind the study's table options.

Goals, printed next to the numbers at |V| = `--goal-vocab` (50000): continuous
≥ 2× softmax per training step; the output layer's trainable parameters cut
by ≥ 90% against softmax; and in (a), our op ≥ 3× faster than tfp for each
comparison of (m, mode, dtypes) above, with errors no larger.
`--quick` shrinks every size (a smoke test; its numbers measure nothing).

Run from the repository root:

    python benchmarks/vmf.py --quick        # tiny sizes, a smoke test (< 1 min)
    python benchmarks/vmf.py                # the full comparison (estimated 10-20 min on 2 cores)
    python benchmarks/vmf.py --no-model     # part (a) only
    python benchmarks/vmf.py --no-ops --vocab-sizes 50000

Results go to `--output` (JSON, default benchmarks/results/vmf.json).
"""

import argparse
import os
import statistics
import sys
import time

from common import (  # benchmarks/ is the script's folder
    add_batch_arguments, add_decode_arguments, add_model_arguments, add_step_arguments,
    add_thread_arguments, benchmark_parser, check_args, described_machine, fmt_ms, int_list,
    interleaved, ms_cell, paired_ratios, parse_benchmark_args, per_unit, print_header,
    progress_printer, release, start, stats, time_greedy_decoding, train_on_batches,
    training_batches, warm_up, write_record, zipf_sentences,
)

from op_steps import add_op_arguments, check_op_arguments  # noqa: E402  (no TensorFlow)
from vmf_table import add_table_arguments, print_table, run_table  # noqa: E402

DEFAULT_TFP_PYTHON = os.environ.get("TFP_PYTHON") or "/tmp/tfpvenv/bin/python"
OP_DTYPES = ("float32", "float64")


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------
# `--quick`: every size small, one repeat. Options given explicitly still win.
QUICK = {
    "op_dims": "300",
    "op_dtypes": "float32",
    "op_modes": "graph",
    "op_batch": 2000,
    "op_warmup": 1,
    "op_steps": 2,
    "op_repeats": 1,
    "error_points": 10,
    "vocab_sizes": "500,2000",
    "goal_vocab": 2000,
    "embedding_dim": 16,
    "source_embedding_dim": 16,
    "hidden_dim": 32,
    "output_dim": 16,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "batch_size": 4,
    "source_length": 8,
    "target_length": 8,
    "warmup_steps": 1,
    "steps": 1,
    "repeats": 1,
    "decode_batches": 1,
    "decode_batch_size": 4,
    "decode_length": 4,
    "table_sentences": 1500,
    "table_vocab_size": 400,
    "table_dim": 16,
    "table_epochs": 1,
    "table_models": "fasttext",
}

SOFTMAX, TIED, CONTINUOUS = "softmax", "tied", "continuous"
HEADS = (SOFTMAX, TIED, CONTINUOUS)
STEP_GOAL = 2.0           # continuous vs softmax, training step, at --goal-vocab
PARAMETER_CUT_GOAL = 90.0  # % of softmax's output-layer (trainable) parameters removed
VMF_OPTIONS = {"norm_penalty": 0.02, "dot_scale": 0.1}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    ops_group = parser.add_argument_group("(a) the log-normalizer op, against tfp")
    ops_group.add_argument("--ops", action=argparse.BooleanOptionalAction, default=True,
                           help="run part (a)")
    ops_group.add_argument("--tfp", action=argparse.BooleanOptionalAction, default=None,
                           help="compare with tfp.math.log_bessel_ive in --tfp-python "
                                "(default: when that Python exists)")
    ops_group.add_argument("--tfp-python", default=DEFAULT_TFP_PYTHON,
                           help="Python of a venv with tensorflow 2.21, tensorflow-probability "
                                "and tf-keras (default: $TFP_PYTHON or /tmp/tfpvenv/bin/python)")
    add_op_arguments(ops_group, "op-", dims="300", dtypes=OP_DTYPES)
    model = parser.add_argument_group("(b) the whole LSTMSeq2Seq model")
    model.add_argument("--model", action=argparse.BooleanOptionalAction, default=True,
                       help="run part (b)")
    model.add_argument("--vocab-sizes", default="16000,50000",
                       help="comma-separated target vocabulary sizes |V|")
    model.add_argument("--goal-vocab", type=int, default=50000,
                       help="the |V| at which the goals of (b) are checked")
    model.add_argument("--source-vocab-size", type=int, default=0,
                       help="source vocabulary (0: the same as each |V|, as Table 3's 50K/50K)")
    add_model_arguments(model, 300, 512, dropout=0.3,
                        helps={"embedding_dim": "d, the target embedding size (Table 3: 300)",
                               "hidden_dim": "d_h (Table 3: 1024)"})
    model.add_argument("--source-embedding-dim", type=int, default=512,
                       help="the source embedding size (Table 3: 512)")
    model.add_argument("--encoder-layers", type=int, default=1, help="(Table 3: 1)")
    model.add_argument("--decoder-layers", type=int, default=2, help="(Table 3: 2)")
    model.add_argument("--output-dim", type=int, default=300,
                       help="m, the continuous head's vector size")
    table = parser.add_argument_group("(c) the target table's hubness (vmf_table.py)")
    table.add_argument("--table", action=argparse.BooleanOptionalAction, default=True,
                       help="run part (c)")
    add_table_arguments(table, prefix="table-")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    add_batch_arguments(data, batch_size=32)
    timing = parser.add_argument_group("timing of (b)")
    add_step_arguments(timing, steps=3, repeats=3, warmup=2, calls="steps",
                       between="the heads (training and decoding)")
    add_decode_arguments(timing, batches=2, length=30)
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "vmf", QUICK, positive=(
        "embedding_dim", "hidden_dim",
        "source_embedding_dim", "output_dim", "encoder_layers", "decoder_layers",
        "batch_size", "source_length", "target_length", "steps", "repeats",
        "decode_batch_size", "decode_length"))
    check_args(parser, args, ("warmup_steps", "decode_batches", "source_vocab_size"), dropout=True)
    check_op_arguments(parser, args, "op-", OP_DTYPES)
    args.vocab_list = int_list(parser, "vocab-sizes", args.vocab_sizes, 8)  # 4 special ids
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import mpmath  # noqa: E402

from tf_outheads.losses.vmf import VMFLoss  # noqa: E402
from tf_outheads.metrics import parameter_report  # noqa: E402
from tf_outheads.training.translation import compile_for_translation  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402

# Part (a), our op against tfp's, lives with the op's own benchmark (benchmarks/ is the
# script's folder).
from vmf_ops import OP_SPEED_GOAL, comparison_name, goal_text, run_ops  # noqa: E402


# --------------------------------------------------------------------------
# Part (b): the whole model
# --------------------------------------------------------------------------
def model_batches(args, source_vocab, vocab):
    """Log-uniform (Zipfian) word ids, as sampled.py's; EOS last, no padding."""
    rng = np.random.default_rng([args.seed, vocab, 1])
    batches = training_batches(args, rng, source_vocab, vocab, zipf_sentences)
    decode = [tf.constant(zipf_sentences(rng, args.decode_batch_size, args.source_length,
                                         source_vocab))
              for _ in range(args.decode_batches)]
    return batches, decode


def head_spec(args, name):
    if name == CONTINUOUS:
        return {"class_name": "continuous", "config": {"output_dim": args.output_dim}}
    return name


def build_model(args, name, source_vocab, vocab):
    keras.utils.set_random_seed(args.seed)  # every head starts from the same encoder/decoder
    model = LSTMSeq2Seq(source_vocab, vocab, embedding_dim=args.embedding_dim,
                        source_embedding_dim=args.source_embedding_dim,
                        hidden_dim=args.hidden_dim, num_layers=args.decoder_layers,
                        encoder_layers=args.encoder_layers, decoder_layers=args.decoder_layers,
                        dropout=args.dropout, head=head_spec(args, name))
    loss = None
    if name == CONTINUOUS:
        rng = np.random.default_rng([args.seed, vocab, 2])
        table = rng.standard_normal((vocab, args.output_dim)).astype(np.float32)
        table[0] = 0.0  # PAD: never a target
        model.head.set_target_vectors(table)  # rows L2-normalised by the head
        loss = VMFLoss(**VMF_OPTIONS)
    compile_for_translation(model, loss=loss)
    return model


def parameter_counts(model):
    report = parameter_report(model)
    output, trainable = report.groups["output_layer"], report.trainable_groups["output_layer"]
    return {"total": report.total, "trainable": report.trainable,
            "output_layer_trainable": trainable, "output_layer_frozen": output - trainable,
            "output_capacity": report.output_capacity, "groups": report.groups}


def run_model(args, vocab):
    source_vocab = args.source_vocab_size or vocab
    batches, decode_sources = model_batches(args, source_vocab, vocab)
    tokens = args.batch_size * args.target_length  # no padding
    print(f"\n=== (b) whole LSTMSeq2Seq, |V| = {vocab:,} (source {source_vocab:,}): "
          f"{args.encoder_layers} + {args.decoder_layers} layers × {args.hidden_dim}, "
          f"d = {args.embedding_dim} (source {args.source_embedding_dim}), m = "
          f"{args.output_dim}, batch {args.batch_size} × {args.source_length} / "
          f"{args.target_length} ===", flush=True)
    models, params = {}, {}
    for name in HEADS:
        start = time.perf_counter()
        models[name] = build_model(args, name, source_vocab, vocab)
        params[name] = parameter_counts(models[name])
        print(f"  built {name}: {params[name]['total']:,} parameters, output layer "
              f"{params[name]['output_layer_trainable']:,} trainable + "
              f"{params[name]['output_layer_frozen']:,} frozen "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    names = list(models)
    result = {"vocab": vocab, "source_vocab": source_vocab, "tokens_per_step": tokens,
              "parameters": params}

    decode = None
    if args.decode_batches:
        sentences, timings = time_greedy_decoding(
            models, decode_sources, args, "greedy decoding: sentences/s, interleaved",
            progress_printer("sentences/s: ", lambda t: f"{t['units'][-1] / t['seconds'][-1]:,.1f}",
                             in_order=True))
        decode = {}
        for name in names:
            rates = [u / s for u, s in zip(timings[name]["units"], timings[name]["seconds"])]
            decode[name] = {"sentences_per_call": sentences, "tokens_per_sentence":
                            args.decode_length, "sentences_per_second": stats(rates),
                            "timings": timings[name]}
        base = decode[SOFTMAX]["sentences_per_second"]["median"]
        for name in names:
            decode[name]["ratio_to_softmax"] = decode[name]["sentences_per_second"]["median"] / base

    print(f"training: warm-up ({args.warmup_steps} step(s))", flush=True)
    warmup = warm_up(models, batches, args.warmup_steps)
    print("training: train_on_batch, interleaved", flush=True)
    timings = interleaved(names, lambda name: train_on_batches(models[name], batches),
                          args.repeats, progress_printer("ms/step: ", ms_cell(3), in_order=True))
    softmax_out = params[SOFTMAX]["output_layer_trainable"]
    rows = []
    for name in names:
        wall, cpu = per_unit(timings[name]), per_unit(timings[name], "cpu_seconds")
        row = {
            "head": name, "vocab": vocab, "ms_per_step": stats(wall), "cpu_ms_per_step": stats(cpu),
            "tokens_per_second_median": tokens * 1000 / statistics.median(wall),
            "ratio_to_softmax": paired_ratios(timings[SOFTMAX], timings[name]),
            "parameters": params[name],
            "output_layer_cut_vs_softmax_percent":
                100.0 * (1.0 - params[name]["output_layer_trainable"] / softmax_out),
            "warmup_seconds": warmup[name],
            "timings": timings[name],
        }
        if decode is not None:
            row["decode"] = decode[name]
        rows.append(row)
    result["rows"] = rows
    print_model_tables(args, result)
    del models
    release()
    return result


def print_model_tables(args, result):
    vocab = result["vocab"]
    at_goal = vocab == args.goal_vocab
    print(f"\n(b) training, |V| = {vocab:,}: train_on_batch, median of {args.repeats} repeat(s) "
          f"× {args.steps} step(s); {result['tokens_per_step']} target tokens per step")
    header = (f"{'head':11s} {'ms/step':>9s} {'tok/s':>8s} {'×softmax':>8s} {'×sm CPU':>8s} "
              f"{'params':>12s} {'out. train.':>12s} {'out. frozen':>12s} {'out. cut':>8s}  goal")
    print_header(header, 30)
    for row in result["rows"]:
        p = row["parameters"]
        ratio = row["ratio_to_softmax"]["ratio_of_medians"]
        cut = row["output_layer_cut_vs_softmax_percent"]
        goal = ""
        if at_goal and row["head"] == CONTINUOUS:
            goal = (f"step >= {STEP_GOAL:g}× {goal_text(ratio >= STEP_GOAL)}; "
                    f"cut >= {PARAMETER_CUT_GOAL:g}% {goal_text(cut >= PARAMETER_CUT_GOAL)}")
        print(f"{row['head']:11s} {fmt_ms(row['ms_per_step']['median'], 3):>9s} "
              f"{row['tokens_per_second_median']:>8,.0f} {ratio:>8.2f} "
              f"{row['ratio_to_softmax']['cpu_ratio_of_medians']:>8.2f} {p['total']:>12,} "
              f"{p['output_layer_trainable']:>12,} {p['output_layer_frozen']:>12,} "
              f"{cut:>7.1f}%  {goal}")
    print("(×softmax: softmax ms / head ms, > 1 is faster; out. train./frozen: the output "
          "layer's trainable / non-trainable parameters (the continuous head's frozen target "
          "table is not trained; the tied head's E counts under the embeddings); out. cut: "
          "trainable output-layer parameters removed against softmax)")
    if result["rows"] and "decode" in result["rows"][0]:
        any_decode = result["rows"][0]["decode"]
        print(f"\n(b) greedy decoding, |V| = {vocab:,}: {any_decode['sentences_per_call']} "
              f"sentences per call × {any_decode['tokens_per_sentence']} tokens, head cache "
              f"kept (Translator.head_cache), median of {args.repeats} repeat(s)")
        header = f"{'head':11s} {'sent/s':>9s} {'tok/s':>9s} {'×softmax':>8s}"
        print_header(header)
        for row in result["rows"]:
            d = row["decode"]
            rate = d["sentences_per_second"]["median"]
            print(f"{row['head']:11s} {rate:>9,.1f} {rate * d['tokens_per_sentence']:>9,.0f} "
                  f"{d['ratio_to_softmax']:>8.2f}")
    sys.stdout.flush()


def check_goals(args, ops_record, model_record):
    goals = {"ops": None, "model": None}
    print("\ngoals:")
    if ops_record is not None:
        comparisons = [c for c in ops_record["comparisons"] if "speedup_vs_tfp" in c]
        if comparisons:
            goals["ops"] = [{**c, "goal": OP_SPEED_GOAL,
                             "met": c["speed_goal_met"] and c.get("accuracy_at_least_equal")
                             is not False} for c in comparisons]
            cells = [f"{comparison_name(c)} {c['speedup_vs_tfp']:.2f}× "
                     f"({goal_text(g['met'])})" for c, g in zip(comparisons, goals["ops"])]
            print(f"  (a) ours vs tfp.math.log_bessel_ive, goal >= {OP_SPEED_GOAL:g}× at equal "
                  "accuracy: " + ", ".join(cells))
        else:
            print(f"  (a) ours vs tfp, goal >= {OP_SPEED_GOAL:g}×: not measured ("
                  f"{ops_record['tfp'].get('reason', 'no comparison')})")
    if model_record is not None:
        result = model_record.get(str(args.goal_vocab))
        if result is None:
            print(f"  (b) |V| = {args.goal_vocab:,} not timed (--vocab-sizes): no goal checked")
        else:
            row = next(r for r in result["rows"] if r["head"] == CONTINUOUS)
            ratio = row["ratio_to_softmax"]["ratio_of_medians"]
            cut = row["output_layer_cut_vs_softmax_percent"]
            softmax = next(r for r in result["rows"] if r["head"] == SOFTMAX)
            goals["model"] = {
                "vocab": args.goal_vocab,
                "step_ratio": ratio, "step_goal": STEP_GOAL, "step_met": ratio >= STEP_GOAL,
                "output_layer_cut_percent": cut, "cut_goal_percent": PARAMETER_CUT_GOAL,
                "cut_met": cut >= PARAMETER_CUT_GOAL}
            print(f"  (b) |V| = {args.goal_vocab:,}: continuous vs softmax per training step "
                  f"{ratio:.2f}× (goal >= {STEP_GOAL:g}×: {goal_text(ratio >= STEP_GOAL)}); "
                  f"output layer {row['parameters']['output_layer_trainable']:,} vs "
                  f"{softmax['parameters']['output_layer_trainable']:,} trainable parameters, "
                  f"cut {cut:.1f}% (goal >= {PARAMETER_CUT_GOAL:g}%: "
                  f"{goal_text(cut >= PARAMETER_CUT_GOAL)})")
    if args.quick:
        print("  (--quick sizes: a smoke test, not a measurement of the goals)")
    return goals


def main(args):
    machine = described_machine(args.seed, versions=f", mpmath {mpmath.__version__}",
                                tail=" (--quick)" if args.quick else "")
    started = time.perf_counter()
    ops_record = run_ops(args) if args.ops else None
    model_record = None
    if args.model:
        model_record = {str(vocab): run_model(args, vocab) for vocab in args.vocab_list}
    table_record = None
    if args.table:
        options = argparse.Namespace(**{key[len("table_"):]: value
                                        for key, value in vars(args).items()
                                        if key.startswith("table_")})
        table_record = run_table(options)
        print_table(table_record)
    goals = check_goals(args, ops_record, model_record)
    return write_record("vmf", args, machine, started, {
        "vmf_loss": VMF_OPTIONS,
        "ops": ops_record,
        "model": model_record,
        "table": table_record,
        "goals": goals,
    })


if __name__ == "__main__":
    main(ARGS)
