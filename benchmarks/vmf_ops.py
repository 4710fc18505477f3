"""Speed and accuracy of the vMF log-normalizer op, `tf_outheads.ops.log_vmf_normalizer`.

For each embedding dimension m of `--dims` (300, the fastText size of Kumar &
Tsvetkov 2019, and 1024) and each dtype of `--dtypes` (float32, float64), one
run on the machine's default device times forward + backward of
`log_vmf_normalizer(kappa, m)` over one batch of `--batch` κ values (100k by
default), the way NLLvMF uses it in training: value, `tf.reduce_sum`, and the
gradient with respect to κ (the custom gradient, −I_{m/2}/I_{m/2−1}).

Timing. One `tf.function` per (m, dtype, mode), in graph mode and with XLA
(`jit_compile=True`; `--modes`). After `--warmup` untimed calls (tracing and
compilation), each of `--repeats` repeats times `--steps` calls, fetching the
gradient to the host so the work is done; reported: median ms per call over
repeats (and min/max), and millions of κ per second. For scale, the same is
timed for `log_vmf_normalizer_lower_bound` (Kumar & Tsvetkov's closed form,
elementary ops in the input dtype); it is not the same quantity (an
approximation up to a constant, see its docstring).

Accuracy. A subsample of `--error-points` κ of the timed batch (200 by
default) is compared with mpmath (`mpmath.besseli`, 40 digits) at the exact κ
the op received (float32 κ are widened exactly): the value's error relative
to max(|ref|, 1) (log C_m crosses 0) and the gradient's plain relative error
against −I_{m/2}/I_{m/2−1}.

Data. κ log-uniform over [`--kappa-min`, `--kappa-max`] = [1e-6, 1e5] by
default (the range the op is tested on), seed `--seed`, drawn once in float32
so both dtypes see the same numbers.

No comparison with tensorflow-probability (`tfp.math.log_bessel_ive`):
TFP needs `tf-keras` (Keras 2), which cannot be installed next to Keras 3 in
this project's environment.

Run from the repository root (10–20 s on 2 CPU cores, TensorFlow start-up included):

    python benchmarks/vmf_ops.py
    python benchmarks/vmf_ops.py --dims 300 --dtypes float32 --batch 1000000

Results go to `--output` (JSON, default benchmarks/results/vmf_ops.json).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

from common import (  # benchmarks/ is the script's folder
    REPO_ROOT, benchmark_parser, machine_info, parse_benchmark_args, print_header, start, stats,
    write_record,
)
from op_steps import add_op_arguments, check_op_arguments, make_step, run_calls  # no TensorFlow

HERE = pathlib.Path(__file__).resolve().parent
BESSEL_PATH = REPO_ROOT / "tf_outheads" / "ops" / "bessel.py"
DTYPE_CHOICES = ("float16", "bfloat16", "float32", "float64")
OP_SPEED_GOAL = 3.0  # vmf.py (a): tfp time / our time, at equal accuracy
ULP = {"float32": 2.0 ** -23, "float64": 2.0 ** -52}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, None)
    add_op_arguments(parser, "", dims="300,1024", dtypes=DTYPE_CHOICES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-lower-bound", action="store_true",
                        help="skip timing log_vmf_normalizer_lower_bound")
    args = parse_benchmark_args(parser, argv, "vmf_ops", None)
    check_op_arguments(parser, args, "", DTYPE_CHOICES)
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import mpmath  # noqa: E402

from tf_outheads.ops import log_vmf_normalizer  # noqa: E402
from tf_outheads.ops import log_vmf_normalizer_lower_bound  # noqa: E402


OPS = {"log_vmf_normalizer": log_vmf_normalizer, "lower_bound": log_vmf_normalizer_lower_bound}


def time_step(step, kappa, args):
    """`args.warmup` untimed calls, then seconds per call over `args.steps` calls, per repeat."""
    run_calls(step, kappa, args.warmup)
    per_call = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        run_calls(step, kappa, args.steps)
        per_call.append((time.perf_counter() - start) / args.steps)
    return per_call


def mpmath_reference(dim, kappas):
    """log C_m(κ) and −I_{m/2}(κ)/I_{m/2−1}(κ) at each κ, float64."""
    values, gradients = [], []
    with mpmath.workdps(40):
        order = mpmath.mpf(dim) / 2 - 1
        for kappa in kappas:
            kappa = mpmath.mpf(float(kappa))
            bessel = mpmath.besseli(order, kappa)
            values.append(order * mpmath.log(kappa) - (order + 1) * mpmath.log(2 * mpmath.pi)
                          - mpmath.log(bessel))
            gradients.append(-mpmath.besseli(order + 1, kappa) / bessel)
    return np.array([float(x) for x in values]), np.array([float(x) for x in gradients])


def accuracy(dim, dtype, kappas, reference):
    kappa = tf.constant(kappas, dtype)
    with tf.GradientTape() as tape:
        tape.watch(kappa)
        value = log_vmf_normalizer(kappa, dim)
    gradient = tape.gradient(value, kappa)
    value = value.numpy().astype(np.float64)
    gradient = gradient.numpy().astype(np.float64)
    expected_value, expected_gradient = reference
    return {
        "value_max_error": float(np.max(np.abs(value - expected_value)
                                        / np.maximum(np.abs(expected_value), 1.0))),
        "gradient_max_relative_error": float(np.max(np.abs(gradient - expected_gradient)
                                                    / np.abs(expected_gradient))),
        "all_finite": bool(np.isfinite(value).all() and np.isfinite(gradient).all()),
    }


def error_cells(errors, kappa_ge_1=False):
    """The error columns of a row (`accuracy`'s; with `kappa_ge_1`, also κ >= 1's)."""
    if not errors:
        return f"{'':>10s} {'':>9s}" + (f" {'':>9s}" if kappa_ge_1 else "")
    cells = f"{errors['value_max_error']:>10.1e} {errors['gradient_max_relative_error']:>9.1e}"
    if kappa_ge_1:
        large = errors.get("gradient_max_relative_error_kappa_ge_1")
        cells += f" {large:>9.1e}" if large is not None else f" {'-':>9s}"
    return cells


def print_table(args, rows):
    print(f"\nforward + backward over {args.batch:,} κ (log-uniform in [{args.kappa_min:g}, "
          f"{args.kappa_max:g}]), median of {args.repeats} repeat(s) × {args.steps} calls; "
          f"errors vs mpmath on {args.error_points} of those κ")
    header = (f"{'op':20s} {'m':>5s} {'dtype':>8s} {'mode':>6s} {'ms/call':>8s} {'min':>7s} "
              f"{'max':>7s} {'Mκ/s':>7s} {'value err':>10s} {'grad err':>9s}")
    print_header(header)
    for row in rows:
        ms = row["ms_per_call"]
        print(f"{row['op']:20s} {row['dim']:>5d} {row['dtype']:>8s} {row['mode']:>6s} "
              f"{ms['median']:>8.2f} {ms['min']:>7.2f} {ms['max']:>7.2f} "
              f"{row['million_kappa_per_second']:>7.1f} {error_cells(row.get('accuracy'))}")


# --------------------------------------------------------------------------
# Against tensorflow-probability: part (a) of vmf.py (its child: vmf_tfp_worker.py)
# --------------------------------------------------------------------------
def goal_text(met):
    return "met" if met else "MISSED"


def point_errors(value, gradient, reference, kappas):
    """`accuracy`'s definitions, on arrays already computed; also on κ >= 1 only."""
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
                errors = accuracy(dim, dtype, sample, references[dim])
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
                step = make_step(log_vmf_normalizer, dim, jit_compile=(mode == "xla"))
                per_call = time_step(step, kappa, timing)
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
            [args.tfp_python, str(HERE / "vmf_tfp_worker.py"), str(folder / "spec.json")],
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
    print_header(header)
    for row in rows:
        cells = error_cells(row.get("accuracy"), kappa_ge_1=True)
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
    references = ({dim: mpmath_reference(dim, sample) for dim in args.op_dim_list}
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



def main(args):
    machine = machine_info()
    print(f"TensorFlow {tf.__version__}, mpmath {mpmath.__version__}, {machine['cpu_count']} CPUs, "
          f"devices {machine['devices']}", flush=True)
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    kappas = np.exp(rng.uniform(np.log(args.kappa_min), np.log(args.kappa_max), args.batch))
    kappas = kappas.astype(np.float32)  # the same numbers in every dtype
    sample = np.sort(rng.choice(kappas, size=args.error_points, replace=False)).astype(np.float64)

    rows = []
    ops = ["log_vmf_normalizer"] + ([] if args.no_lower_bound else ["lower_bound"])
    for dim in args.dim_list:
        reference = mpmath_reference(dim, sample) if args.error_points else None
        for dtype_name in args.dtype_list:
            dtype = tf.as_dtype(dtype_name)
            # float16/bfloat16 round κ; compare at the κ the op actually received.
            received = tf.cast(tf.constant(sample), dtype).numpy().astype(np.float64)
            if args.error_points:
                errors = accuracy(dim, dtype, received,
                                  reference if (received == sample).all()
                                  else mpmath_reference(dim, received))
            kappa = tf.constant(kappas.astype(dtype.as_numpy_dtype))
            for op_name in ops:
                for mode in args.mode_list:
                    step = make_step(OPS[op_name], dim, jit_compile=(mode == "xla"))
                    per_call = time_step(step, kappa, args)
                    median = statistics.median(per_call)
                    row = {
                        "op": op_name, "dim": dim, "dtype": dtype_name, "mode": mode,
                        "ms_per_call": {"median": 1e3 * median, "min": 1e3 * min(per_call),
                                        "max": 1e3 * max(per_call),
                                        "values": [1e3 * t for t in per_call]},
                        "million_kappa_per_second": args.batch / median / 1e6,
                    }
                    if op_name == "log_vmf_normalizer" and args.error_points:
                        row["accuracy"] = errors
                    rows.append(row)
                    print(f"  {op_name} m={dim} {dtype_name} {mode}: {1e3 * median:.2f} ms",
                          flush=True)
    print_table(args, rows)

    return write_record("vmf_ops", args, machine, started, {
        "mpmath": mpmath.__version__,
        "error_definitions": {
            "value_max_error": "max |y - ref| / max(|ref|, 1), ref = log C_m(κ) from mpmath",
            "gradient_max_relative_error": "max |g - ref| / |ref|, ref = -I_{m/2}(κ)/I_{m/2-1}(κ)",
        },
        "results": rows,
    })


if __name__ == "__main__":
    main(ARGS)
