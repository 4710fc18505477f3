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

Steps 1–4 run in TensorFlow graphs (:mod:`tf_outheads.training.step`); this
module is the host loop around them: epochs, callbacks, backups, signals.
"""

import math
import os
import re
import shutil
import signal
import time
import uuid
import warnings

import keras
import tensorflow as tf

from tf_outheads.compat import symbolic_build
from tf_outheads.training.backup import BackupManager, CheckpointError, variables_signature
from tf_outheads.training.callback_protocol import ProgbarLogger
from tf_outheads.training.callback_protocol import protected_steps
from tf_outheads.training.callback_protocol import stateful_callbacks
from tf_outheads.training.step import StepFunctions
from tf_outheads.training.step import gradients_summed_by_caller
from tf_outheads.training.step import unpack_batch
from tf_outheads.training.stopping import SignalFlag
from tf_outheads.training.stopping import TrainingPreempted
from tf_outheads.training.stopping import agree_to_stop
from tf_outheads.training.strategy import is_chief, num_workers, worker_index
from tf_outheads.validation import positive_int

NONFINITE_POLICIES = ("raise", "skip")
# `nonfinite="skip"` tolerates this many skipped steps whatever the run's length ...
SKIPPED_STEPS_ALWAYS_ALLOWED = 10


class NonFiniteLossError(FloatingPointError):
    """The training loss was NaN, infinite or above `max_loss` (diverged); the step's
    update was not applied."""


class _FitCall:
    """What one `Trainer.fit` call carries from step to step, and writes to its backups.

    Attributes:
        iterator: the dataset's iterator (endless), and `checkpoint`, which saves it
            with the variables; `signature`, the variables' (`variables_signature`).
        callbacks: the callbacks (with the progress bar), `callback_list` their
            `keras.callbacks.CallbackList`, `stateful` those that keep a state.
        step: int. Steps since the first start, resumes included.
        loss_sum, token_sum: float. Σ loss × tokens and Σ tokens of the epoch's
            applied steps so far (its running per-token mean).
        logs: dict. The last step's batch logs.
        backed_up: int or `None`. The step of the last backup this call wrote.
    """

    def __init__(self, iterator, checkpoint, signature, callbacks, callback_list, step):
        self.iterator, self.checkpoint, self.signature = iterator, checkpoint, signature
        self.callbacks, self.callback_list = callbacks, callback_list
        self.stateful = stateful_callbacks(callbacks)
        self.step = step
        self.loss_sum, self.token_sum = 0.0, 0.0
        self.logs = {}
        self.backed_up = None

    @property
    def epoch_loss(self):
        """The epoch's per-token mean loss so far (NaN before an applied step)."""
        return self.loss_sum / self.token_sum if self.token_sum else float("nan")


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

    def _step_functions(self):
        """The graphs of this trainer's steps (`tf_outheads.training.step`)."""
        return StepFunctions(self.model, self.strategy,
                             accumulation_steps=self.accumulation_steps,
                             per_worker_data=self.per_worker_data,
                             jit_compile=self.jit_compile, max_loss=self.max_loss)

    # Host loop --------------------------------------------------------------

    def evaluate(self, dataset):
        """Per-token loss of the compiled loss over a finite `dataset` (global mean)."""
        if self._evaluate_function is None:
            self._evaluate_function = self._step_functions().evaluate_function(
                dataset.element_spec)
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
        features, labels, _ = unpack_batch(batch)
        with self.strategy.scope():
            symbolic_build(model, (features, labels))
            if not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)

    def fit(self, dataset, epochs=1, steps_per_epoch=None, validation_data=None, callbacks=None,
            verbose="auto"):
        """Train; returns the `keras.callbacks.History`. See `tf_outheads.training.fit`."""
        model = self.model
        epochs = positive_int("epochs", epochs)
        steps_per_epoch = self._steps_per_epoch(dataset, steps_per_epoch)
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
        start_epoch, start_batch, step, resumed_epoch_loss, saved_states = self._resume(
            checkpoint, iterator, signature, steps_per_epoch, verbose)
        callbacks, callback_list = self._callback_list(callbacks, verbose, epochs,
                                                       steps_per_epoch)
        if self._train_function is None:
            self._train_function = self._step_functions().train_function(
                self.steps_per_execution, keep_going_after_nan=self.nonfinite == "skip")
        model.stop_training = False
        call = _FitCall(iterator, checkpoint, signature, callbacks, callback_list, step)

        # SIGTERM (preemption) and Ctrl-C stop at the next step boundary with a backup,
        # where a backup directory is set; without one they end the process as before.
        with gradients_summed_by_caller(model.optimizer), \
                SignalFlag(self.backups is not None) as termination:
            callback_list.on_train_begin()
            # After on_train_begin, which resets some callbacks (EarlyStopping).
            for key, callback in call.stateful.items():
                if key in saved_states:
                    callback.set_state(saved_states[key])
            # A callback may stop the run before its first step (a step or time
            # budget already spent): then nothing is trained.
            first_epoch = epochs if model.stop_training else start_epoch
            for epoch in range(first_epoch, epochs):
                model.reset_metrics()  # as model.fit: the loss trackers count per epoch
                callback_list.on_epoch_begin(epoch)
                first = start_batch if epoch == start_epoch else 0
                call.loss_sum, call.token_sum = resumed_epoch_loss if first else (0.0, 0.0)
                step_before = call.step
                position = self._train_epoch(call, epoch, first, steps_per_epoch, termination)
                # The loss is the epoch's token-weighted mean, its steps before a resume
                # included; the metrics count this process's steps only (none, NA in
                # the history, when a resume found the epoch's steps all done).
                epoch_logs = {**(self._metric_logs() if call.step > step_before else {}),
                              "loss": call.epoch_loss, "step": call.step}
                if validation_data is not None:
                    model.reset_metrics()
                    val_loss = self.evaluate(validation_data)
                    epoch_logs.update(self._metric_logs("val_"), val_loss=val_loss)
                callback_list.on_epoch_end(epoch, epoch_logs)
                self._backup(call, *position)  # where a resumed run goes on
                if model.stop_training:
                    break
            callback_list.on_train_end(call.logs)
        return model.history

    def _steps_per_epoch(self, dataset, steps_per_epoch):
        """`steps_per_epoch`, checked; by default the optimizer steps of one pass over a
        dataset of known length."""
        if steps_per_epoch is None:
            cardinality = int(dataset.cardinality())
            if cardinality < 0:
                raise ValueError("`steps_per_epoch` is required for a dataset of unknown or "
                                 "infinite length (e.g. repeat=True). Received: "
                                 "steps_per_epoch=None")
            steps_per_epoch = cardinality // self.accumulation_steps
        return positive_int("steps_per_epoch", steps_per_epoch)

    def _resume(self, checkpoint, iterator, signature, steps_per_epoch, verbose):
        """Restores the latest backup, if any, into `checkpoint` (and this worker's
        `iterator`). Returns where training goes on: `(epoch, batch, step,
        epoch_loss, callback_states)`, `epoch_loss` the resumed epoch's `(Σ loss ×
        tokens, tokens)` so far; all zeros and `{}` without a backup."""
        start_epoch, start_batch, step = 0, 0, 0
        resumed_epoch_loss = (0.0, 0.0)  # (Σ loss × tokens, tokens) of a resumed epoch
        if self.backups is None:
            return start_epoch, start_batch, step, resumed_epoch_loss, {}
        manifest = self.backups.restore(checkpoint, signature=signature)
        if manifest is None:
            return start_epoch, start_batch, step, resumed_epoch_loss, {}
        state = manifest["state"]
        if self.per_worker_data:
            self._restore_iterator(iterator, state["step"])
        start_epoch, start_batch, step = state["epoch"], state["batch"], state["step"]
        # A backup at batch >= steps_per_epoch (a signal after an epoch's last step, or
        # a run resumed with shorter epochs) trains no more steps of its epoch but ends
        # it: validation and the epoch's row in the history, which a run stopped before
        # its epoch end never wrote.
        if start_batch > 0:
            resumed_epoch_loss = tuple(state.get("epoch_loss") or (0.0, 0.0))
        self.skipped_steps = list(state.get("skipped_steps", []))
        if verbose:
            print(f"[backup] resumed from step {step} (epoch {start_epoch + 1}, "
                  f"batch {start_batch}) of {self.backups.directory}", flush=True)
        return start_epoch, start_batch, step, resumed_epoch_loss, state.get("callbacks") or {}

    def _callback_list(self, callbacks, verbose, epochs, steps_per_epoch):
        """`(callbacks, callback_list)`: the callbacks, with our progress bar when
        `verbose` and none of them is one, and Keras' `CallbackList` of them."""
        callbacks = list(callbacks or [])
        if verbose and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
            callbacks.append(ProgbarLogger(
                [c for c in callbacks if callable(getattr(c, "budget_text", None))]))
        callback_list = keras.callbacks.CallbackList(
            callbacks, add_history=True, add_progbar=False, verbose=verbose,
            epochs=epochs, steps=steps_per_epoch, model=self.model)
        return callbacks, callback_list

    def _train_epoch(self, call, epoch, first, steps_per_epoch, termination):
        """Trains epoch `epoch` from its batch `first`, one execution of the train
        function at a time, the steps' logs replayed to the callbacks one by one;
        backs up every `backup_every_n_steps` steps and stops (with a backup) when a
        signal arrived. Returns `(epoch, batch)` where a resumed run goes on."""
        model, callback_list = self.model, call.callback_list
        position = (epoch, first) if first < steps_per_epoch else (epoch + 1, 0)
        batch = first
        while batch < steps_per_epoch:
            size = self._execution_size(call.step, steps_per_epoch - batch, call.callbacks)
            callback_list.on_train_batch_begin(batch)
            count, losses, tokens, applied, fingerprints = (
                value.numpy() for value in self._train_function(
                    call.iterator, tf.constant(size, tf.int32)))
            # The steps' logs, one step at a time, as if each had been its own call.
            for index in range(int(count)):
                if index:
                    callback_list.on_train_batch_begin(batch)
                loss, step_tokens = float(losses[index]), float(tokens[index])
                call.step += 1
                if not bool(applied[index]):
                    self._nonfinite(loss, call.step, epoch, batch)
                else:
                    call.loss_sum += loss * step_tokens
                    call.token_sum += step_tokens
                call.logs = {**self._metric_logs(), "loss": call.epoch_loss,
                             "step_loss": loss, "tokens": step_tokens, "step": call.step,
                             "data_fingerprint": int(fingerprints[index])}
                callback_list.on_train_batch_end(batch, call.logs)
                batch += 1
            preempted = agree_to_stop(self.model, self.strategy, bool(termination.received))
            position = (epoch, batch) if batch < steps_per_epoch else (epoch + 1, 0)
            if preempted:
                if call.backed_up != call.step:
                    # At (epoch, batch) even after the epoch's last step: the resumed
                    # run ends this epoch (validation, history row) before the next.
                    self._backup(call, epoch, batch)
                latest = self.backups.checkpoints() if self.backups else []
                raise TrainingPreempted(call.step, latest[-1][1] if latest else None,
                                        termination.received or signal.SIGTERM)
            done = model.stop_training or batch == steps_per_epoch
            if (self.backup_every_n_steps and call.step % self.backup_every_n_steps == 0
                    and not done):
                self._backup(call, *position)
            if model.stop_training:
                break
        return position

    def _backup(self, call, epoch, batch):
        """Writes a backup of step `call.step`, from which a run goes on at batch `batch`
        of epoch `epoch` (nothing without a backup directory)."""
        if self.backups is None:
            return
        if self.per_worker_data:
            self._save_iterator(call.iterator, call.step)
        self.backups.save(call.checkpoint, call.step, {
            "epoch": epoch, "batch": batch, "step": call.step, "signature": call.signature,
            "skipped_steps": self.skipped_steps, "time": time.time(),
            # The epoch's running loss: a resumed epoch logs the whole epoch's mean.
            "epoch_loss": [call.loss_sum, call.token_sum] if batch else None,
            "callbacks": {key: c.get_state() for key, c in call.stateful.items()}},
            protect=protected_steps(call.callbacks))
        call.backed_up = call.step

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
        # stacklevel: the caller of `Trainer.fit` (through `_train_epoch`).
        warnings.warn(f"Training loss is {what} at {where}: batch skipped (nonfinite='skip'; "
                      f"{len(self.skipped_steps)} skipped so far)", RuntimeWarning, stacklevel=4)


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
    strategy = training.make_strategy("mirrored")          # all local GPUs
    with strategy.scope():
        model = MySeq2Seq(8000, 8000, head="tied")           # a Seq2SeqModel
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


__all__ = ["NonFiniteLossError", "Trainer", "fit"]
