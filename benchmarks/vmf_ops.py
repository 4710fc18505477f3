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
import pathlib
import statistics
import time

from common import machine_info, setup, write_record  # benchmarks/ is the script's folder

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DTYPE_CHOICES = ("float16", "bfloat16", "float32", "float64")
MODE_CHOICES = ("graph", "xla")


def _list(text, cast):
    return [cast(value) for value in text.split(",") if value.strip()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--dims", default="300,1024", help="comma-separated embedding dimensions m")
    parser.add_argument("--dtypes", default="float32,float64", help="comma-separated κ dtypes")
    parser.add_argument("--modes", default="graph,xla", help="tf.function modes: graph, xla")
    data = parser.add_argument_group("data")
    data.add_argument("--batch", type=int, default=100_000, help="κ values per call")
    data.add_argument("--kappa-min", type=float, default=1e-6)
    data.add_argument("--kappa-max", type=float, default=1e5)
    data.add_argument("--seed", type=int, default=0)
    timing = parser.add_argument_group("timing")
    timing.add_argument("--warmup", type=int, default=2, help="untimed calls (tracing, XLA)")
    timing.add_argument("--steps", type=int, default=10, help="timed calls per repeat")
    timing.add_argument("--repeats", type=int, default=5)
    timing.add_argument("--no-lower-bound", action="store_true",
                        help="skip timing log_vmf_normalizer_lower_bound")
    parser.add_argument("--error-points", type=int, default=200,
                        help="κ of the batch compared with mpmath")
    parser.add_argument("--output", default=str(REPO_ROOT / "benchmarks" / "results" / "vmf_ops.json"),
                        help="JSON results path")
    args = parser.parse_args(argv)
    try:
        args.dim_list = _list(args.dims, int)
    except ValueError as error:
        parser.error(f"--dims is a comma-separated list of ints ({error})")
    args.dtype_list = _list(args.dtypes, str)
    args.mode_list = _list(args.modes, str)
    if not args.dim_list or min(args.dim_list) < 2:
        parser.error("--dims needs dimensions >= 2")
    if not args.dtype_list or set(args.dtype_list) - set(DTYPE_CHOICES):
        parser.error(f"--dtypes must be among {DTYPE_CHOICES}")
    if not args.mode_list or set(args.mode_list) - set(MODE_CHOICES):
        parser.error(f"--modes must be among {MODE_CHOICES}")
    for name in ("batch", "steps", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if args.warmup < 0 or not 0 <= args.error_points <= args.batch:
        parser.error("--warmup must be >= 0 and --error-points in [0, --batch]")
    if not 0.0 < args.kappa_min < args.kappa_max:
        parser.error("need 0 < --kappa-min < --kappa-max")
    return args


ARGS = parse_args() if __name__ == "__main__" else None

setup(ARGS)  # before TensorFlow's first op: thread pools, quiet logger, this checkout on sys.path

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import mpmath  # noqa: E402

from tf_outheads.ops import log_vmf_normalizer  # noqa: E402
from tf_outheads.ops import log_vmf_normalizer_lower_bound  # noqa: E402

OPS = {"log_vmf_normalizer": log_vmf_normalizer, "lower_bound": log_vmf_normalizer_lower_bound}


def make_step(op, dim, jit_compile):
    """forward + backward of `op` over a batch: (Σ value, gradient)."""

    @tf.function(jit_compile=jit_compile)
    def step(kappa):
        with tf.GradientTape() as tape:
            tape.watch(kappa)
            total = tf.reduce_sum(op(kappa, dim))
        return total, tape.gradient(total, kappa)

    return step


def time_step(step, kappa, args):
    for _ in range(args.warmup):
        step(kappa)[1].numpy()
    per_call = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            step(kappa)[1].numpy()
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


def print_table(args, rows):
    print(f"\nforward + backward over {args.batch:,} κ (log-uniform in [{args.kappa_min:g}, "
          f"{args.kappa_max:g}]), median of {args.repeats} repeat(s) × {args.steps} calls; "
          f"errors vs mpmath on {args.error_points} of those κ")
    header = (f"{'op':20s} {'m':>5s} {'dtype':>8s} {'mode':>6s} {'ms/call':>8s} {'min':>7s} "
              f"{'max':>7s} {'Mκ/s':>7s} {'value err':>10s} {'grad err':>9s}")
    print(header)
    print("-" * len(header))
    for row in rows:
        errors = row.get("accuracy")
        if errors:
            error_cells = (f"{errors['value_max_error']:>10.1e} "
                           f"{errors['gradient_max_relative_error']:>9.1e}")
        else:
            error_cells = f"{'':>10s} {'':>9s}"
        ms = row["ms_per_call"]
        print(f"{row['op']:20s} {row['dim']:>5d} {row['dtype']:>8s} {row['mode']:>6s} "
              f"{ms['median']:>8.2f} {ms['min']:>7.2f} {ms['max']:>7.2f} "
              f"{row['million_kappa_per_second']:>7.1f} {error_cells}")


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

    record = write_record("vmf_ops", args, machine, started, {
        "mpmath": mpmath.__version__,
        "error_definitions": {
            "value_max_error": "max |y - ref| / max(|ref|, 1), ref = log C_m(κ) from mpmath",
            "gradient_max_relative_error": "max |g - ref| / |ref|, ref = -I_{m/2}(κ)/I_{m/2-1}(κ)",
        },
        "results": rows,
    })
    return record


if __name__ == "__main__":
    main(ARGS)
