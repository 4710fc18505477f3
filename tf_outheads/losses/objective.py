"""The contract between a seq2seq model, its losses and the trainer.

One structure, one loss protocol, one reduction (the shape OpenNMT-tf uses):

- **The model** returns its head's output from `call` (`model(x)`, `predict`,
  decoding, export). Inside `model.training_outputs()` — every training and
  evaluation step of `model.fit`, `model.evaluate` and
  `tf_outheads.training.Trainer` — it returns `{"hidden": h}` instead, its
  decoder outputs `(B, T, d_h)`, whatever the losses are.
- **Every loss** of a seq2seq model is a term `(name, loss, weight)` of an
  :class:`Objective`, one per head: `"logits"` for the model's head, and one
  per auxiliary head (`model.auxiliary_heads()`, e.g. `{"rewe": ReWEHead}`).
  A loss computes per-token losses `(B, T)` from :class:`StepOutputs` (the
  decoder outputs, the model's head, the optimizer step) and its term's head:
  `loss.token_losses(y_true, outputs, head)`. A full softmax reads
  `outputs.of(head)`, the logits; a sampled softmax scores a few rows of the
  head from `outputs.hidden`; a regression loss reads the vectors its head
  predicts and the head's `target_vectors()`. Heads' outputs are computed once
  a step, however many terms read them.
- **The objective** masks padding, weights sentences, sums each term and
  counts the target tokens: `(Σ_i w_i · sum_i, tokens)`. The model's loss
  (:meth:`Objective.compute_loss`) divides the two; in training the token
  count is all-reduced over the replicas under `tf.distribute`, so the
  replicas' losses add up to the per-token mean of the *global* batch
  (OpenNMT-tf, fairseq). Each term's per-token mean is logged as
  `<name>_loss` when there are several (over several batches: weighted by
  their target tokens, as `loss` and `val_loss`).

The model holds its objective (`model.objective`, built by `model.compile`)
and its Keras hooks (`compute_loss`, `compute_metrics`, `metrics`, the compile
config) delegate to it; nothing here knows the model's class, and this module
imports neither `tf_outheads.models` nor `tf_outheads.training` (the layers
above it: the models hold an objective, the trainer calls the model's
`compute_loss` and counts tokens with :func:`count_target_tokens`).

A second auxiliary loss needs a head layer (the model lists it in
`auxiliary_heads()`) and a loss with `token_losses`; nothing here changes.
"""

import typing

import keras
import tensorflow as tf
from keras import ops

from tf_outheads.data.special_tokens import PAD_ID

__all__ = ["HIDDEN_OUTPUT", "HEAD_OUTPUT", "MEMORY_MASK_OUTPUT", "MEMORY_OUTPUT", "Objective",
           "SequenceLoss", "StepOutputs", "count_target_tokens", "global_tokens"]

# The key of the decoder outputs in the structure a model returns in a loss step.
HIDDEN_OUTPUT = "hidden"
# The name of the model's head in a loss dict (`compile(loss={"logits": ..., "rewe": ...})`).
HEAD_OUTPUT = "logits"
# The keys of the encoder outputs `(B, S, d)` and source mask `(B, S)` a model returns
# next to `hidden` when an auxiliary head reads the source (`reads_source`: neural
# vocabulary selection).
MEMORY_OUTPUT = "memory"
MEMORY_MASK_OUTPUT = "memory_mask"


def count_target_tokens(labels, pad_id=PAD_ID):
    """Non-padding target tokens of a batch, float32: the denominator of every
    tf_outheads loss (a per-token mean over `labels != pad_id`)."""
    if isinstance(labels, dict):  # several outputs share the gold ids
        labels = next(iter(labels.values()))
    return tf.reduce_sum(tf.cast(tf.not_equal(tf.cast(labels, tf.int32), pad_id), tf.float32))


def global_tokens(tokens):
    """`tokens` summed over the replicas in sync (all-reduced); itself outside a
    replica context or with one replica.

    Dividing each replica's loss sum by it makes the replicas' losses add up to
    the per-token mean of the *global* batch, whose gradient is what one device
    computes on the same batch. (Keras divides each replica's own mean by the
    replica count instead: a mean of per-replica means, in which a replica with
    fewer target tokens weighs as much as a fuller one.)
    """
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    context = tf.distribute.get_replica_context()
    if replicas == 1 or context is None:
        return tokens
    return context.all_reduce(tf.distribute.ReduceOp.SUM, tokens)


