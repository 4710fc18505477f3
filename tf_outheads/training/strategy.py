"""One place that picks the `tf.distribute` strategy and the precision of a run.

    strategy = make_strategy("mirrored", num_gpus=4)     # or "default", "multi_worker"
    with strategy.scope():
        model = LSTMSeq2Seq(...)
        compile_for_translation(model, ...)
    tf_outheads.training.fit(model, dataset, ...)        # the same call for every strategy

`"default"` is TensorFlow's default strategy (one device); `"mirrored"` copies
the model on every local GPU (or the given devices: `"/cpu:0", "/cpu:1"` after
`split_cpu(2)` for tests); `"multi_worker"` spans the hosts listed in the
`TF_CONFIG` environment variable, one process per host, all running the same
program.
"""

import json
import os

import keras
import tensorflow as tf

from tf_outheads.validation import positive_int

STRATEGIES = ("default", "mirrored", "multi_worker")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def split_cpu(count):
    """Expose the host CPU as `count` logical devices (`/cpu:0` ... `/cpu:{count-1}`).

    Lets `MirroredStrategy` run several replicas on a machine without GPUs
    (tests, tutorials). Must be called before TensorFlow initialises its
    devices, i.e. before the first op runs.

    Raises:
        RuntimeError: TensorFlow's devices are already initialised with
            another configuration.
    """
    count = positive_int("count", count)
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) == count:
        return [device.name for device in tf.config.list_logical_devices("CPU")]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as error:
        raise RuntimeError(
            f"split_cpu({count}) must run before TensorFlow initialises its devices (call it "
            f"at the start of the program, before any op). TensorFlow said: {error}") from None
    return [device.name for device in tf.config.list_logical_devices("CPU")]


def _tf_config():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise ValueError(
            "strategy='multi_worker' reads the cluster from the TF_CONFIG environment "
            "variable, which is not set. Set it on every worker, e.g. TF_CONFIG="
            '\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}\'')
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}). Received: TF_CONFIG={raw!r}")
    workers = (config.get("cluster") or {}).get("worker") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not workers or not isinstance(task, dict) or task.get("type") not in ("worker", "chief"):
        raise ValueError(
            "TF_CONFIG must name the workers and this process's task: "
            '{"cluster": {"worker": [...]}, "task": {"type": "worker", "index": i}}. '
            f"Received: TF_CONFIG={raw!r}")
    index = task.get("index")
    if not isinstance(index, int) or not 0 <= index < len(workers) + (task["type"] == "chief"):
        raise ValueError(f"TF_CONFIG task index {index!r} is not one of the {len(workers)} "
                         f"workers. Received: TF_CONFIG={raw!r}")
    return config


