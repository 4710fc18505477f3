"""The vMF log-normalizer op's timing: its options, its forward + backward step and
its timed calls.

Shared by `vmf_ops.py` (options without a prefix), part (a) of `vmf.py` (options
`--op-...`) and `vmf_tfp_worker.py` (in the tensorflow-probability venv, which has
neither this project nor Keras 3): import nothing here but the standard library;
TensorFlow is imported by `make_step`, once the caller has set its thread pools.
"""

from common import choice_list, int_list

MODES = ("graph", "xla")


def add_op_arguments(group, prefix, dims, dtypes):
    """The op's options: `--{prefix}dims` (default `dims`), `--{prefix}dtypes` (among
    `dtypes`), `--{prefix}modes`, `--{prefix}batch`, `--kappa-min`, `--kappa-max`,
    `--{prefix}warmup`, `--{prefix}steps`, `--{prefix}repeats` and `--error-points`."""
    group.add_argument(f"--{prefix}dims", default=dims, help="comma-separated embedding dimensions m")
    group.add_argument(f"--{prefix}dtypes", default="float32,float64",
                       help=f"comma-separated κ dtypes ({', '.join(dtypes)})")
    group.add_argument(f"--{prefix}modes", default="graph,xla", help="tf.function modes: graph, xla")
    group.add_argument(f"--{prefix}batch", type=int, default=100_000, help="κ values per call")
    group.add_argument("--kappa-min", type=float, default=1e-6)
    group.add_argument("--kappa-max", type=float, default=1e5)
    group.add_argument(f"--{prefix}warmup", type=int, default=2,
                       help="untimed calls per op (tracing, XLA)")
    group.add_argument(f"--{prefix}steps", type=int, default=10, help="timed calls per repeat")
    group.add_argument(f"--{prefix}repeats", type=int, default=5)
    group.add_argument("--error-points", type=int, default=200,
                       help="κ of the batch compared with mpmath")


def check_op_arguments(parser, args, prefix, dtypes):
    """Checks `add_op_arguments`' options (argparse errors) and sets the parsed lists
    `args.{prefix}dim_list`, `{prefix}dtype_list` and `{prefix}mode_list`."""
    key = prefix.replace("-", "_")
    for name in ("batch", "steps", "repeats"):
        if getattr(args, key + name) < 1:
            parser.error(f"--{prefix}{name} must be >= 1")
    if getattr(args, key + "warmup") < 0:
        parser.error(f"--{prefix}warmup must be >= 0")
    if not 0 <= args.error_points <= getattr(args, key + "batch"):
        parser.error(f"--error-points must be in [0, --{prefix}batch]")
    if not 0.0 < args.kappa_min < args.kappa_max:
        parser.error("need 0 < --kappa-min < --kappa-max")
    setattr(args, key + "dim_list", int_list(parser, prefix + "dims", getattr(args, key + "dims"), 2))
    setattr(args, key + "dtype_list",
            choice_list(parser, prefix + "dtypes", getattr(args, key + "dtypes"), dtypes))
    setattr(args, key + "mode_list",
            choice_list(parser, prefix + "modes", getattr(args, key + "modes"), MODES))


def make_step(op, dim, jit_compile):
    """forward + backward of `op` over a batch: (Σ value, gradient)."""
    import tensorflow as tf

    @tf.function(jit_compile=jit_compile)
    def step(kappa):
        with tf.GradientTape() as tape:
            tape.watch(kappa)
            total = tf.reduce_sum(op(kappa, dim))
        return total, tape.gradient(total, kappa)

    return step


def run_calls(step, kappa, calls):
    """`calls` calls of `step`, each waited for (its gradient fetched); returns `calls`."""
    for _ in range(calls):
        step(kappa)[1].numpy()
    return calls
