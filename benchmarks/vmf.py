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

    This script starts it as a child process (this file with a hidden
    `--tfp-worker SPEC` argument, which imports only TensorFlow, tfp, NumPy and
    `tf_outheads/ops/bessel.py`, loaded by path: it needs nothing else) that
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
import gc
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from common import (  # benchmarks/ is the script's folder
    add_batch_arguments, add_thread_arguments, benchmark_parser, interleaved, machine_info,
    parse_benchmark_args, setup, stats, write_record,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BESSEL_PATH = REPO_ROOT / "tf_outheads" / "ops" / "bessel.py"
DEFAULT_TFP_PYTHON = os.environ.get("TFP_PYTHON") or "/tmp/tfpvenv/bin/python"
TFP_WORKER = "--tfp-worker"


# --------------------------------------------------------------------------
# Part (a), child side: runs in the tfp virtual environment. Imports only
# TensorFlow, tensorflow-probability, NumPy and bessel.py (by path).
# --------------------------------------------------------------------------
def tfp_worker(spec_path):
    with open(spec_path, encoding="utf-8") as stream:
        spec = json.load(stream)
    result = {"error": None}
    try:
        import importlib.util

        import numpy as np
        import tensorflow as tf

        if spec["intra_op_threads"]:
            tf.config.threading.set_intra_op_parallelism_threads(spec["intra_op_threads"])
        if spec["inter_op_threads"]:
            tf.config.threading.set_inter_op_parallelism_threads(spec["inter_op_threads"])
        import tensorflow_probability as tfp

        module_spec = importlib.util.spec_from_file_location("tfo_bessel", spec["bessel_path"])
        bessel = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(bessel)
    except Exception as error:  # noqa: BLE001  (reported to the parent, which explains)
        result["error"] = f"{type(error).__name__}: {error}"
        with open(spec["output"], "w", encoding="utf-8") as stream:
            json.dump(result, stream)
        return 3
    result["versions"] = {"tensorflow": tf.__version__, "tensorflow_probability": tfp.__version__,
                          "numpy": np.__version__}

    def ours(kappa, dim):
        return bessel.log_vmf_normalizer(kappa, dim)

    def tfp_op(kappa, dim):
        order = tf.constant(dim / 2 - 1, kappa.dtype)
        log_bessel = tfp.math.log_bessel_ive(order, kappa) + kappa  # log I_v(κ)
        return (order * tf.math.log(kappa) - (order + 1) * math.log(2 * math.pi) - log_bessel)

    ops_ = {"ours": ours, "tfp": tfp_op}

    def make_step(op, dim, jit_compile):
        @tf.function(jit_compile=jit_compile)
        def step(kappa):
            with tf.GradientTape() as tape:
                tape.watch(kappa)
                total = tf.reduce_sum(op(kappa, dim))
            return total, tape.gradient(total, kappa)
        return step

    kappas = np.load(spec["kappa_path"])
    sample = np.load(spec["sample_path"])
    rows = []
    for dim in spec["dims"]:
        for dtype_name in spec["dtypes"]:
            dtype = tf.as_dtype(dtype_name)
            kappa = tf.constant(kappas.astype(dtype.as_numpy_dtype))
            points = tf.constant(sample.astype(dtype.as_numpy_dtype))
            accuracy = {}
            for name, op in ops_.items():
                with tf.GradientTape() as tape:
                    tape.watch(points)
                    value = op(points, dim)
                gradient = tape.gradient(value, points)
                accuracy[name] = {"value": value.numpy().astype(np.float64).tolist(),
                                  "gradient": gradient.numpy().astype(np.float64).tolist()}
            for mode in spec["modes"]:
                steps, warmup, errors = {}, {}, {}
                for name, op in ops_.items():
                    step = make_step(op, dim, jit_compile=(mode == "xla"))
                    start = time.perf_counter()
                    try:
                        for _ in range(spec["warmup"]):
                            step(kappa)[1].numpy()
                    except Exception as error:  # noqa: BLE001  (e.g. an op XLA cannot compile)
                        errors[name] = f"{type(error).__name__}: {str(error)[:300]}"
                        continue
                    warmup[name] = time.perf_counter() - start
                    steps[name] = step
                names = list(steps)
                per_call = {name: [] for name in names}
                cpu_per_call = {name: [] for name in names}
                for repeat in range(spec["repeats"]):
                    for name in (names if repeat % 2 == 0 else names[::-1]):
                        wall, cpu = time.perf_counter(), time.process_time()
                        for _ in range(spec["steps"]):
                            steps[name](kappa)[1].numpy()
                        per_call[name].append((time.perf_counter() - wall) / spec["steps"])
                        cpu_per_call[name].append((time.process_time() - cpu) / spec["steps"])
                for name in ops_:
                    row = {"op": name, "dim": dim, "dtype": dtype_name, "mode": mode,
                           "process": "tfp venv"}
                    if name in errors:
                        row["error"] = errors[name]
                    else:
                        row.update(seconds_per_call=per_call[name],
                                   cpu_seconds_per_call=cpu_per_call[name],
                                   warmup_seconds=warmup[name])
                    row.update(points=accuracy[name])
                    rows.append(row)
                    print(f"  [tfp venv] {name} m={dim} {dtype_name} {mode}: "
                          + (f"{1e3 * statistics.median(per_call[name]):.2f} ms" if name in steps
                             else f"failed ({errors[name][:120]})"), flush=True)
    result["rows"] = rows
    with open(spec["output"], "w", encoding="utf-8") as stream:
        json.dump(result, stream)
    return 0


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == TFP_WORKER:
    sys.exit(tfp_worker(sys.argv[2]))


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
}

