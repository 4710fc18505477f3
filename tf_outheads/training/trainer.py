"""The training loop: one call for every `tf.distribute` strategy, resumable at any step.

`fit(model, dataset, ...)` trains a compiled model like `model.fit` — the same
Keras callbacks, a `History` — but runs its own `strategy.run` loop, because
`model.fit` cannot serve every case on TensorFlow 2.21 / Keras 3.15:

- under `MultiWorkerMirroredStrategy` `model.fit` fails ("Attempt to convert a
  value (PerReplica...) to a Tensor", keras-team/keras#20585);
- Keras clips each replica's gradient before summing them, so with
  `clipnorm` two replicas do not train like one device on the same batch;
  here gradients are summed first, then clipped and applied once;
- its backups restore the epoch only and do not save the input pipeline.

What one step does:

1. take `accumulation_steps` *global* batches from the dataset's iterator
   (every worker reads the same stream) and split each into one slice of
   sentences per replica, so the global batch is the same whatever the
   number of replicas (`batch_tokens` is a global budget);
2. on each replica: forward, the compiled loss (a per-token mean over the
   *global* batch: the model's `Objective` all-reduces the token count), gradient of
   the loss scaled by the optimizer (`LossScaleOptimizer` under
   `mixed_float16`);
3. sum the gradients over replicas and micro-batches, each micro-batch
   weighted by its share of the window's tokens (the effective batch is the
   `accumulation_steps` global batches together, averaged per token);
4. if the loss is finite (and at most `max_loss`), clip and apply them
   (optimizer's `clipnorm` / `global_clipnorm`, loss-scale bookkeeping);
   if not, apply nothing and raise `NonFiniteLossError` naming the step,
   or skip the batch (`nonfinite="skip"`, up to a share of the steps);
5. every `backup_every_n_steps` steps and at each epoch's end, write an
   atomic backup (`tf_outheads.training.backup`): weights, optimizer
   slots, RNG states, the data iterator's position, the epoch and step. A
   run started again with the same `backup_dir` resumes from it: the same
   next batch, the same optimizer state, and the same state of every
   callback that keeps one (`get_state` / `set_state`: the dev BLEU history,
   the best score so far, early stopping's patience, the time spent). A
   backup that a callback still needs (`protected_steps`: the best model's)
   is never pruned. A resumed epoch logs the mean loss of the whole epoch
   (its running sums are in the backup), as an uninterrupted one does;
6. with a `backup_dir`, SIGTERM (a scheduler's preemption) does not kill the
   process: the step that runs ends, a backup of it is written, and `fit`
   raises `TrainingPreempted`; the same call resumes from that backup, as
   after kill -9, without losing the steps since the last periodic backup.
   (A callback busy at that moment, e.g. a dev BLEU evaluation, finishes first.)
   Ctrl-C (SIGINT) does the same; a second Ctrl-C interrupts at once
   (`KeyboardInterrupt`), as usual. A SIGINT the process ignores (started in
   the background) stays ignored.

With deterministic ops (`tf.config.experimental.enable_op_determinism()`)
an interrupted and resumed run ends with the same weights as an
uninterrupted one.
"""

import contextlib
import functools
import math
import os
import re
import shutil
import signal
import threading
import time
import uuid
import warnings

import keras
import tensorflow as tf

from tf_outheads.compat import symbolic_build
from tf_outheads.losses.objective import count_target_tokens
from tf_outheads.training.backup import BackupManager, CheckpointError, variables_signature
from tf_outheads.training.strategy import is_chief, num_workers, worker_index
from tf_outheads.validation import positive_int

NONFINITE_POLICIES = ("raise", "skip")
# `nonfinite="skip"` tolerates this many skipped steps whatever the run's length ...
SKIPPED_STEPS_ALWAYS_ALLOWED = 10


class NonFiniteLossError(FloatingPointError):
    """The training loss was NaN, infinite or above `max_loss` (diverged); the step's
    update was not applied."""


class TrainingPreempted(Exception):
    """The process got SIGTERM (a scheduler's preemption, `kill`) or SIGINT (Ctrl-C):
    training stopped at a step boundary after writing a backup, from which the same call
    resumes.

    Attributes:
        step: int, the last step trained (the backup's).
        backup: str or `None`, the backup written.
        signal: `signal.Signals`, the signal received (`SIGTERM` when another worker
            of a multi-worker job got it).
    """

    def __init__(self, step, backup, signum=signal.SIGTERM):
        self.step, self.backup = int(step), backup
        self.signal = signal.Signals(signum)
        super().__init__(
            ("interrupted by Ctrl-C (SIGINT)" if self.signal == signal.SIGINT
             else f"stopped by {self.signal.name}") + f" after step {self.step}; "
            + (f"backup {backup} written: " if backup else "")
            + "the same command resumes from it")