class StepOutputs:
    """What every loss of one step reads: decoder outputs, the model's head, the step.

    Args:
        hidden: float tensor `(B, T, d_h)`, the decoder outputs, or `None`
            when only the head's output is known (a custom loop that called
            `model(x)` outside `training_outputs()`).
        head: the model's head.
        step: int scalar (tensor), the optimizer step; seeds sampled losses.
        training: bool. A training step (else an evaluation step).
        static_size: bool. Shapes must be static (XLA).
        head_output: optional `(B, T, V)` output of `head`, already computed.
        source: `None`, or `(memory (B, S, d), mask (B, S))`, the encoder outputs an
            auxiliary head that reads the source (`reads_source`) is run on.
    """

    def __init__(self, hidden, head, step=0, training=True, static_size=False,
                 head_output=None, source=None):
        self.hidden = hidden
        self.source = source
        self.head = head
        self.step = step
        self.training = training
        self.static_size = static_size
        self._outputs = {}
        if head_output is not None:
            self._outputs[id(head)] = head_output

    @classmethod
    def from_prediction(cls, y_pred, head, **options):
        """What a model's `call` returned in a step: `{"hidden": h}` (inside
        `training_outputs()`), or the head's output. `options` as the constructor's."""
        if isinstance(y_pred, dict) and HIDDEN_OUTPUT in y_pred:
            source = None
            if MEMORY_OUTPUT in y_pred:
                source = (y_pred[MEMORY_OUTPUT], y_pred[MEMORY_MASK_OUTPUT])
            return cls(y_pred[HIDDEN_OUTPUT], head, source=source, **options)
        return cls(None, head, head_output=y_pred, **options)

    def of(self, head):
        """`head`'s output on the decoder outputs, computed once per step.

        The model's head gets `h`; an auxiliary head gets `h`, and also the
        model head's logits if it reads them (`needs_logits`, e.g. ReWE's
        contrastive set-up A, which embeds the arg-max word); a head that reads the
        source (`reads_source`) gets the encoder outputs and source mask instead.
        """
        key = id(head)
        if key not in self._outputs and getattr(head, "reads_source", False):
            if self.source is None:
                raise ValueError(
                    f"{head.name!r} reads the encoder outputs, which this step did not "
                    "return: the model must be built with this head (`selection=`) and "
                    "called inside `with model.training_outputs():`")
            self._outputs[key] = head(*self.source)
        if key not in self._outputs:
            if self.hidden is None:
                raise ValueError(
                    f"This loss needs the decoder outputs, not only the head's output: call "
                    f"the model inside `with model.training_outputs():` and pass what it "
                    f"returns to `compute_loss`. Received: the output of {self.head.name!r}")
            if head is not self.head and getattr(head, "needs_logits", False):
                self._outputs[key] = head(self.hidden, logits=self.of(self.head))
            else:
                self._outputs[key] = head(self.hidden)
        return self._outputs[key]


@typing.runtime_checkable
class SequenceLoss(typing.Protocol):
    """A loss a seq2seq model trains with (see the module doc).

    `token_losses(y_true, outputs, head)` returns the unmasked per-token
    losses `(B, T)` float32 of `head` (the model's head or an auxiliary one)
    for the gold ids `y_true` `(B, T)`; positions where `y_true == pad_id`
    are masked by the objective, so they may hold anything finite or not.
    """

    pad_id: int

    def token_losses(self, y_true, outputs, head):
        ...


class _KerasLossTerm:
    """Any other Keras loss on the head's output: `loss(y_true, y_pred)`, a mean
    whose sum is taken as `mean · tokens` (padding is the loss's own affair)."""

    pad_id = PAD_ID

    def __init__(self, loss):
        self.loss = keras.losses.get(loss)

    def mean(self, y_true, outputs, head, sample_weight):
        value = self.loss(y_true, outputs.of(head), sample_weight=sample_weight)
        return ops.cast(value, "float32")