SOFTMAX, TIED, CONTINUOUS = "softmax", "tied", "continuous"
HEADS = (SOFTMAX, TIED, CONTINUOUS)
OP_SPEED_GOAL = 3.0       # tfp time / our time, at equal accuracy
STEP_GOAL = 2.0           # continuous vs softmax, training step, at --goal-vocab
PARAMETER_CUT_GOAL = 90.0  # % of softmax's output-layer (trainable) parameters removed
VMF_OPTIONS = {"norm_penalty": 0.02, "dot_scale": 0.1}
ULP = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}
FIRST_WORD_ID = 4  # ids below are PAD, UNK, BOS, EOS


def _list(text, cast):
    return [cast(value) for value in text.split(",") if value.strip()]


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
    ops_group.add_argument("--op-dims", default="300", help="comma-separated m")
    ops_group.add_argument("--op-dtypes", default="float32,float64",
                           help="comma-separated κ dtypes (float32, float64)")
    ops_group.add_argument("--op-modes", default="graph,xla", help="graph and/or xla")
    ops_group.add_argument("--op-batch", type=int, default=100_000, help="κ values per call")
    ops_group.add_argument("--kappa-min", type=float, default=1e-6)
    ops_group.add_argument("--kappa-max", type=float, default=1e5)
    ops_group.add_argument("--op-warmup", type=int, default=2, help="untimed calls per op")
    ops_group.add_argument("--op-steps", type=int, default=10, help="timed calls per repeat")
    ops_group.add_argument("--op-repeats", type=int, default=5)
    ops_group.add_argument("--error-points", type=int, default=200,
                           help="κ of the batch compared with mpmath")
    model = parser.add_argument_group("(b) the whole LSTMSeq2Seq model")
    model.add_argument("--model", action=argparse.BooleanOptionalAction, default=True,
                       help="run part (b)")
    model.add_argument("--vocab-sizes", default="16000,50000",
                       help="comma-separated target vocabulary sizes |V|")
    model.add_argument("--goal-vocab", type=int, default=50000,
                       help="the |V| at which the goals of (b) are checked")
    model.add_argument("--source-vocab-size", type=int, default=0,
                       help="source vocabulary (0: the same as each |V|, as Table 3's 50K/50K)")
    model.add_argument("--embedding-dim", type=int, default=300,
                       help="d, the target embedding size (Table 3: 300)")
    model.add_argument("--source-embedding-dim", type=int, default=512,
                       help="the source embedding size (Table 3: 512)")
    model.add_argument("--hidden-dim", type=int, default=512, help="d_h (Table 3: 1024)")
    model.add_argument("--encoder-layers", type=int, default=1, help="(Table 3: 1)")
    model.add_argument("--decoder-layers", type=int, default=2, help="(Table 3: 2)")
    model.add_argument("--dropout", type=float, default=0.3)
    model.add_argument("--output-dim", type=int, default=300,
                       help="m, the continuous head's vector size")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    add_batch_arguments(data, batch_size=32)
    timing = parser.add_argument_group("timing of (b)")
    timing.add_argument("--warmup-steps", type=int, default=2, help="untimed steps per model")
    timing.add_argument("--steps", type=int, default=3, help="steps per model and repeat")
    timing.add_argument("--repeats", type=int, default=3,
                        help="timed passes per model, interleaved (training and decoding)")
    timing.add_argument("--decode-batches", type=int, default=2,
                        help="batches per decode call (0: no decoding benchmark)")
    timing.add_argument("--decode-batch-size", type=int, default=64)
    timing.add_argument("--decode-length", type=int, default=30,
                        help="tokens every sentence emits (EOS blocked until then)")
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "vmf", QUICK, positive=(
        "op_batch", "op_steps", "op_repeats", "embedding_dim", "hidden_dim",
        "source_embedding_dim", "output_dim", "encoder_layers", "decoder_layers",
        "batch_size", "source_length", "target_length", "steps", "repeats",
        "decode_batch_size", "decode_length"))
    for name in ("op_warmup", "warmup_steps", "decode_batches", "source_vocab_size"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if not 0 <= args.error_points <= args.op_batch:
        parser.error("--error-points must be in [0, --op-batch]")
    if not 0.0 < args.kappa_min < args.kappa_max:
        parser.error("need 0 < --kappa-min < --kappa-max")
    if not 0.0 <= args.dropout < 1.0:
        parser.error("--dropout must be in [0, 1)")
    try:
        args.op_dim_list = _list(args.op_dims, int)
        args.vocab_list = _list(args.vocab_sizes, int)
    except ValueError as error:
        parser.error(f"size lists are comma-separated ints ({error})")
    args.op_dtype_list = _list(args.op_dtypes, str)
    args.op_mode_list = _list(args.op_modes, str)
    if not args.op_dim_list or min(args.op_dim_list) < 2:
        parser.error("--op-dims needs dimensions >= 2")
    if not args.op_dtype_list or set(args.op_dtype_list) - set(ULP):
        parser.error(f"--op-dtypes must be among {tuple(ULP)}")
    if not args.op_mode_list or set(args.op_mode_list) - {"graph", "xla"}:
        parser.error("--op-modes must be among graph, xla")
    if not args.vocab_list or min(args.vocab_list) < 8:
        parser.error("--vocab-sizes needs sizes >= 8 (4 special ids plus words)")
    return args


ARGS = parse_args() if __name__ == "__main__" else None

setup(ARGS)  # before TensorFlow's first op: thread pools, quiet logger, this checkout on sys.path

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import mpmath  # noqa: E402
import vmf_ops  # noqa: E402  (benchmarks/ is the script's folder: our op's timing and mpmath)

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID  # noqa: E402
from tf_outheads.decoding import greedy_search  # noqa: E402
from tf_outheads.decoding.translator import Translator  # noqa: E402
from tf_outheads.losses.vmf import VMFLoss  # noqa: E402
from tf_outheads.metrics import parameter_report  # noqa: E402
from tf_outheads.ops import log_vmf_normalizer  # noqa: E402
from tf_outheads.training.translation import compile_for_translation  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402


def fmt_ms(ms):
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.3f}"


