"""Deprecated home of the objective: it is `tf_outheads.losses.objective` now.

The loss side of the contract between a seq2seq model, its losses and the
trainer (`Objective`, `StepOutputs`, `SequenceLoss`, `count_target_tokens`,
`global_tokens`, the `"hidden"` / `"logits"` names) moved one floor down, below
both the models and the trainer, so that `tf_outheads.models` holds an
objective without importing the trainer. The names are re-exported here so
that existing imports keep working.

`HeadLossMixin` is kept for models of your own that mix it in
(`class MyModel(HeadLossMixin, keras.Model)`, `call` ending with
`return self.head_outputs(h, training)`); it is deprecated. `Seq2SeqModel` no
longer inherits it: it holds its `Objective` (`model.objective`) and delegates
Keras' hooks to it. A model of your own can do the same, or subclass
`tf_outheads.models.Seq2SeqModel`.
"""

import warnings

from tf_outheads.compat import FirstReplicaBuild, has_compiled_metrics, loss_tracker
from tf_outheads.losses.objective import (HEAD_OUTPUT, HIDDEN_OUTPUT, Objective, SequenceLoss,
                                          StepOutputs, count_target_tokens, global_tokens)
from tf_outheads.models.seq2seq import Seq2SeqModel

__all__ = ["HIDDEN_OUTPUT", "HEAD_OUTPUT", "HeadLossMixin", "Objective", "SequenceLoss",
           "StepOutputs", "count_target_tokens", "global_tokens"]


class HeadLossMixin(FirstReplicaBuild):
    """Deprecated: mix into a seq2seq `keras.Model` whose `call` ends with
    `return self.head_outputs(h, training)`; it trains with an :class:`Objective`.

    What `Seq2SeqModel` does, for a model that is not one: the model has a
    `head` attribute (its output layer) and may list auxiliary heads in
    `auxiliary_heads()` (`{name: layer}`; none by default). Put the mixin
    before `keras.Model` in the bases. `compile(loss=..., loss_weights=...)`
    builds `self.objective`; the methods without a parent call are
    `Seq2SeqModel`'s own.
    """

    objective = None
    _returns_training_outputs = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        warnings.warn(
            f"{cls.__name__}: `tf_outheads.training.HeadLossMixin` is deprecated. Subclass "
            "`tf_outheads.models.Seq2SeqModel`, or hold a `tf_outheads.losses.objective."
            "Objective` and delegate `compute_loss` to it as `Seq2SeqModel` does.",
            DeprecationWarning, stacklevel=2)

    def auxiliary_heads(self):
        """`{name: layer}`: heads trained next to the output layer (none here)."""
        return {}

    training_outputs = Seq2SeqModel.training_outputs
    head_outputs = Seq2SeqModel.head_outputs
    step_outputs = Seq2SeqModel.step_outputs
    compile_from_config = Seq2SeqModel.compile_from_config

    def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, **kwargs):
        objective = None
        if loss is not None:
            objective = Objective(loss, loss_weights,
                                  {HEAD_OUTPUT: self.head, **self.auxiliary_heads()})
        super().compile(optimizer=optimizer, loss=None, **kwargs)
        self.objective = objective
        self.loss = loss
        self.loss_weights = loss_weights

    def get_compile_config(self):
        config = super().get_compile_config()
        if config and self.objective is not None:
            config.update(self.objective.get_config())
        return config

    @property
    def metrics(self):
        metrics = super().metrics
        if self.objective is None:
            return metrics
        return self.objective.metrics(metrics, loss_tracker(self))

    def train_step(self, *args, **kwargs):
        with self.training_outputs():
            return super().train_step(*args, **kwargs)

    def test_step(self, *args, **kwargs):
        with self.training_outputs():
            return super().test_step(*args, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.objective is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        return self.objective.compute_loss(y, self.step_outputs(y_pred, training), sample_weight,
                                           extra_losses=self.losses)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if isinstance(y_pred, dict) and HIDDEN_OUTPUT in y_pred:
            if not has_compiled_metrics(self):
                return self.get_metrics_result()
            y_pred = self.head(y_pred[HIDDEN_OUTPUT])
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)