class _SignalFlag:
    """While active, SIGTERM and SIGINT set `received` (the first one's number) instead
    of ending the process (main thread only: Python runs signal handlers there); the
    previous handlers come back after. A second SIGINT goes to the previous handler at
    once (Python's: `KeyboardInterrupt`), as a second Ctrl-C should; an ignored SIGINT
    (a process started in the background) stays ignored."""

    def __init__(self, enabled):
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received = None
        self._previous = {}

    def __enter__(self):
        if self.enabled:
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
            if signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, None):
                self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        del frame
        self.received = self.received or signum
        if signum == signal.SIGINT:  # the next Ctrl-C interrupts at once
            signal.signal(signum, self._previous[signum])

    def __exit__(self, *exc_info):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        return False


def _stateful_callbacks(callbacks):
    """`{key: callback}` of the callbacks with `get_state`/`set_state`; the key is the
    class name, numbered from the second of a class on (`BleuCallback`, `BleuCallback-2`)."""
    found, counts = {}, {}
    for callback in callbacks:
        if callable(getattr(callback, "get_state", None)) and callable(
                getattr(callback, "set_state", None)):
            name = type(callback).__name__
            counts[name] = counts.get(name, 0) + 1
            found[name if counts[name] == 1 else f"{name}-{counts[name]}"] = callback
    return found


def _protected_steps(callbacks):
    """Steps whose backups some callback still needs (`protected_steps()`)."""
    steps = set()
    for callback in callbacks:
        method = getattr(callback, "protected_steps", None)
        if callable(method):
            steps.update(int(s) for s in method() if s is not None)
    return sorted(steps)


def _training_outputs(model):
    """A seq2seq model returns what its losses read (`Seq2SeqModel.training_outputs`);
    any other Keras model its outputs."""
    outputs = getattr(model, "training_outputs", None)
    return outputs() if callable(outputs) else contextlib.nullcontext()


def _unpack(batch):
    """`(features, labels, sample_weight)` (Keras' unpacking), labels required."""
    features, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(batch)
    if labels is None:
        raise ValueError("Training batches must be (features, labels) or (features, labels, "
                         f"sample_weight). Received: a {type(batch).__name__} without labels")
    return features, labels, sample_weight


def batch_fingerprint(batch):
    """An int64 that identifies a batch's contents (its source and target ids).

    Logged for every step (`data_fingerprint`), so the data order of a resumed
    run can be checked against an uninterrupted one.
    """
    total = tf.constant(0, tf.int64)
    for tensor in tf.nest.flatten(batch):
        if tensor.dtype.is_integer:
            flat = tf.reshape(tf.cast(tensor, tf.int64), [-1])
            weights = tf.range(1, tf.size(flat, tf.int64) + 1, dtype=tf.int64) % 65521 + 1
            total = (total * 31 + tf.reduce_sum(flat * weights)) % 2147483647
    return total


def _add_gradients(total, gradient):
    if total is None or gradient is None:
        return gradient if total is None else total
    if isinstance(total, tf.IndexedSlices) and isinstance(gradient, tf.IndexedSlices):
        # Sparse (sampled-softmax) gradients stay sparse: rows concatenated.
        return tf.IndexedSlices(tf.concat([total.values, gradient.values], 0),
                                tf.concat([total.indices, gradient.indices], 0),
                                total.dense_shape)
    return tf.convert_to_tensor(total) + tf.convert_to_tensor(gradient)


def _scale_gradient(gradient, factor):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values * tf.cast(factor, gradient.values.dtype),
                                gradient.indices, gradient.dense_shape)
    return gradient * tf.cast(factor, gradient.dtype)


@contextlib.contextmanager
def _gradients_summed_by_caller(optimizer):
    """Keras' optimizer all-reduces gradients after clipping them; the trainer
    sums them first, so the optimizer must not sum them again.

    Replaces (on this instance, while tracing) `_all_reduce_sum_gradients` —
    the one step of Keras' TensorFlow optimizer that sums over replicas — by
    the identity. Keras is pinned below 3.16, where this method exists.
    """
    optimizers = [optimizer]
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None:
        optimizers.append(inner)
    for each in optimizers:
        if not hasattr(each, "_all_reduce_sum_gradients"):
            raise RuntimeError(f"{type(each).__name__} has no _all_reduce_sum_gradients: this "
                               "Keras version is not supported by tf_outheads.training.fit")
        each._all_reduce_sum_gradients = list
    try:
        yield
    finally:
        for each in optimizers:
            del each._all_reduce_sum_gradients


