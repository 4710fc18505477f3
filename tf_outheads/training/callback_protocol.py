"""What the training loop asks of its callbacks, besides Keras' hooks.

A callback may have any of these methods; `tf_outheads.training.fit` calls those it
finds (`BleuCallback`, `StepLimit`, `TimeLimit` have them):

- `get_state()` / `set_state(state)`: a state written with each backup and given
  back on resuming (:func:`stateful_callbacks`: the dev BLEU history, the best
  score, early stopping's patience, the time spent);
- `protected_steps()`: steps whose backups must not be pruned (the best model's;
  :func:`protected_steps`);
- `budget_text()`: the budget it enforces, shown at each epoch's start by the
  progress bar (:class:`ProgbarLogger`);
- `next_action_step(step)`: the next step at which it acts on the model; an
  execution of several steps ends there (`Trainer`'s `steps_per_execution`).
"""

import keras

__all__ = ["ProgbarLogger", "protected_steps", "stateful_callbacks"]


def stateful_callbacks(callbacks):
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


def protected_steps(callbacks):
    """Steps whose backups some callback still needs (`protected_steps()`)."""
    steps = set()
    for callback in callbacks:
        method = getattr(callback, "protected_steps", None)
        if callable(method):
            steps.update(int(s) for s in method() if s is not None)
    return sorted(steps)


class ProgbarLogger(keras.callbacks.ProgbarLogger):
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
