"""Part (a) of `vmf.py`, child side: our log C_m against tfp's, in the tfp venv.

Run by `vmf.py` as `TFP_PYTHON benchmarks/vmf_tfp_worker.py SPEC.json` in a
virtual environment with TensorFlow and tensorflow-probability (which needs
tf-keras, so not this project's Keras 3). It imports only TensorFlow, tfp,
NumPy, `bessel.py` (by path), `op_steps.py` and `common.interleaved` (standard
library only until a helper is called), times both ops interleaved and writes
their timings and values at the error points to the spec's `output`.
"""

import json
import math
import statistics
import sys
import time


def load_modules(spec):
    """TensorFlow (thread pools set first), tfp and our bessel.py, by path."""
    import importlib.util

    import tensorflow as tf

    if spec["intra_op_threads"]:
        tf.config.threading.set_intra_op_parallelism_threads(spec["intra_op_threads"])
    if spec["inter_op_threads"]:
        tf.config.threading.set_inter_op_parallelism_threads(spec["inter_op_threads"])
    import tensorflow_probability as tfp

    module_spec = importlib.util.spec_from_file_location("tfo_bessel", spec["bessel_path"])
    bessel = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(bessel)
    return tf, tfp, bessel


def point_values(tf, np, op, points, dim):
    """The op's values and gradients at the error points, as float64 lists."""
    with tf.GradientTape() as tape:
        tape.watch(points)
        value = op(points, dim)
    gradient = tape.gradient(value, points)
    return {"value": value.numpy().astype(np.float64).tolist(),
            "gradient": gradient.numpy().astype(np.float64).tolist()}


def time_ops(spec, ops, dim, dtype_name, mode, kappa):
    """Warm-up, then the ops' timed calls interleaved; row fields per op name."""
    from common import interleaved
    from op_steps import make_step, run_calls

    steps, fields = {}, {}
    for name, op in ops.items():
        step = make_step(op, dim, jit_compile=(mode == "xla"))
        start = time.perf_counter()
        try:
            run_calls(step, kappa, spec["warmup"])
        except Exception as error:  # noqa: BLE001  (e.g. an op XLA cannot compile)
            fields[name] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
            continue
        fields[name] = {"warmup_seconds": time.perf_counter() - start}
        steps[name] = step
    timings = interleaved(list(steps), lambda name: (run_calls(steps[name], kappa, spec["steps"]),
                                                     None), spec["repeats"])
    for name, timing in timings.items():
        fields[name] = {
            "seconds_per_call": [s / u for s, u in zip(timing["seconds"], timing["units"])],
            "cpu_seconds_per_call": [s / u for s, u in zip(timing["cpu_seconds"], timing["units"])],
            **fields[name]}
    return fields


def tfp_worker(spec_path):
    with open(spec_path, encoding="utf-8") as stream:
        spec = json.load(stream)
    result = {"error": None}
    try:
        import numpy as np

        tf, tfp, bessel = load_modules(spec)
    except Exception as error:  # noqa: BLE001  (reported to the parent, which explains)
        result["error"] = f"{type(error).__name__}: {error}"
        with open(spec["output"], "w", encoding="utf-8") as stream:
            json.dump(result, stream)
        return 3
    result["versions"] = {"tensorflow": tf.__version__, "tensorflow_probability": tfp.__version__,
                          "numpy": np.__version__}

    def tfp_op(kappa, dim):
        order = tf.constant(dim / 2 - 1, kappa.dtype)
        log_bessel = tfp.math.log_bessel_ive(order, kappa) + kappa  # log I_v(κ)
        return (order * tf.math.log(kappa) - (order + 1) * math.log(2 * math.pi) - log_bessel)

    ops = {"ours": bessel.log_vmf_normalizer, "tfp": tfp_op}
    kappas = np.load(spec["kappa_path"])
    sample = np.load(spec["sample_path"])
    rows = []
    for dim in spec["dims"]:
        for dtype_name in spec["dtypes"]:
            dtype = tf.as_dtype(dtype_name)
            kappa = tf.constant(kappas.astype(dtype.as_numpy_dtype))
            points = tf.constant(sample.astype(dtype.as_numpy_dtype))
            accuracy = {name: point_values(tf, np, op, points, dim) for name, op in ops.items()}
            for mode in spec["modes"]:
                fields = time_ops(spec, ops, dim, dtype_name, mode, kappa)
                for name in ops:
                    row = {"op": name, "dim": dim, "dtype": dtype_name, "mode": mode,
                           "process": "tfp venv", **fields[name], "points": accuracy[name]}
                    rows.append(row)
                    print(f"  [tfp venv] {name} m={dim} {dtype_name} {mode}: "
                          + (f"failed ({row['error'][:120]})" if "error" in row else
                             f"{1e3 * statistics.median(row['seconds_per_call']):.2f} ms"),
                          flush=True)
    result["rows"] = rows
    with open(spec["output"], "w", encoding="utf-8") as stream:
        json.dump(result, stream)
    return 0


if __name__ == "__main__":
    sys.exit(tfp_worker(sys.argv[1]))