class _ProgbarLogger(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, without the per-step bookkeeping of the batch logs.

    When callbacks set a budget (`budget_text()`: `StepLimit`, `TimeLimit`),
    each epoch's line shows it ("Epoch 3 · step 600 of 1500 · 4.2 of 10 min")
    instead of Keras' "Epoch 3/100", which a step or time budget ends first.
    """

    BOOKKEEPING = ("step", "step_loss", "tokens", "data_fingerprint")

    def __init__(self, budgets=()):
        super().__init__()
        self.budgets = list(budgets)

    def on_epoch_begin(self, epoch, logs=None):
        if not self.budgets:
            return super().on_epoch_begin(epoch, logs)
        self._reset_progbar()
        self._maybe_init_progbar()
        if self.verbose:
            texts = [b.budget_text() for b in self.budgets]
            print(" · ".join([f"Epoch {epoch + 1}"] + [t for t in texts if t]), flush=True)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(
            batch, {k: v for k, v in (logs or {}).items() if k not in self.BOOKKEEPING})


class Trainer:
    """Runs training steps of a compiled model under its strategy (see module doc).

    Args:
        model: a compiled `keras.Model`, built and compiled inside
            `strategy.scope()` (its `distribute_strategy` is the one used).
        accumulation_steps: int. Global batches per optimizer update.
            Defaults to 1.
        backup_dir: str or `None`. Where backups go and are resumed from.
            Defaults to `None` (no backups).
        backup_every_n_steps: int or `None`. Also back up every N steps
            (besides every epoch's end). Defaults to `None`.
        keep_backups: int. Backups kept (the last N, for resuming and
            `average_checkpoints`). Defaults to 3.
        nonfinite: `"raise"` or `"skip"`. What a NaN/Inf loss (or one above
            `max_loss`) does: raise `NonFiniteLossError` naming the step
            (weights left as they were), or skip the batch with a warning.
            Skipping is for rare bad batches: once more than
            `max(10, max_skipped_share × steps run)` steps were skipped, the
            run raises `NonFiniteLossError` all the same. Defaults to `"raise"`.
        max_skipped_share: float in [0, 1]. See `nonfinite`. Defaults to 0.05.
        max_loss: float or `None`. A step whose loss is above it has diverged
            and is treated as a non-finite one (not applied; raised or skipped
            by `nonfinite`). Every loss of the library is a per-token mean
            (cross-entropy starts near ln V ≈ 10); the default catches an
            explosion that stays finite (1e20) long before weights overflow.
            `None`: no limit. Defaults to 1e6.
        per_worker_data: bool. In a multi-worker job, each worker's dataset
            yields its own share of the global batch (e.g. its shard of the
            files, `tf_outheads.data.make_text_dataset(num_shards=...)`), split
            among its local replicas, instead of the same global batch on every
            worker. Each worker then backs up its own iterator, in
            `backup_dir/iterators/worker-<index>/ckpt-<step>/`, and resumes from
            it. Defaults to `False`.
        jit_compile: bool. Compile each replica's forward and backward pass
            with XLA, and, with one replica, the optimizer update too (under
            several replicas the gradient all-reduce and the update stay out
            of XLA). Each padded batch shape compiles once. Defaults to `False`.
        steps_per_execution: int. Optimizer steps per call of the compiled
            function (one host round trip): fewer host synchronisations, the
            same training. The host then replays the steps' logs to the
            callbacks one by one, and an execution never crosses a step where
            something acts on the model: a backup, an epoch's end, a NaN
            (with `nonfinite="raise"` the steps after it are not run), or a
            callback's `next_action_step(step)` (`BleuCallback`'s evaluations,
            `StepLimit`). Only `TimeLimit` is checked at execution ends, so a
            time budget may run over by up to `steps_per_execution - 1` steps.
            Defaults to 1.
    """

    def __init__(self, model, accumulation_steps=1, backup_dir=None, backup_every_n_steps=None,
                 keep_backups=3, nonfinite="raise", per_worker_data=False, jit_compile=False,
                 steps_per_execution=1, max_skipped_share=0.05, max_loss=1e6):
        if getattr(model, "optimizer", None) is None:
            raise ValueError("Compile the model before training it (e.g. "
                             "tf_outheads.compile_for_translation(model, ...)).")
        if nonfinite not in NONFINITE_POLICIES:
            raise ValueError(f"`nonfinite` must be one of {NONFINITE_POLICIES}. "
                             f"Received: nonfinite={nonfinite!r}")
        self.model = model
        self.strategy = model.distribute_strategy
        self.accumulation_steps = positive_int("accumulation_steps", accumulation_steps)
        self.backup_every_n_steps = (None if backup_every_n_steps is None
                                     else positive_int("backup_every_n_steps",
                                                       backup_every_n_steps))
        self.nonfinite = nonfinite
        if not 0.0 <= float(max_skipped_share) <= 1.0:
            raise ValueError("`max_skipped_share` must be in [0, 1]. Received: "
                             f"max_skipped_share={max_skipped_share!r}")
        self.max_skipped_share = float(max_skipped_share)
        if max_loss is not None and not float(max_loss) > 0:
            raise ValueError(f"`max_loss` must be > 0 or None. Received: max_loss={max_loss!r}")
        self.max_loss = None if max_loss is None else float(max_loss)
        self.jit_compile = bool(jit_compile)
        self.steps_per_execution = positive_int("steps_per_execution", steps_per_execution)
        # Per-worker input only means something with several workers.
        self.per_worker_data = bool(per_worker_data) and num_workers(self.strategy) > 1
        self.backups = (None if backup_dir is None else
                        BackupManager(backup_dir, keep=keep_backups, chief=is_chief(self.strategy)))
        self.skipped_steps = []
        self._train_function = None
        self._evaluate_function = None

    # Replica functions ------------------------------------------------------

    def _distribute(self, batch, per_worker=False):
        """One slice of sentences of the global `batch` per replica (with `per_worker`:
        of this worker's batch per local replica).

        A batch with fewer sentences than replicas (one long sentence alone in
        its length bucket, the last dev batch) is first completed with copies
        of its first sentence whose labels are all padding: they hold no
        target token, so they add nothing to the loss or the gradients, and no
        replica gets an empty slice.
        """
        replicas = self.strategy.num_replicas_in_sync
        if per_worker:
            replicas //= num_workers(self.strategy)
        if replicas == 1:  # one replica takes the batch (per worker: its own worker's)
            return batch
        features, labels, sample_weight = _unpack(batch)
        size = tf.shape(tf.nest.flatten(labels)[0])[0]

        def completed():
            missing = replicas - size

            def complete(tensor, blank=False):
                extra = tf.repeat(tensor[:1], missing, axis=0)
                return tf.concat([tensor, tf.zeros_like(extra) if blank else extra], axis=0)

            blank = functools.partial(complete, blank=True)
            return (tf.nest.map_structure(complete, features),
                    tf.nest.map_structure(blank, labels),
                    None if sample_weight is None else tf.nest.map_structure(blank, sample_weight))

        # The copy is made only for such a batch, not at every step.
        features, labels, sample_weight = tf.cond(
            size < replicas, completed, lambda: (features, labels, sample_weight))
        batch = (features, labels) if sample_weight is None else (features, labels,
                                                                  sample_weight)
        size = tf.maximum(size, replicas)

        def replica_slice(context):
            # Replica ids run worker by worker: a worker's own are consecutive.
            index = context.replica_id_in_sync_group % replicas
            start, end = index * size // replicas, (index + 1) * size // replicas
            return tf.nest.map_structure(lambda tensor: tensor[start:end], batch)

        return self.strategy.experimental_distribute_values_from_function(replica_slice)

    def _forward_backward(self, batch):
        model = self.model
        features, labels, sample_weight = _unpack(batch)
        with tf.GradientTape() as tape, _training_outputs(model):
            predictions = model(features, training=True)
            loss = model.compute_loss(x=features, y=labels, y_pred=predictions,
                                      sample_weight=sample_weight, training=True)
            scaled = model.optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_variables)
        return gradients, tf.cast(loss, tf.float32), count_target_tokens(labels)

    def _apply(self, gradients, window_tokens):
        model = self.model
        present = [index for index, gradient in enumerate(gradients) if gradient is not None]
        if self.strategy.num_replicas_in_sync > 1 and present:
            summed = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, [gradients[index] for index in present])
            gradients = list(gradients)
            for index, gradient in zip(present, summed):
                gradients[index] = gradient
        self._update(gradients, window_tokens)

    def _update(self, gradients, window_tokens):
        """The optimizer update of the summed gradients (clipping included)."""
        if self.accumulation_steps > 1:
            gradients = [_scale_gradient(g, 1.0 / tf.maximum(window_tokens, 1.0))
                         for g in gradients]
        self.model.optimizer.apply(gradients, self.model.trainable_variables)

    def _replica_functions(self):
        """`(forward_backward, apply)` as each replica runs them: XLA-compiled with
        `jit_compile` (the update only with one replica: Keras' optimizer merges
        across replicas, which XLA cannot hold)."""
        if not self.jit_compile:
            return self._forward_backward, self._apply
        forward_backward = tf.function(self._forward_backward, jit_compile=True,
                                       reduce_retracing=True)
        if self.strategy.num_replicas_in_sync > 1:
            return forward_backward, self._apply
        return forward_backward, tf.function(self._update, jit_compile=True,
                                             reduce_retracing=True)

    def _make_train_function(self):
        """`train(iterator, n)`: up to `n` optimizer steps in one call; returns the
        number run, and each step's loss, target tokens, applied flag and batch
        fingerprint. With `nonfinite="raise"` it stops after a non-finite step."""
        strategy = self.strategy
        steps = self.accumulation_steps
        forward_backward, apply_gradients = self._replica_functions()

        def one_step(iterator):
            gradients, loss, window_tokens = None, 0.0, 0.0
            fingerprint = tf.constant(0, tf.int64)
            for _ in range(steps):
                batch = next(iterator)
                fingerprint = (fingerprint * 31 + batch_fingerprint(batch)) % 2147483647
                shards = self._distribute(batch, per_worker=self.per_worker_data)
                step_gradients, step_loss, tokens = strategy.run(forward_backward,
                                                                 args=(shards,))
                global_loss = strategy.reduce(tf.distribute.ReduceOp.SUM, step_loss, axis=None)
                global_tokens = strategy.reduce(tf.distribute.ReduceOp.SUM, tokens, axis=None)
                if steps > 1:
                    # Weight each micro-batch by its tokens (divided by the
                    # window's total in `_update`): a per-token mean over the window.
                    step_gradients = strategy.run(
                        lambda g, n: [_scale_gradient(x, n) for x in g],
                        args=(step_gradients, global_tokens))
                if gradients is None:
                    gradients = step_gradients
                else:
                    gradients = strategy.run(
                        lambda a, b: [_add_gradients(x, y) for x, y in zip(a, b)],
                        args=(gradients, step_gradients))
                loss += global_loss * global_tokens
                window_tokens += global_tokens
            loss = tf.math.divide_no_nan(loss, window_tokens)
            finite = tf.math.is_finite(loss)
            if self.max_loss is not None:  # diverged: as a non-finite loss
                finite = tf.logical_and(finite, loss <= self.max_loss)

            def apply():
                strategy.run(apply_gradients, args=(gradients, window_tokens))
                return tf.constant(True)

            applied = tf.cond(finite, apply, lambda: tf.constant(False))
            return loss, window_tokens, applied, fingerprint

        if self.steps_per_execution == 1:
            def train_function(iterator, n):
                del n  # always one step: no loop in the graph
                return tuple([tf.constant(1)] + [tf.expand_dims(x, 0) for x in one_step(iterator)])

            return tf.function(train_function)

        keep_going_after_nan = self.nonfinite == "skip"

        def train_function(iterator, n):
            arrays = tuple(tf.TensorArray(dtype, size=n) for dtype in
                           (tf.float32, tf.float32, tf.bool, tf.int64))

            def body(i, _, arrays):
                values = one_step(iterator)
                arrays = tuple(array.write(i, value) for array, value in zip(arrays, values))
                return i + 1, tf.logical_or(values[2], keep_going_after_nan), arrays

            count, _, arrays = tf.while_loop(
                lambda i, go, _: tf.logical_and(i < n, go), body,
                (tf.constant(0), tf.constant(True), arrays),
                maximum_iterations=n)
            return (count,) + tuple(array.gather(tf.range(count)) for array in arrays)

        return tf.function(train_function)

    def _make_evaluate_function(self, element_spec):
        strategy = self.strategy
        model = self.model

        def replica_evaluate(batch):
            features, labels, sample_weight = _unpack(batch)
            with _training_outputs(model):
                predictions = model(features, training=False)
                loss = model.compute_loss(x=features, y=labels, y_pred=predictions,
                                          sample_weight=sample_weight, training=False)
            tokens = count_target_tokens(labels)
            # Keras divides each replica's mean by the replica count.
            loss = tf.cast(loss, tf.float32) * float(strategy.num_replicas_in_sync)
            return loss * tokens, tokens

        def evaluate_function(batch):
            total, tokens = strategy.run(replica_evaluate, args=(self._distribute(batch),))
            return (strategy.reduce(tf.distribute.ReduceOp.SUM, total, axis=None),
                    strategy.reduce(tf.distribute.ReduceOp.SUM, tokens, axis=None))

        return tf.function(evaluate_function, input_signature=[element_spec])

    # Host loop --------------------------------------------------------------

    def evaluate(self, dataset):
        """Per-token loss of the compiled loss over a finite `dataset` (global mean)."""
        if self._evaluate_function is None:
            self._evaluate_function = self._make_evaluate_function(dataset.element_spec)
        total, tokens = 0.0, 0.0
        for batch in dataset:
            batch_total, batch_tokens = self._evaluate_function(batch)
            total += float(batch_total)
            tokens += float(batch_tokens)
        return total / tokens if tokens else float("nan")

    def _checkpoint(self, iterator):
        """The backup's checkpoint: variables, and the iterator unless each worker keeps its own."""
        model = self.model
        own = {} if self.per_worker_data else {"iterator": iterator}
        return tf.train.Checkpoint(
            model_variables=[v.value for v in model.variables],
            optimizer_variables=[v.value for v in model.optimizer.variables],
            **own)

    def _iterator_directory(self):
        return os.path.join(self.backups.directory, "iterators",
                            f"worker-{worker_index(self.strategy)}")

    def _save_iterator(self, iterator, step):
        """This worker's iterator at `step`, written atomically before the backup itself
        (so a complete backup always has every worker's iterator); older ones that no
        backup needs any more are removed."""
        directory = self._iterator_directory()
        os.makedirs(directory, exist_ok=True)
        final = os.path.join(directory, f"ckpt-{int(step):09d}")
        temporary = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
        tf.train.Checkpoint(iterator=iterator).write(os.path.join(temporary, "iterator"))
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(temporary, final)
        kept = {kept_step for kept_step, _ in self.backups.checkpoints()}
        for name in os.listdir(directory):
            match = re.match(r"^ckpt-(\d+)$", name)
            if match and int(match.group(1)) < step and int(match.group(1)) not in kept:
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
            elif ".tmp-" in name and name != os.path.basename(temporary):
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)

    def _restore_iterator(self, iterator, step):
        path = os.path.join(self._iterator_directory(), f"ckpt-{int(step):09d}", "iterator")
        if not tf.io.gfile.exists(path + ".index"):
            raise CheckpointError(
                f"{path}: this worker's data position at step {step} is missing (the backup "
                f"of step {step} needs every worker's); delete that backup to resume from "
                "the one before it")
        tf.train.Checkpoint(iterator=iterator).read(path).assert_consumed()

    def _build(self, dataset):
        """Create every variable (model, compiled loss, optimizer) before a restore."""
        model = self.model
        if model.built and model.optimizer.built:
            return
        batch = next(iter(dataset.take(1)))
        features, labels, _ = _unpack(batch)
        with self.strategy.scope():
            symbolic_build(model, (features, labels))
            if not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)

    def fit(self, dataset, epochs=1, steps_per_epoch=None, validation_data=None, callbacks=None,
            verbose="auto"):
        """Train; returns the `keras.callbacks.History`. See `tf_outheads.training.fit`."""
        model = self.model
        epochs = positive_int("epochs", epochs)
        if steps_per_epoch is None:
            cardinality = int(dataset.cardinality())
            if cardinality < 0:
                raise ValueError("`steps_per_epoch` is required for a dataset of unknown or "
                                 "infinite length (e.g. repeat=True). Received: "
                                 "steps_per_epoch=None")
            steps_per_epoch = cardinality // self.accumulation_steps
        steps_per_epoch = positive_int("steps_per_epoch", steps_per_epoch)
        if verbose == "auto":
            verbose = 1
        self._build(dataset)
        signature = variables_signature(model.variables)
        # Epochs of `steps_per_epoch` steps read one endless stream: a finite
        # dataset (of known or unknown length) is repeated, so an epoch longer
        # than the data wraps around instead of running out.
        infinite = int(dataset.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
        iterator = iter(dataset if infinite else dataset.repeat())
        checkpoint = self._checkpoint(iterator)
        start_epoch, start_batch, step = 0, 0, 0
        resumed_epoch_loss = (0.0, 0.0)  # (Σ loss × tokens, tokens) of a resumed epoch
        manifest = None
        if self.backups is not None:
            manifest = self.backups.restore(checkpoint, signature=signature)
            if manifest is not None:
                state = manifest["state"]
                if self.per_worker_data:
                    self._restore_iterator(iterator, state["step"])
                start_epoch, start_batch, step = state["epoch"], state["batch"], state["step"]
                if start_batch >= steps_per_epoch:  # resumed with shorter epochs
                    start_epoch, start_batch = start_epoch + 1, 0
                elif start_batch > 0:
                    resumed_epoch_loss = tuple(state.get("epoch_loss") or (0.0, 0.0))
                self.skipped_steps = list(state.get("skipped_steps", []))
                if verbose:
                    print(f"[backup] resumed from step {step} (epoch {start_epoch + 1}, "
                          f"batch {start_batch}) of {self.backups.directory}", flush=True)

        callbacks = list(callbacks or [])
        if verbose and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
            callbacks.append(_ProgbarLogger(
                [c for c in callbacks if callable(getattr(c, "budget_text", None))]))
        callback_list = keras.callbacks.CallbackList(
            callbacks, add_history=True, add_progbar=False, verbose=verbose,
            epochs=epochs, steps=steps_per_epoch, model=model)
        if self._train_function is None:
            self._train_function = self._make_train_function()
        model.stop_training = False

        stateful = _stateful_callbacks(callbacks)
        saved_states = (manifest["state"].get("callbacks") or {}) if (
            self.backups is not None and manifest is not None) else {}

        backed_up = [None]  # the step of the last backup written by this call

        def backup(epoch, batch):
            if self.backups is None:
                return
            if self.per_worker_data:
                self._save_iterator(iterator, step)
            self.backups.save(checkpoint, step, {
                "epoch": epoch, "batch": batch, "step": step, "signature": signature,
                "skipped_steps": self.skipped_steps, "time": time.time(),
                # The epoch's running loss: a resumed epoch logs the whole epoch's mean.
                "epoch_loss": [loss_sum, token_sum] if batch else None,
                "callbacks": {key: c.get_state() for key, c in stateful.items()}},
                protect=_protected_steps(callbacks))
            backed_up[0] = step

        # SIGTERM (preemption) and Ctrl-C stop at the next step boundary with a backup,
        # where a backup directory is set; without one they end the process as before.
        with _gradients_summed_by_caller(model.optimizer), \
                _SignalFlag(self.backups is not None) as termination:
            callback_list.on_train_begin()
            # After on_train_begin, which resets some callbacks (EarlyStopping).
            for key, callback in stateful.items():
                if key in saved_states:
                    callback.set_state(saved_states[key])
            logs = {}
            # A callback may stop the run before its first step (a step or time
            # budget already spent): then nothing is trained.
            first_epoch = epochs if model.stop_training else start_epoch
            for epoch in range(first_epoch, epochs):
                model.reset_metrics()  # as model.fit: the loss trackers count per epoch
                callback_list.on_epoch_begin(epoch)
                first = start_batch if epoch == start_epoch else 0
                loss_sum, token_sum = resumed_epoch_loss if first else (0.0, 0.0)
                position = (epoch, first)
                batch = first
                while batch < steps_per_epoch:
                    size = self._execution_size(step, steps_per_epoch - batch, callbacks)
                    callback_list.on_train_batch_begin(batch)
                    count, losses, tokens, applied, fingerprints = (
                        value.numpy() for value in self._train_function(
                            iterator, tf.constant(size, tf.int32)))
                    # The steps' logs, one step at a time, as if each had been its own call.
                    for index in range(int(count)):
                        if index:
                            callback_list.on_train_batch_begin(batch)
                        loss, step_tokens = float(losses[index]), float(tokens[index])
                        step += 1
                        if not bool(applied[index]):
                            self._nonfinite(loss, step, epoch, batch)
                        else:
                            loss_sum += loss * step_tokens
                            token_sum += step_tokens
                        logs = {**self._metric_logs(),
                                "loss": loss_sum / token_sum if token_sum else float("nan"),
                                "step_loss": loss, "tokens": step_tokens, "step": step,
                                "data_fingerprint": int(fingerprints[index])}
                        callback_list.on_train_batch_end(batch, logs)
                        batch += 1
                    preempted = self._agree_to_stop(bool(termination.received))
                    position = (epoch, batch) if batch < steps_per_epoch else (epoch + 1, 0)
                    if preempted:
                        if backed_up[0] != step:
                            backup(*position)
                        latest = self.backups.checkpoints() if self.backups else []
                        raise TrainingPreempted(step, latest[-1][1] if latest else None,
                                                termination.received or signal.SIGTERM)
                    done = model.stop_training or batch == steps_per_epoch
                    if (self.backup_every_n_steps and step % self.backup_every_n_steps == 0
                            and not done):
                        backup(*position)
                    if model.stop_training:
                        break
                epoch_logs = {**self._metric_logs(), "loss": logs.get("loss", float("nan")),
                              "step": step}
                if validation_data is not None:
                    model.reset_metrics()
                    val_loss = self.evaluate(validation_data)
                    epoch_logs.update(self._metric_logs("val_"), val_loss=val_loss)
                callback_list.on_epoch_end(epoch, epoch_logs)
                backup(*position)  # where a resumed run goes on
                if model.stop_training:
                    break
            callback_list.on_train_end(logs)
        return model.history

    def _execution_size(self, step, left_in_epoch, callbacks):
        """Steps of the next execution: at most `steps_per_execution` and what is left of
        the epoch, ending at the next backup step and every callback's next action."""
        size = min(self.steps_per_execution, left_in_epoch)
        if self.backup_every_n_steps:
            size = min(size, self.backup_every_n_steps - step % self.backup_every_n_steps)
        for callback in callbacks:
            method = getattr(callback, "next_action_step", None)
            target = method(step) if callable(method) else None
            if target is not None and target > step:
                size = min(size, target - step)
        return max(size, 1)

    def _metric_logs(self, prefix=""):
        """The model's tracked metrics but the loss (ours is the per-token mean):
        e.g. `logits_loss` / `rewe_loss`, which the compiled losses of a
        multi-output model update in `compute_loss`; Keras metrics reduce
        across replicas when read."""
        logs = {}
        for name, value in self.model.get_metrics_result().items():
            if name != "loss":
                logs[prefix + name] = float(value)
        return logs

    def _agree_to_stop(self, terminated=False):
        """In a multi-worker job every worker stops at the same step; returns whether
        any worker got SIGTERM (`terminated`), which stops them all too.

        A callback's decision may differ between workers (a wall-clock limit),
        and a scheduler may signal one worker first; a worker that stopped alone
        would leave the others waiting in the next step's collectives. One
        all-reduce (sum) of the two flags per step.
        """
        if num_workers(self.strategy) >= 2:
            flags = tf.constant([float(bool(self.model.stop_training)), float(terminated)])
            values = self.strategy.experimental_distribute_values_from_function(
                lambda context: flags)
            summed = self.strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None).numpy()
            self.model.stop_training, terminated = bool(summed[0] > 0), bool(summed[1] > 0)
        if terminated:
            self.model.stop_training = True
        return terminated

    def _nonfinite(self, loss, step, epoch, batch):
        where = f"step {step} (epoch {epoch + 1}, batch {batch + 1})"
        what = (f"{loss}" if not math.isfinite(loss) else
                f"{loss:.4g}, above max_loss={self.max_loss:g} (diverged)")
        backups = self.backups.checkpoints() if self.backups else []
        latest = (f"The last backup is {backups[-1][1]}. " if backups else "")
        if self.nonfinite == "raise":
            raise NonFiniteLossError(
                f"Training loss is {what} at {where}; this batch's update was not applied. "
                + latest + "Lower the learning rate, check the data, or pass nonfinite='skip' "
                "to skip such batches.")
        self.skipped_steps.append(step)
        allowed = max(SKIPPED_STEPS_ALWAYS_ALLOWED, self.max_skipped_share * step)
        if len(self.skipped_steps) > allowed:
            raise NonFiniteLossError(
                f"Training loss is {what} at {where}: {len(self.skipped_steps)} of {step} steps "
                f"were skipped (nonfinite='skip' allows {SKIPPED_STEPS_ALWAYS_ALLOWED}, or "
                f"{self.max_skipped_share:.0%} of the steps run if more): the run is not "
                "learning. " + latest + "Lower the learning rate or check the data.")
        warnings.warn(f"Training loss is {what} at {where}: batch skipped (nonfinite='skip'; "
                      f"{len(self.skipped_steps)} skipped so far)", RuntimeWarning, stacklevel=3)


