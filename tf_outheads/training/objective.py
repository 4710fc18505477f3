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

from tf_outheads.losses.objective import (HEAD_OUTPUT, HIDDEN_OUTPUT, Objective, SequenceLoss,
                                          StepOutputs, count_target_tokens, global_tokens)
from tf_outheads.models.seq2seq import ObjectiveHooks

__all__ = ["HIDDEN_OUTPUT", "HEAD_OUTPUT", "HeadLossMixin", "Objective", "SequenceLoss",
           "StepOutputs", "count_target_tokens", "global_tokens"]


class HeadLossMixin(ObjectiveHooks):
    """Deprecated: mix into a seq2seq `keras.Model` whose `call` ends with
    `return self.head_outputs(h, training)`; it trains with an :class:`Objective`.

    What `Seq2SeqModel` does, for a model that is not one: the model has a
    `head` attribute (its output layer) and may list auxiliary heads in
    `auxiliary_heads()` (`{name: layer}`; none by default). Put the mixin
    before `keras.Model` in the bases. `compile(loss=..., loss_weights=...)`
    builds `self.objective`; every hook is `Seq2SeqModel`'s own
    (`tf_outheads.models.seq2seq.ObjectiveHooks`).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        warnings.warn(
            f"{cls.__name__}: `tf_outheads.training.HeadLossMixin` is deprecated. Subclass "
            "`tf_outheads.models.Seq2SeqModel`, or mix in `tf_outheads.models.seq2seq."
            "ObjectiveHooks` (the same hooks, delegated to an `Objective`).",
            DeprecationWarning, stacklevel=2)