class Objective:
    """The compiled loss of a seq2seq model: one weighted term per head.

    A model holds one (`model.objective`, built by its `compile`) and its
    Keras hooks delegate to it: `compute_loss` to :meth:`compute_loss`,
    `metrics` to :meth:`metrics`, the compile config to :meth:`get_config`.

    Args:
        loss: a loss (the model's head), or a dict `{name: loss}` whose names
            are `"logits"` (the model's head) and names of `heads`. Losses of
            this library implement :class:`SequenceLoss`; any other Keras loss
            is applied to the head's output.
        loss_weights: `None` (every weight 1), a float (one loss), or a dict
            `{name: float}`.
        heads: dict `{name: layer}`: `"logits"` and the model's auxiliary heads.

    Raises:
        ValueError: a name that is not a head (the message lists the heads),
            a weight without a loss, or a negative weight.
    """

    def __init__(self, loss, loss_weights, heads):
        losses = dict(loss) if isinstance(loss, dict) else {HEAD_OUTPUT: loss}
        unknown = sorted(set(losses) - set(heads))
        if unknown:
            raise ValueError(
                f"Loss names must name the model's heads: {sorted(heads)} ('logits' is the "
                f"output layer; the others are auxiliary heads the model was built with). "
                f"Received: loss keys {unknown}")
        if loss_weights is None:
            weights = {}
        elif isinstance(loss_weights, dict):
            weights = dict(loss_weights)
        elif not isinstance(loss, dict):
            weights = {HEAD_OUTPUT: loss_weights}
        else:
            raise ValueError("With a dict of losses, `loss_weights` must be a dict with the "
                             f"same keys. Received: loss_weights={loss_weights!r}")
        extra = sorted(set(weights) - set(losses))
        if extra:
            raise ValueError(f"`loss_weights` names {extra}, which have no loss. "
                             f"Received: loss keys {sorted(losses)}")
        self.loss = loss
        self.loss_weights = loss_weights
        self.terms = []
        for name, term_loss in losses.items():
            if term_loss is None:
                continue
            weight = float(weights.get(name, 1.0))
            if not weight >= 0.0:
                raise ValueError(f"Loss weights must be finite and >= 0. "
                                 f"Received: loss_weights[{name!r}]={weight}")
            if not isinstance(term_loss, SequenceLoss):
                term_loss = _KerasLossTerm(term_loss)
            self.terms.append((name, term_loss, weight, heads[name]))
        if not self.terms:
            raise ValueError(f"No loss to train with. Received: loss={loss!r}")
        self.trackers = {}
        if len(self.terms) > 1:
            # Logged per term as Keras logs the outputs of a multi-output model.
            self.trackers = {name: keras.metrics.Mean(name=f"{name}_loss")
                             for name, *_ in self.terms}

    def __call__(self, y_true, outputs, sample_weight=None):
        """`(weighted sum, tokens)`: `Σ_i w_i Σ_t mask_t · s_t · l_i,t` and `Σ_t mask_t`.

        `s_t` is the sample weight of token `t` (a sentence weight `(B,)`
        weighs its tokens; `(B, T)` weighs each), `mask_t` is `y_t ≠ pad`.
        """
        y_true = ops.cast(y_true, "int32")
        weights = None
        if sample_weight is not None:
            weights = ops.cast(ops.convert_to_tensor(sample_weight), "float32")
            if len(weights.shape) == 1:
                weights = ops.expand_dims(weights, -1)
        total, tokens = 0.0, None
        for name, loss, weight, head in self.terms:
            mask = ops.not_equal(y_true, loss.pad_id)
            count = ops.sum(ops.cast(mask, "float32"))
            if tokens is None:
                tokens = count
            if isinstance(loss, _KerasLossTerm):
                term = loss.mean(y_true, outputs, head, sample_weight) * count
            else:
                per_token = ops.cast(loss.token_losses(y_true, outputs, head), "float32")
                # `where`, not `* mask`: non-finite values at padding must not leak.
                per_token = ops.where(mask, per_token, 0.0)
                if weights is not None:
                    per_token = per_token * weights
                term = ops.sum(per_token)
            if name in self.trackers:
                # Weighted by target tokens, not sentences: the epoch's `<name>_loss` is
                # then the per-token mean over its batches, as `loss` and `val_loss` are
                # (a mean of batch means weighted by sentences gave a ReWE arm's NLL
                # another average than a plain arm's `val_loss`).
                self.trackers[name].update_state(ops.divide_no_nan(term, count),
                                                 sample_weight=count)
            total = total + weight * term
        return total, tokens

    def compute_loss(self, y_true, outputs, sample_weight=None, extra_losses=()):
        """A model's loss of one step, in Keras' convention for a replica's loss: the
        replicas' values add up to the loss of the batch.

        Training (`outputs.training`): this replica's weighted sum over the
        token count of the global batch (:func:`global_tokens`); evaluation:
        its own per-token mean over the replica count, as Keras' losses.
        `extra_losses` (the model's `losses`: regularizers, `add_loss`) are
        added as Keras scales them.
        """
        total, tokens = self(y_true, outputs, sample_weight)
        replicas = float(tf.distribute.get_strategy().num_replicas_in_sync)
        if outputs.training:
            loss = ops.divide_no_nan(total, global_tokens(tokens))
        else:
            loss = ops.divide_no_nan(total, tokens) / replicas
        for extra in extra_losses:
            loss = loss + ops.sum(ops.cast(extra, "float32")) / replicas
        return loss

    def metrics(self, model_metrics, loss_metric=None):
        """`model_metrics` with each term's loss after `loss_metric` (the `Mean`
        Keras logs as `loss`), as Keras orders a multi-output model's."""
        if not self.trackers:
            return model_metrics
        first = 1 if model_metrics and model_metrics[0] is loss_metric else 0
        return model_metrics[:first] + list(self.trackers.values()) + model_metrics[first:]

    def get_config(self):
        """`{"loss", "loss_weights"}` as given, serialized: a compile config's."""
        return {"loss": keras.saving.serialize_keras_object(self.loss),
                "loss_weights": keras.saving.serialize_keras_object(self.loss_weights)}