def fit(model, dataset, epochs=1, steps_per_epoch=None, validation_data=None, callbacks=None,
        accumulation_steps=1, backup_dir=None, backup_every_n_steps=None, keep_backups=3,
        nonfinite="raise", verbose="auto", per_worker_data=False, jit_compile=False,
        steps_per_execution=1, max_skipped_share=0.05, max_loss=1e6):
    """Train `model` on `dataset` with its strategy: the same call for every strategy.

    Build and compile the model inside `strategy.scope()` (see
    `tf_outheads.training.make_strategy`); outside any scope it trains on
    one device. `dataset` yields *global* batches `(features, labels)`, which
    are split across the replicas sentence-wise; with `per_worker_data=True`
    (several workers) each worker's dataset yields its own share of the global
    batch, split across its local replicas.

    Args:
        model: compiled `keras.Model`.
        dataset: `tf.data.Dataset` of `(features, labels[, sample_weight])`.
        epochs, steps_per_epoch: as `model.fit` (`steps_per_epoch` counts
            optimizer updates; required for an endless dataset).
        validation_data: finite `tf.data.Dataset` or `None`; its per-token
            loss is logged as `val_loss` at every epoch's end.
        callbacks: list of `keras.callbacks.Callback` (BLEU, early stopping,
            TensorBoard, CSV logger, limits ...). Batch logs hold `loss` (the
            epoch's running per-token mean), the per-output losses of a
            multi-output model (`logits_loss`, `rewe_loss`: Keras' running
            means), `step_loss`, `tokens` (target
            tokens of the step), `step` (steps since the first start,
            resumes included) and `data_fingerprint` (`batch_fingerprint` of
            the step's batches).
        accumulation_steps: int. Global batches per update (effective batch
            = `accumulation_steps` × the dataset's batch). Defaults to 1.
        backup_dir, backup_every_n_steps, keep_backups, nonfinite, per_worker_data,
            jit_compile, steps_per_execution, max_skipped_share, max_loss: see `Trainer`.
        verbose: 0, 1 (progress bar), 2 or `"auto"`. Defaults to `"auto"`.

    Returns:
        The `keras.callbacks.History` of this call.

    Raises:
        NonFiniteLossError: see `nonfinite`.
        TrainingPreempted: SIGTERM or SIGINT (Ctrl-C) arrived (with a `backup_dir`); the
            backup is written.

    Example:
    ```python
    from tf_outheads import compile_for_translation, training
    from tf_outheads_zoo import LSTMSeq2Seq
    strategy = training.make_strategy("mirrored")          # all local GPUs
    with strategy.scope():
        model = LSTMSeq2Seq(8000, 8000, head="tied")
        compile_for_translation(model, learning_rate=1e-3)
    training.fit(model, batches, epochs=10, steps_per_epoch=1000,
                 backup_dir="runs/mine/backup", backup_every_n_steps=200)
    ```
    """
    trainer = Trainer(model, accumulation_steps=accumulation_steps, backup_dir=backup_dir,
                      backup_every_n_steps=backup_every_n_steps, keep_backups=keep_backups,
                      nonfinite=nonfinite, per_worker_data=per_worker_data,
                      jit_compile=jit_compile, steps_per_execution=steps_per_execution,
                      max_skipped_share=max_skipped_share, max_loss=max_loss)
    return trainer.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
                       validation_data=validation_data, callbacks=callbacks, verbose=verbose)


__all__ = ["NonFiniteLossError", "Trainer", "TrainingPreempted", "batch_fingerprint", "fit"]
