"""Keras callbacks for translation training: dev BLEU, best weights, budgets.

The callbacks that keep state across steps (`BleuCallback`, `BestWeights`,
`EarlyStopping`, `TimeLimit`) have `get_state()` / `set_state(state)` (JSON
values): `tf_outheads.training.fit` stores their state in every backup and
gives it back when a run resumes, so a resumed run continues the dev BLEU
history, compares against the best score reached before the interruption,
keeps its patience and spends only what is left of its time budget.
`stopped_by(callbacks)` names the budget that ended a run.
"""

import csv
import io
import json
import os
import time

import keras
import numpy as np

from tf_outheads.decoding.translator import Translator
from tf_outheads.metrics.bleu import corpus_bleu
from tf_outheads.training.backup import write_atomically


class BleuCallback(keras.callbacks.Callback):
    """Translate a dev set and compute sacrebleu BLEU, every epoch or every N steps.

    The score goes into the epoch logs as `val_bleu` (so `EarlyStopping`,
    `ModelCheckpoint` and `TensorBoard` placed *after* this callback see it),
    is printed with sacrebleu's signature, and the hypotheses of the latest
    evaluation are written to `output_dir/dev.hyp` when `output_dir` is set.

    Args:
        sources: list of str, dev source sentences.
        references: list of str, or list of reference streams (each a list of
            str), detokenized.
        source_tokenizer, target_tokenizer: `SubwordTokenizer`s.
        every_n_steps: int or `None`. If set, also evaluate every N training
            batches (in addition to epoch ends). Defaults to `None`.
        output_dir: str or `None`. Where to write `dev.hyp` and `bleu.jsonl`.
        verbose: int. Print the score line. Defaults to 1.
        **translator_kwargs: passed to `Translator` (batch_size, ...).
    """

    def __init__(self, sources, references, source_tokenizer, target_tokenizer,
                 every_n_steps=None, output_dir=None, verbose=1, **translator_kwargs):
        super().__init__()
        self.sources = list(sources)
        self.references = references
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.every_n_steps = every_n_steps
        self.output_dir = output_dir
        self.verbose = verbose
        self.translator_kwargs = translator_kwargs
        self.history = []  # (step, bleu)
        self._step = 0
        self._translator = None

    def get_state(self):
        return {"step": self._step, "history": [list(entry) for entry in self.history]}

    def set_state(self, state):
        """Continue from a backup's state; `bleu.jsonl` loses the lines of evaluations
        made after that backup (the resumed run makes them again)."""
        self._step = int(state["step"])
        self.history = [(int(step), float(score)) for step, score in state["history"]]
        path = os.path.join(self.output_dir, "bleu.jsonl") if self.output_dir else None
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                lines = [line for line in f if line.strip()]
            kept = [line for line in lines if json.loads(line)["step"] <= self._step]
            if len(kept) != len(lines):
                write_atomically(path, lambda temporary: _write_text(temporary, "".join(kept)))

    def evaluate(self):
        """Translate the dev set now; returns the `Score`."""
        if self._translator is None:
            self._translator = Translator(self.model, self.source_tokenizer,
                                          self.target_tokenizer, **self.translator_kwargs)
        start = time.time()
        hypotheses = self._translator.translate(self.sources)
        score = corpus_bleu(hypotheses, self.references)
        self.history.append((self._step, score.score))
        if self.verbose:
            print(f"\n[dev] step {self._step}: {score.text}  ({time.time() - start:.0f}s)\n"
                  f"[dev] signature: {score.signature}", flush=True)
        if self.output_dir:
            os.makedirs(self.output_dir, exist_ok=True)
            with open(os.path.join(self.output_dir, "dev.hyp"), "w", encoding="utf-8") as f:
                f.write("\n".join(hypotheses) + "\n")
            with open(os.path.join(self.output_dir, "bleu.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": self._step, "bleu": score.score,
                                    "signature": score.signature}) + "\n")
        return score

    def next_action_step(self, step):
        """The next step at which this callback evaluates the model (`every_n_steps`), so
        that the trainer's multi-step executions end there; `None` without one."""
        if not self.every_n_steps:
            return None
        return (step // self.every_n_steps + 1) * self.every_n_steps

    def on_train_batch_end(self, batch, logs=None):
        # The trainer's step counts every step since the run's first start.
        self._step = int((logs or {}).get("step", self._step + 1))
        if self.every_n_steps and self._step % self.every_n_steps == 0:
            self.evaluate()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        if self.every_n_steps and self.history and self.history[-1][0] == self._step:
            logs["val_bleu"] = self.history[-1][1]
            return
        logs["val_bleu"] = self.evaluate().score


class _Budget(keras.callbacks.Callback):
    """A callback that ends the training when its budget is spent; `stopped` says that
    it did (`stopped_by`)."""

    stopped = False

    def _stop(self):
        # The budget that stopped the run is the first to stop it.
        self.stopped = self.stopped or not self.model.stop_training
        self.model.stop_training = True


class TimeLimit(_Budget):
    """Training wall clock, resumes included; with `minutes`, stop cleanly once spent.

    Checked after every batch; the current epoch's end callbacks still run, so
    the last evaluation and checkpoint happen. With `minutes=None` it only keeps
    the clock (`elapsed()`), which a backup stores like the budget, so a run
    resumed three times still reports the seconds all its processes trained.
    """

    def __init__(self, minutes=None):
        super().__init__()
        if minutes is not None and minutes <= 0:
            raise ValueError(f"`minutes` must be > 0 or None. Received: minutes={minutes}")
        self.minutes = minutes
        self._start = None
        self._spent = 0.0  # seconds spent before a resume

    def elapsed(self):
        """Seconds of training so far, resumes included."""
        return self._spent + (time.time() - self._start if self._start is not None else 0.0)

    def get_state(self):
        return {"seconds": self.elapsed()}

    def _spent_budget(self):
        return self.minutes is not None and self.elapsed() > 60.0 * self.minutes

    def set_state(self, state):
        """A resumed run has only what is left of the budget; none left: no step."""
        self._spent = float(state["seconds"])
        if self._spent_budget():
            print(f"[train] the time budget ({self.minutes:g} min) was spent before this "
                  "resume: nothing to train", flush=True)
            self._stop()

    def budget_text(self):
        """The budget spent so far, for the progress bar: "4.2 of 10 min"; `None`
        without a budget (the clock alone shows nothing)."""
        if self.minutes is None:
            return None
        return f"{self.elapsed() / 60:.1f} of {self.minutes:g} min"

    def on_train_begin(self, logs=None):
        self._start = time.time()
        self.stopped = False

    def on_train_end(self, logs=None):
        self._spent, self._start = self.elapsed(), None

    def on_train_batch_end(self, batch, logs=None):
        if self._spent_budget():
            self._stop()


class StepLimit(_Budget):
    """Stop after a total number of optimizer steps (counted over all epochs and resumes).

    A run that starts (or resumes) at or past `max_steps` trains no step.
    """

    def __init__(self, max_steps):
        super().__init__()
        self.max_steps = max_steps

    def budget_text(self):
        """The budget spent so far, for the progress bar: "step 600 of 1500"."""
        return f"step {int(self.model.optimizer.iterations.numpy())} of {self.max_steps}"

    def next_action_step(self, step):
        """The trainer's step at which the budget is reached (its multi-step executions
        end there). The budget counts optimizer updates, which a skipped NaN step is not."""
        left = self.max_steps - int(self.model.optimizer.iterations.numpy())
        return step + left if left > 0 else None

    def on_train_begin(self, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        self.stopped = False
        if step >= self.max_steps:
            print(f"[train] already at step {step}, max_steps is {self.max_steps}: nothing "
                  "to train", flush=True)
            self._stop()

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) >= self.max_steps:
            self._stop()



class BestWeights(keras.callbacks.Callback):
    """Save the weights each time `monitor` improves, atomically; on the chief only.

    Replaces `keras.callbacks.ModelCheckpoint(save_best_only=True,
    save_weights_only=True)`, which overwrites its file in place: a process
    killed while writing leaves a truncated `.weights.h5`. Here the weights
    go to a temporary file renamed over `path` when complete.

    Args:
        path: str, ending in `.weights.h5`.
        monitor: str. A key of the epoch logs. Defaults to `"val_bleu"`.
        mode: `"max"` or `"min"`. Defaults to `"max"`.
        chief: bool. Whether this process writes (`False` on the other
            workers of a multi-worker job). Defaults to `True`.
    """

    def __init__(self, path, monitor="val_bleu", mode="max", chief=True):
        super().__init__()
        if not str(path).endswith(".weights.h5"):
            raise ValueError(f"`path` must end in .weights.h5. Received: path={path!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"`mode` must be 'max' or 'min'. Received: mode={mode!r}")
        self.path, self.monitor, self.mode, self.chief = str(path), monitor, mode, chief
        self.best = None
        self.best_step = None  # the training step of the best weights

    def get_state(self):
        return {"best": self.best, "best_step": self.best_step}

    def set_state(self, state):
        self.best, self.best_step = state["best"], state["best_step"]

    def protected_steps(self):
        """The best weights' step: the trainer keeps its backup, never pruned."""
        return [] if self.best_step is None else [self.best_step]

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None or not np.isfinite(value):
            return
        value = float(value)
        if self.best is not None and (value <= self.best if self.mode == "max"
                                      else value >= self.best):
            return
        self.best = value
        self.best_step = int(logs.get("step", self.model.optimizer.iterations.numpy()))
        if self.chief:
            write_atomically(self.path, self.model.save_weights)


class EarlyStopping(keras.callbacks.EarlyStopping):
    """`keras.callbacks.EarlyStopping` whose patience survives a resume (`get_state`)."""

    stopped = False  # this callback ended the training (`stopped_by`)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.stopped = False

    def on_epoch_end(self, epoch, logs=None):
        running = not self.model.stop_training
        super().on_epoch_end(epoch, logs)
        self.stopped = self.stopped or (running and self.model.stop_training)

    def get_state(self):
        best = None if self.best is None else float(self.best)
        return {"wait": int(self.wait), "best": best, "best_epoch": int(self.best_epoch)}

    def set_state(self, state):
        self.wait, self.best_epoch = int(state["wait"]), int(state["best_epoch"])
        self.best = state["best"]


# `stopped_by`'s names of the budgets, by the callback that keeps each.
_BUDGETS = ((StepLimit, "max_steps"), (TimeLimit, "max_minutes"),
            (EarlyStopping, "early_stopping"))


class EpochHistory(keras.callbacks.Callback):
    """One CSV row per epoch (`epoch` then the epoch logs' keys, sorted, as Keras'
    `CSVLogger` writes them), safe across resumes.

    Rows are keyed by epoch: the row of epoch `e` replaces any row of epoch `e`
    or later already in the file. A run resumed from a backup (after kill -9 or
    SIGTERM) that trains an epoch again, or a new run in an old directory,
    leaves no duplicate or stale row; with `tf_outheads.training.fit` the row
    of a resumed epoch holds the whole epoch's loss. The file is rewritten
    atomically at every epoch's end (a reader never sees half a row).

    Args:
        path: str, the CSV file.
    """

    def __init__(self, path):
        super().__init__()
        self.path = path

    def _rows(self):
        if not os.path.exists(self.path):
            return None, []
        with open(self.path, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        return (rows[0], rows[1:]) if rows else (None, [])

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        header, rows = self._rows()
        if header is None or header[:1] != ["epoch"]:
            header = ["epoch"] + sorted(logs)
        kept = [row for row in rows if row and row[0].isdigit() and int(row[0]) < epoch]

        def value(key):
            found = logs.get(key)
            return "NA" if found is None else found

        kept.append([epoch] + [value(key) for key in header[1:]])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([header] + kept)
        write_atomically(self.path, lambda temporary: _write_text(temporary, text.getvalue()))


def stopped_by(callbacks):
    """Which budget ended a training run with these callbacks: `"max_steps"`
    (`StepLimit`), `"max_minutes"` (`TimeLimit`), `"early_stopping"`
    (`EarlyStopping`), or `"epochs"` when none of them stopped it (every epoch
    ran). The first callback to stop the run counts (a budget already spent
    at a resume too)."""
    for callback in callbacks:
        for cls, name in _BUDGETS:
            if isinstance(callback, cls) and callback.stopped:
                return name
    return "epochs"


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