def make_strategy(strategy="default", num_gpus=None, devices=None):
    """The `tf.distribute.Strategy` named by `strategy`.

    Args:
        strategy: str or `tf.distribute.Strategy`. `"default"` (one device),
            `"mirrored"` (synchronous replicas on the local GPUs, or on
            `devices`), `"multi_worker"` (synchronous replicas on every host
            of `TF_CONFIG`, each host's GPUs or its CPU; create it first thing
            in the program, before any TensorFlow op). A strategy object is
            returned as it is. Defaults to `"default"`.
        num_gpus: int or `None`. `"mirrored"` only: use the first `num_gpus`
            GPUs (`None`: all). Defaults to `None`.
        devices: list of str or `None`. `"mirrored"` only: the devices, e.g.
            `["/gpu:0", "/gpu:2"]` or `["/cpu:0", "/cpu:1"]` (see `split_cpu`).
            Defaults to `None`.

    Raises:
        ValueError: an unknown name, `num_gpus` beyond the GPUs present,
            both `num_gpus` and `devices`, or a missing/invalid `TF_CONFIG`.
    """
    if isinstance(strategy, tf.distribute.Strategy):
        return strategy
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES} or a tf.distribute.Strategy. "
                         f"Received: strategy={strategy!r}")
    if strategy != "mirrored" and (num_gpus is not None or devices is not None):
        raise ValueError(f"`num_gpus` and `devices` choose the devices of strategy='mirrored'. "
                         f"Received: strategy={strategy!r}, num_gpus={num_gpus!r}, "
                         f"devices={devices!r}")
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "multi_worker":
        _tf_config()
        communication = (tf.distribute.experimental.CommunicationImplementation.NCCL
                         if tf.config.list_physical_devices("GPU")
                         else tf.distribute.experimental.CommunicationImplementation.RING)
        try:
            return tf.distribute.MultiWorkerMirroredStrategy(
                communication_options=tf.distribute.experimental.CommunicationOptions(
                    implementation=communication))
        except RuntimeError as error:
            raise RuntimeError(
                "make_strategy('multi_worker') must run before TensorFlow runs any op (at the "
                "start of the program, before reading data or building tokenizers). "
                f"TensorFlow said: {error}") from None
    if num_gpus is not None and devices is not None:
        raise ValueError("Give `num_gpus` or `devices`, not both. "
                         f"Received: num_gpus={num_gpus!r}, devices={devices!r}")
    if num_gpus is not None:
        num_gpus = positive_int("num_gpus", num_gpus)
        available = len(tf.config.list_physical_devices("GPU"))
        if num_gpus > available:
            raise ValueError(f"`num_gpus` is larger than the {available} GPU(s) of this "
                             f"machine. Received: num_gpus={num_gpus}")
        devices = [f"/gpu:{index}" for index in range(num_gpus)]
    return tf.distribute.MirroredStrategy(devices=devices)


def set_precision(policy="float32"):
    """Set Keras' global dtype policy; call it before building the model.

    `"mixed_float16"` computes in float16 with float32 variables; Keras'
    `compile` then wraps the optimizer in `keras.optimizers.LossScaleOptimizer`
    (dynamic loss scaling), which the trainer honours. `"mixed_bfloat16"`
    needs no loss scaling. Heads compute their logits and losses in float32.
    """
    if policy not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {PRECISIONS}. Received: precision={policy!r}")
    keras.mixed_precision.set_dtype_policy(policy)
    return policy


def is_chief(strategy=None):
    """Whether this process writes the run's files (worker 0 of a multi-worker job)."""
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (task_type == "worker" and task_id == 0
                                    and "chief" not in resolver.cluster_spec().as_dict())


def num_workers(strategy=None):
    """Processes (hosts) of `strategy`'s job: 1 unless multi-worker."""
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return 1
    spec = resolver.cluster_spec().as_dict()
    return max(1, len(spec.get("worker", [])) + len(spec.get("chief", [])))


def worker_index(strategy=None):
    """This process's 0-based position among the job's workers (0 unless multi-worker;
    a `chief` task is 0 and the workers follow it)."""
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    if resolver.task_type == "chief":
        return 0
    return int(resolver.task_id) + (1 if has_chief else 0)


def barrier(strategy=None):
    """Wait until every worker of the job reaches this call (no-op on one worker)."""
    strategy = strategy or tf.distribute.get_strategy()
    if num_workers(strategy) < 2:
        return
    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(1.0))
    strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None).numpy()


def chief_first(strategy, build):
    """`build()` on the chief, then on the other workers once the chief is done.

    For files every worker must share, written once by the chief on a
    filesystem all see: a tokenizer (SentencePiece training is not
    reproducible across processes), word pairs, word vectors. `build` must
    reuse what it finds on disk, so the other workers load the chief's files.
    """
    if is_chief(strategy):
        result = build()
        barrier(strategy)
        return result
    barrier(strategy)
    return build()


__all__ = ["PRECISIONS", "STRATEGIES", "barrier", "chief_first", "is_chief", "make_strategy",
           "num_workers", "set_precision", "split_cpu", "worker_index"]
