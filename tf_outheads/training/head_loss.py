"""Losses that need the decoder outputs and the head, under plain `model.fit`.

A sampled softmax scores a few candidate words: it needs `h` and the head's
`logits_for`, not the full logits a model normally returns. Keras 3 lets a model
decide its loss in `compute_loss`; :class:`HeadLossMixin` uses that so the user
call stays `model.compile(loss=...)`, `model.fit(...)`:

- in training, a model compiled with a loss that declares
  `needs_hidden_states = True` returns its decoder outputs `(B, T, d_h)` from
  `call`, and `compute_loss` hands them, the labels, the head and the
  optimizer step to `loss.call_on_hidden(...)`;
- in evaluation and prediction the model returns full logits and the same loss
  object computes the full masked cross-entropy through `loss(y, logits)`.

A loss that scores the head's output against the head's own tables (the vMF
loss of a continuous head needs its target vectors) declares `needs_head = True`
and gets, in training and evaluation alike,
`loss.call_with_head(y, y_pred, head, sample_weight=...)`.
"""

from keras import ops


class HeadLossMixin:
    """Mix into a `keras.Model` whose `call` ends with `return self.head_outputs(h, training)`.

    The model must have a `head` attribute (a `CategoricalHead`). Put the mixin
    before `keras.Model` in the bases so its `compute_loss` wins.

    In a sampled training step the compiled metrics (if any) are not updated:
    they would need the full logits the step avoids; `val_*` metrics are.
    """

    def hidden_state_loss(self):
        """The compiled loss if it consumes decoder outputs, else `None`."""
        loss = getattr(self, "loss", None)
        return loss if getattr(loss, "needs_hidden_states", False) else None

    def head_outputs(self, hidden, training=False):
        """What `call` returns: the head's logits, or `hidden` in a sampled training step."""
        # Read by `compute_metrics` of the same traced step.
        self._outputs_are_hidden = bool(training) and self.hidden_state_loss() is not None
        if self._outputs_are_hidden:
            return hidden
        return self.head(hidden)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = getattr(self, "loss", None)
        if getattr(loss, "needs_head", False):
            total = loss.call_with_head(y, y_pred, self.head, sample_weight=sample_weight)
        elif training and self.hidden_state_loss() is not None:
            step = self.optimizer.iterations if self.optimizer is not None else 0
            total = loss.call_on_hidden(y, y_pred, self.head, step, sample_weight=sample_weight,
                                        static_size=bool(getattr(self, "jit_compile", False)))
        else:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        for extra in self.losses:  # regularizers, add_loss
            total = total + ops.cast(self._aggregate_additional_loss(extra), total.dtype)
        return total

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if getattr(self, "_outputs_are_hidden", False):
            return self.get_metrics_result()
        return super().compute_metrics(x, y, y_pred, sample_weight=sample_weight)
