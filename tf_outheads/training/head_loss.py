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

A model with a ReWE head (`rewe` attribute, `tf_outheads.ReWEHead`; Jauregi
Unanue et al. 2019) compiled with a loss dict that has a `"rewe"` entry trains
through Keras' multi-output `compile(loss={...}, loss_weights={...})`:

- in training steps and evaluation steps `call` returns
  `{"logits": (B, T, V), "rewe": (B, T, m)}`; anywhere else (`model(x)`,
  `predict`, decoding, export) only the logits;
- `compute_loss` maps the one `y` of the dataset (the gold ids) onto both
  outputs and binds the ReWE head to the losses that read its table
  (`ReWELoss.bind_head`), then lets Keras weight and sum the losses, so
  `logits_loss` / `rewe_loss` (and `val_`) are logged separately.
"""

import contextlib

import tensorflow as tf
from keras import ops

from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.layers.rewe_head import LOGITS_OUTPUT, REWE_OUTPUT


def count_target_tokens(labels, pad_id=PAD_ID):
    """Non-padding target tokens of a batch, float32: the denominator of every
    tf_outheads loss (a per-token mean over `labels != pad_id`)."""
    if isinstance(labels, dict):  # several outputs share the gold ids
        labels = next(iter(labels.values()))
    return tf.reduce_sum(tf.cast(tf.not_equal(tf.cast(labels, tf.int32), pad_id), tf.float32))


def global_token_share(loss, labels):
    """This replica's share of the per-token mean over the *global* batch.

    Keras averages each replica's loss over its own tokens and divides it by
    the replica count, so the summed gradient is a mean of per-replica means:
    replicas holding fewer target tokens weigh as much as fuller ones, and the
    result differs from one device on the same global batch. Rescaling by
    `local_tokens · replicas / global_tokens` (the token count all-reduced)
    makes the sum over replicas `Σ_r Σ_t loss_rt / Σ_r n_r`, the global
    per-token mean. A no-op outside a replica context or with one replica.
    """
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    context = tf.distribute.get_replica_context()
    if replicas == 1 or context is None:
        return loss
    local = count_target_tokens(labels)
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
    share = tf.math.divide_no_nan(local * float(replicas), total)
    return loss * tf.cast(share, loss.dtype)


class HeadLossMixin:
    """Mix into a `keras.Model` whose `call` ends with `return self.head_outputs(h, training)`.

    The model must have a `head` attribute (a `CategoricalHead`). Put the mixin
    before `keras.Model` in the bases so its `compute_loss` wins.

    In a sampled training step the compiled metrics (if any) are not updated:
    they would need the full logits the step avoids; `val_*` metrics are.

    A model may also have a `rewe` attribute (a `tf_outheads.ReWEHead` or
    `None`); see the module doc for how it trains.
    """

    def hidden_state_loss(self):
        """The compiled loss if it consumes decoder outputs, else `None`."""
        loss = getattr(self, "loss", None)
        return loss if getattr(loss, "needs_hidden_states", False) else None

    def compiled_rewe_loss(self):
        """The `"rewe"` entry of the compiled loss dict, else `None`.

        Raises:
            ValueError: the dict also holds a loss that consumes decoder
                outputs (sampled softmax): the two cannot be combined.
        """
        loss = getattr(self, "loss", None)
        if not isinstance(loss, dict) or loss.get(REWE_OUTPUT) is None:
            return None
        sampled = [name for name, entry in loss.items()
                   if getattr(entry, "needs_hidden_states", False)]
        if sampled:
            # In a sampled step the model returns h, not logits, and the
            # sampled loss computes itself in `compute_loss`, outside Keras'
            # per-output losses that weight the ReWE loss.
            raise ValueError(
                "Sampled softmax and ReWE cannot be combined: compile a ReWE model with a "
                "full-softmax loss (e.g. MaskedSequenceCrossEntropy) for the logits. "
                f"Received: loss[{sampled[0]!r}]={loss[sampled[0]]!r} with "
                f"loss[{REWE_OUTPUT!r}]={loss[REWE_OUTPUT]!r}")
        return loss[REWE_OUTPUT]

    def returns_rewe_outputs(self, training=False):
        """Whether `call` returns `{"logits", "rewe"}` (else the logits only).

        True for a model with a ReWE head in training steps and evaluation
        steps when compiled with a `"rewe"` loss, and in any training-mode call
        before it is compiled (a custom training loop); never in `model(x)`
        with `training=False`, `predict`, decoding or export.
        """
        if getattr(self, "rewe", None) is None:
            return False
        if getattr(self, "loss", None) is None:
            return bool(training)
        if not (training or getattr(self, "_in_loss_step", False)):
            return False
        return self.compiled_rewe_loss() is not None

    def head_outputs(self, hidden, training=False):
        """What `call` returns: the head's logits, `hidden` in a sampled training
        step, or `{"logits": ..., "rewe": ...}` (see `returns_rewe_outputs`)."""
        with_rewe = self.returns_rewe_outputs(training)
        # Read by `compute_metrics` of the same traced step.
        self._outputs_are_hidden = bool(training) and self.hidden_state_loss() is not None
        if self._outputs_are_hidden:
            return hidden
        logits = self.head(hidden)
        if not with_rewe:
            return logits
        if getattr(self.rewe, "needs_logits", False):
            rewe = self.rewe(hidden, logits=logits)
        else:
            rewe = self.rewe(hidden)
        return {LOGITS_OUTPUT: logits, REWE_OUTPUT: rewe}

    def _bind_rewe_loss(self):
        loss = self.compiled_rewe_loss()
        if hasattr(loss, "bind_head"):
            loss.bind_head(self.rewe)
        elif (getattr(loss, "needs_head", False)
              and getattr(loss, "target_embeddings", None) is None):
            raise ValueError(
                f"The {REWE_OUTPUT!r} loss must read the ReWE head's table: use "
                f"tf_outheads.ReWELoss. Received: loss[{REWE_OUTPUT!r}]={loss!r}")

    @staticmethod
    def _labels_for_outputs(y, y_pred):
        # One label for every output: the gold ids (the ReWE loss gathers e(y)).
        if isinstance(y_pred, dict) and REWE_OUTPUT in y_pred and not isinstance(y, dict):
            return {name: y for name in y_pred}
        return y

    @contextlib.contextmanager
    def _loss_step(self):
        previous = getattr(self, "_in_loss_step", False)
        self._in_loss_step = True
        try:
            yield
        finally:
            self._in_loss_step = previous

    def test_step(self, *args, **kwargs):
        # Keras' evaluation step calls the model with training=False: inside it a
        # model compiled with the ReWE loss returns both outputs, so `val_logits_loss`
        # and `val_rewe_loss` are logged like the training losses.
        with self._loss_step():
            return super().test_step(*args, **kwargs)

    def _symbolic_build(self, *args, **kwargs):
        # Under a tf.distribute strategy Keras builds the compiled losses from a
        # training=False call before the first step: it must see both outputs.
        with self._loss_step():
            return super()._symbolic_build(*args, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        total = self._replica_loss(x, y, y_pred, sample_weight, training)
        # Under tf.distribute: a per-token mean over the global batch
        # (training; evaluation keeps Keras' per-replica means).
        return global_token_share(total, y) if training else total

    def _replica_loss(self, x, y, y_pred, sample_weight, training):
        if isinstance(y_pred, dict) and REWE_OUTPUT in y_pred:
            self._bind_rewe_loss()
            # Keras weights (loss_weights) and sums the per-output losses and
            # tracks each of them (`logits_loss`, `rewe_loss`).
            return super().compute_loss(x, self._labels_for_outputs(y, y_pred), y_pred,
                                         sample_weight, training=training)
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
        return super().compute_metrics(x, self._labels_for_outputs(y, y_pred), y_pred,
                                       sample_weight=sample_weight)