def goal_text(met):
    return "met" if met else "MISSED"


# --------------------------------------------------------------------------
# Part (a), parent side
# --------------------------------------------------------------------------
def point_errors(value, gradient, reference, kappas):
    """`vmf_ops.accuracy`'s definitions, on arrays already computed; also on κ >= 1 only."""
    value, gradient = np.asarray(value, np.float64), np.asarray(gradient, np.float64)
    expected_value, expected_gradient = reference
    with np.errstate(invalid="ignore", divide="ignore"):
        value_error = np.abs(value - expected_value) / np.maximum(np.abs(expected_value), 1.0)
        gradient_error = np.abs(gradient - expected_gradient) / np.abs(expected_gradient)
    # NaN (a non-finite result) counts as an infinite error.
    value_error = np.nan_to_num(value_error, nan=np.inf)
    gradient_error = np.nan_to_num(gradient_error, nan=np.inf)
    large = np.asarray(kappas) >= 1.0
    return {
        "value_max_error": float(np.max(value_error)),
        "gradient_max_relative_error": float(np.max(gradient_error)),
        "gradient_max_relative_error_kappa_ge_1":
            float(np.max(gradient_error[large])) if large.any() else None,
        "all_finite": bool(np.isfinite(value).all() and np.isfinite(gradient).all()),
    }


def time_ours_here(args, kappas, sample, references):
    """Our op in this process (the project's venv), with vmf_ops's step and timer."""
    timing = argparse.Namespace(warmup=args.op_warmup, steps=args.op_steps,
                                repeats=args.op_repeats)
    rows = []
    for dim in args.op_dim_list:
        for dtype_name in args.op_dtype_list:
            dtype = tf.as_dtype(dtype_name)
            errors = None
            if args.error_points:
                errors = vmf_ops.accuracy(dim, dtype, sample, references[dim])
                # The κ >= 1 column too, from the same definitions.
                kappa_points = tf.constant(sample, dtype)
                with tf.GradientTape() as tape:
                    tape.watch(kappa_points)
                    value = log_vmf_normalizer(kappa_points, dim)
                errors["gradient_max_relative_error_kappa_ge_1"] = point_errors(
                    value.numpy(), tape.gradient(value, kappa_points).numpy(), references[dim],
                    sample)["gradient_max_relative_error_kappa_ge_1"]
            kappa = tf.constant(kappas.astype(dtype.as_numpy_dtype))
            for mode in args.op_mode_list:
                step = vmf_ops.make_step(log_vmf_normalizer, dim, jit_compile=(mode == "xla"))
                per_call = vmf_ops.time_step(step, kappa, timing)
                rows.append({"op": "ours", "dim": dim, "dtype": dtype_name, "mode": mode,
                             "process": "project venv",
                             "ms_per_call": stats([1e3 * t for t in per_call]),
                             "million_kappa_per_second":
                                 args.op_batch / statistics.median(per_call) / 1e6,
                             "accuracy": errors})
                print(f"  [project venv] ours m={dim} {dtype_name} {mode}: "
                      f"{1e3 * statistics.median(per_call):.2f} ms", flush=True)
    return rows


def tfp_unavailable_reason(args):
    if args.tfp is False:
        return "--no-tfp given"
    if not os.path.exists(args.tfp_python):
        return (f"no Python at --tfp-python {args.tfp_python} (tensorflow-probability needs "
                "tf-keras, which conflicts with this project's Keras 3; make a separate venv: "
                "python3.11 -m venv /tmp/tfpvenv && /tmp/tfpvenv/bin/pip install "
                "'tensorflow==2.21.*' tensorflow-probability tf-keras)")
    return None


def run_tfp_child(args, kappas, sample):
    """Runs the worker in the tfp venv; returns (result dict or None, reason if None)."""
    with tempfile.TemporaryDirectory(prefix="vmf-tfp-") as folder:
        folder = pathlib.Path(folder)
        np.save(folder / "kappa.npy", kappas)
        np.save(folder / "sample.npy", sample)
        spec = {"bessel_path": str(BESSEL_PATH), "kappa_path": str(folder / "kappa.npy"),
                "sample_path": str(folder / "sample.npy"), "output": str(folder / "out.json"),
                "dims": args.op_dim_list, "dtypes": args.op_dtype_list,
                "modes": args.op_mode_list, "warmup": args.op_warmup, "steps": args.op_steps,
                "repeats": args.op_repeats, "intra_op_threads": args.intra_op_threads,
                "inter_op_threads": args.inter_op_threads}
        (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        start = time.perf_counter()
        completed = subprocess.run(
            [args.tfp_python, str(pathlib.Path(__file__).resolve()), TFP_WORKER,
             str(folder / "spec.json")],
            env=env, capture_output=True, text=True, check=False, cwd=str(REPO_ROOT))
        for line in completed.stdout.splitlines():
            if line.startswith("  [tfp venv]"):
                print(line, flush=True)
        output = folder / "out.json"
        result = json.loads(output.read_text(encoding="utf-8")) if output.exists() else None
    if result is None or result.get("error") or completed.returncode != 0:
        detail = (result or {}).get("error") or (completed.stderr.strip().splitlines() or ["?"])[-1]
        return None, (f"the tfp child ({args.tfp_python}) failed with exit "
                      f"{completed.returncode}: {detail[:300]}")
    result["child_seconds"] = time.perf_counter() - start
    return result, None


def summarize_child_rows(args, child, references, sample):
    rows = []
    for row in child["rows"]:
        row = dict(row)
        points = row.pop("points")
        if args.error_points:
            row["accuracy"] = point_errors(points["value"], points["gradient"],
                                           references[row["dim"]], sample)
        if "seconds_per_call" in row:
            row["ms_per_call"] = stats([1e3 * t for t in row.pop("seconds_per_call")])
            row["cpu_ms_per_call"] = stats([1e3 * t for t in row.pop("cpu_seconds_per_call")])
            row["million_kappa_per_second"] = args.op_batch / row["ms_per_call"]["median"] / 1e3
        rows.append(row)
    return rows


def op_comparisons(rows):
    """Speed ratio (tfp / ours) and the accuracy check, from the tfp venv's interleaved timings.

    Per (m, mode): ours and tfp in the same dtype; and, when both dtypes were
    timed, ours in float32 against tfp in float64 (tfp's value in float32 is
    ~40× less accurate than ours, which computes in float64 inside).
    """
    comparisons = []
    keyed = {(r["op"], r["dim"], r["dtype"], r["mode"]): r for r in rows
             if r["process"] == "tfp venv"}
    pairs = []
    for (op, dim, dtype, mode) in keyed:
        if op == "ours":
            pairs.append((dim, mode, dtype, dtype))
    for (op, dim, dtype, mode) in keyed:
        if op == "ours" and dtype == "float32" and ("tfp", dim, "float64", mode) in keyed:
            pairs.append((dim, mode, "float32", "float64"))
    for dim, mode, ours_dtype, tfp_dtype in pairs:
        ours = keyed[("ours", dim, ours_dtype, mode)]
        other = keyed.get(("tfp", dim, tfp_dtype, mode))
        entry = {"dim": dim, "mode": mode, "ours_dtype": ours_dtype, "tfp_dtype": tfp_dtype}
        if other is None or "ms_per_call" not in other or "ms_per_call" not in ours:
            entry["error"] = (other or {}).get("error") or ours.get("error") or "not timed"
            comparisons.append(entry)
            continue
        entry["speedup_vs_tfp"] = other["ms_per_call"]["median"] / ours["ms_per_call"]["median"]
        entry["speed_goal_met"] = entry["speedup_vs_tfp"] >= OP_SPEED_GOAL
        if ours.get("accuracy") and other.get("accuracy"):
            slack = 4 * ULP[ours_dtype]  # our result is rounded to its dtype
            entry["accuracy_at_least_equal"] = all(
                ours["accuracy"][key] <= max(other["accuracy"][key], slack)
                for key in ("value_max_error", "gradient_max_relative_error"))
        comparisons.append(entry)
    return comparisons


def comparison_name(entry):
    dtypes = (entry["ours_dtype"] if entry["ours_dtype"] == entry["tfp_dtype"]
              else f"ours {entry['ours_dtype']} vs tfp {entry['tfp_dtype']}")
    return f"m={entry['dim']} {entry['mode']} {dtypes}"


def print_op_table(args, rows, comparisons):
    print(f"\n(a) log C_m forward + backward over {args.op_batch:,} κ (log-uniform in "
          f"[{args.kappa_min:g}, {args.kappa_max:g}]), median of {args.op_repeats} repeat(s) × "
          f"{args.op_steps} calls; errors vs mpmath on {args.error_points} of those κ")
    header = (f"{'op':6s} {'process':13s} {'m':>5s} {'dtype':>8s} {'mode':>6s} {'ms/call':>9s} "
              f"{'Mκ/s':>7s} {'value err':>10s} {'grad err':>9s} {'κ>=1 grad':>9s}")
    print(header)
    print("-" * len(header))
    for row in rows:
        errors = row.get("accuracy")
        if errors:
            large = errors.get("gradient_max_relative_error_kappa_ge_1")
            cells = (f"{errors['value_max_error']:>10.1e} "
                     f"{errors['gradient_max_relative_error']:>9.1e} "
                     + (f"{large:>9.1e}" if large is not None else f"{'-':>9s}"))
        else:
            cells = f"{'':>10s} {'':>9s} {'':>9s}"
        if "ms_per_call" in row:
            timing = f"{row['ms_per_call']['median']:>9.2f} {row['million_kappa_per_second']:>7.1f}"
        else:
            timing = f"{'failed':>9s} {'':>7s}"
        print(f"{row['op']:6s} {row['process']:13s} {row['dim']:>5d} {row['dtype']:>8s} "
              f"{row['mode']:>6s} {timing} {cells}")
    print("(κ>=1 grad: the gradient's error on the κ >= 1 points only. Built on tfp, "
          "d/dκ log C_m = v/κ − (d/dκ log_bessel_ive + 1) subtracts two terms of size v/κ whose "
          "difference is the Bessel ratio ~κ/m: as κ → 0 it cancels catastrophically in any "
          "dtype. Ours never forms v/κ.)")
    if comparisons:
        print(f"goal (a): ours >= {OP_SPEED_GOAL:g}x faster than tfp at equal accuracy "
              "(both timed interleaved in the tfp venv's process):")
        for entry in comparisons:
            where = comparison_name(entry)
            if "error" in entry:
                print(f"  {where}: no comparison ({entry['error'][:160]})")
                continue
            accurate = entry.get("accuracy_at_least_equal")
            accuracy_text = ("" if accurate is None else
                             f"; errors {'no larger than' if accurate else 'LARGER than'} tfp's")
            print(f"  {where}: {entry['speedup_vs_tfp']:.2f}x "
                  f"({goal_text(entry['speed_goal_met'] and accurate is not False)}{accuracy_text})")


def run_ops(args):
    print("\n=== (a) the vMF log-normalizer op ===", flush=True)
    rng = np.random.default_rng(args.seed)
    kappas = np.exp(rng.uniform(np.log(args.kappa_min), np.log(args.kappa_max), args.op_batch))
    kappas = kappas.astype(np.float32)  # the same numbers in every dtype and process
    sample = np.sort(rng.choice(kappas, size=args.error_points, replace=False)).astype(np.float64)
    references = ({dim: vmf_ops.mpmath_reference(dim, sample) for dim in args.op_dim_list}
                  if args.error_points else {})
    record = {"tfp": {"python": args.tfp_python, "available": False}}
    reason = tfp_unavailable_reason(args)
    child = None
    if reason is None:
        print(f"tfp comparison: child process in {args.tfp_python}", flush=True)
        child, reason = run_tfp_child(args, kappas, sample)
    rows = time_ours_here(args, kappas, sample, references)
    if child is not None:
        record["tfp"].update(available=True, versions=child["versions"],
                             child_seconds=child["child_seconds"])
        rows += summarize_child_rows(args, child, references, sample)
    comparisons = op_comparisons(rows)
    print_op_table(args, rows, comparisons)
    if reason is not None:
        record["tfp"]["reason"] = reason
        print(f"part (a) has no tfp comparison: {reason}. Our op's timing above is "
              "benchmarks/vmf_ops.py's (make_step / time_step / mpmath errors).", flush=True)
    record.update(rows=rows, comparisons=comparisons,
                  error_definitions={
                      "value_max_error": "max |y - ref| / max(|ref|, 1), ref = log C_m(κ), mpmath",
                      "gradient_max_relative_error":
                          "max |g - ref| / |ref|, ref = -I_{m/2}(κ)/I_{m/2-1}(κ), mpmath"})
    return record


# --------------------------------------------------------------------------
# Part (b): the whole model
# --------------------------------------------------------------------------
def zipf_ids(rng, rows, length, vocab):
    """`(rows, length)` int32 word ids, log-uniform over ranks (as sampled.py), EOS last."""
    words = vocab - FIRST_WORD_ID
    u = rng.random((rows, length))
    ranks = np.clip(np.floor(np.exp(u * math.log(words + 1.0))) - 1.0, 0, words - 1)
    ids = (FIRST_WORD_ID + ranks).astype(np.int32)
    ids[:, -1] = EOS_ID
    return ids


def model_batches(args, source_vocab, vocab):
    rng = np.random.default_rng([args.seed, vocab, 1])
    batches = []
    for _ in range(args.steps):
        source = zipf_ids(rng, args.batch_size, args.source_length, source_vocab)
        target_out = zipf_ids(rng, args.batch_size, args.target_length, vocab)
        target_in = np.concatenate(
            [np.full((args.batch_size, 1), BOS_ID, np.int32), target_out[:, :-1]], axis=1)
        batches.append(({"source_ids": tf.constant(source), "target_in": tf.constant(target_in)},
                        tf.constant(target_out)))
    decode = [tf.constant(zipf_ids(rng, args.decode_batch_size, args.source_length, source_vocab))
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


def make_decoder(model, length):
    """As Translator: the kept head cache once per call, a tf.function per batch."""
    translator = Translator(model, None, None)

    def decode_batch(source_ids, cache):
        step_fn = model.make_step_fn(cache)
        state = model.initial_decoding_state(source_ids, max_length=length)
        # min_length = max_length: every sentence emits exactly `length` tokens.
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
    return [scale * s / u for s, u in zip(timing[key], timing["units"])]


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
        decoders = {name: make_decoder(models[name], args.decode_length) for name in names}
        sentences = args.decode_batches * args.decode_batch_size
        print("greedy decoding: warm-up (tracing)", flush=True)
        for name in names:
            start = time.perf_counter()
            emitted, _ = decoders[name](decode_sources)
            if emitted != sentences * args.decode_length:
                raise AssertionError(f"{name}: emitted {emitted} tokens, expected "
                                     f"{sentences * args.decode_length}")
            print(f"  {name}: {time.perf_counter() - start:.1f} s", flush=True)

        def decode_once(name):
            emitted, cache_seconds = decoders[name](decode_sources)
            return sentences, {"emitted_tokens": emitted, "cache_seconds": cache_seconds}

        def decode_progress(repeat, order, timings):
            print(f"  repeat {repeat + 1}: sentences/s: " + ", ".join(
                f"{n} {timings[n]['units'][-1] / timings[n]['seconds'][-1]:,.1f}" for n in order),
                flush=True)

        print("greedy decoding: sentences/s, interleaved", flush=True)
        timings = interleaved(names, decode_once, args.repeats, decode_progress)
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
    warmup = {}
    for name in names:
        start = time.perf_counter()
        for index in range(args.warmup_steps):
            features, target_out = batches[index % len(batches)]
            models[name].train_on_batch(features, target_out)
        warmup[name] = time.perf_counter() - start
        print(f"  {name}: {warmup[name]:.1f} s", flush=True)

    def train_once(name):
        loss = None
        for features, target_out in batches:
            loss = models[name].train_on_batch(features, target_out)
        return len(batches), {"last_loss": float(np.ravel(loss)[0])}

    def train_progress(repeat, order, timings):
        print(f"  repeat {repeat + 1}: ms/step: " + ", ".join(
            f"{n} {fmt_ms(1000 * timings[n]['seconds'][-1] / timings[n]['units'][-1])}"
            for n in order), flush=True)

    print("training: train_on_batch, interleaved", flush=True)
    timings = interleaved(names, train_once, args.repeats, train_progress)
    softmax_wall, softmax_cpu = per_unit(timings[SOFTMAX]), per_unit(timings[SOFTMAX], "cpu_seconds")
    softmax_out = params[SOFTMAX]["output_layer_trainable"]
    rows = []
    for name in names:
        wall, cpu = per_unit(timings[name]), per_unit(timings[name], "cpu_seconds")
        row = {
            "head": name, "vocab": vocab, "ms_per_step": stats(wall), "cpu_ms_per_step": stats(cpu),
            "tokens_per_second_median": tokens * 1000 / statistics.median(wall),
            "ratio_to_softmax": {
                "ratio_of_medians": statistics.median(softmax_wall) / statistics.median(wall),
                "median_of_paired_ratios": statistics.median(
                    s / w for s, w in zip(softmax_wall, wall)),
                "cpu_ratio_of_medians": statistics.median(softmax_cpu) / statistics.median(cpu),
            },
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
    gc.collect()
    keras.backend.clear_session()
    return result


def print_model_tables(args, result):
    vocab = result["vocab"]
    at_goal = vocab == args.goal_vocab
    print(f"\n(b) training, |V| = {vocab:,}: train_on_batch, median of {args.repeats} repeat(s) "
          f"× {args.steps} step(s); {result['tokens_per_step']} target tokens per step")
    header = (f"{'head':11s} {'ms/step':>9s} {'tok/s':>8s} {'×softmax':>8s} {'×sm CPU':>8s} "
              f"{'params':>12s} {'out. train.':>12s} {'out. frozen':>12s} {'out. cut':>8s}  goal")
    print(header)
    print("-" * (len(header) + 30))
    for row in result["rows"]:
        p = row["parameters"]
        ratio = row["ratio_to_softmax"]["ratio_of_medians"]
        cut = row["output_layer_cut_vs_softmax_percent"]
        goal = ""
        if at_goal and row["head"] == CONTINUOUS:
            goal = (f"step >= {STEP_GOAL:g}× {goal_text(ratio >= STEP_GOAL)}; "
                    f"cut >= {PARAMETER_CUT_GOAL:g}% {goal_text(cut >= PARAMETER_CUT_GOAL)}")
        print(f"{row['head']:11s} {fmt_ms(row['ms_per_step']['median']):>9s} "
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
        print(header)
        print("-" * len(header))
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
    tf.random.set_seed(args.seed)
    machine = machine_info()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, mpmath {mpmath.__version__}, "
          f"{machine['cpu_count']} CPUs, devices {machine['devices']}"
          + (" (--quick)" if args.quick else ""), flush=True)
    started = time.perf_counter()
    ops_record = run_ops(args) if args.ops else None
    model_record = None
    if args.model:
        model_record = {str(vocab): run_model(args, vocab) for vocab in args.vocab_list}
    goals = check_goals(args, ops_record, model_record)
    record = write_record("vmf", args, machine, started, {
        "vmf_loss": VMF_OPTIONS,
        "ops": ops_record,
        "model": model_record,
        "goals": goals,
    })
    return record


if __name__ == "__main__":
    main(ARGS)
