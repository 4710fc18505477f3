"""Masked sequence cross-entropy with label smoothing, computed in float32."""

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.compat import set_keras_mask
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.registry import register_loss


def sentence_weights(sample_weight):
    """A per-sentence weight `(B,)` as `(B, 1)`, so it weights every token.

    Keras only broadcasts weights of the losses' rank, `(B, T)` or `(B, 1)`.
    """
    if sample_weight is not None:
        sample_weight = ops.convert_to_tensor(sample_weight)
        if len(sample_weight.shape) == 1:
            sample_weight = ops.expand_dims(sample_weight, -1)
    return sample_weight


def sequence_cross_entropy_per_token(y_true, logits, label_smoothing=0.0):
    """Token-level cross-entropy, `(B, T)`, in float32 (padding not yet masked).

    Formula:
    ```
    loss_t = (1 - ε) · (−log p(y_t)) + ε · mean_v(−log p(v))
    ```
    the label smoothing of Szegedy et al. 2016 with the uniform prior over the
    whole vocabulary, as in OpenNMT-tf and fairseq.
    """
    logits = ops.cast(logits, "float32")
    y_true = ops.cast(y_true, "int32")
    log_probs = ops.log_softmax(logits, axis=-1)
    # One fused weighted sum over the vocabulary: the smoothed target
    # distribution (1 − ε)·onehot(y) + ε/V. Not `take_along_axis`, whose gradient
    # scatters into a dense (B, T, V) tensor (~2× slower loss step on CPU,
    # benchmarks/throughput.py --extra).
    vocabulary_size = ops.shape(logits)[-1]
    target = ops.one_hot(y_true, vocabulary_size, dtype="float32")
    if label_smoothing:
        target = (1.0 - label_smoothing) * target + label_smoothing / ops.cast(
            vocabulary_size, "float32")
    return -ops.sum(log_probs * target, axis=-1)


def masked_sequence_cross_entropy(y_true, logits, label_smoothing=0.0, pad_id=PAD_ID):
    """Mean cross-entropy per non-padding target token.

    Args:
        y_true: int tensor `(B, T)`, gold ids, `pad_id` at padding.
        logits: float tensor `(B, T, V)`.
        label_smoothing: float in `[0, 1)`. Defaults to `0.0`.
        pad_id: int. Defaults to `0`.

    Returns:
        float32 scalar: Σ_t mask_t · loss_t / Σ_t mask_t (0 for an all-padding batch).

    Formula:
    ```
    loss = Σ_{b,t: y≠pad} [(1 − ε)(−log p(y_bt)) + ε · mean_v(−log p(v))] / #(y≠pad)
    ```
    """
    per_token = sequence_cross_entropy_per_token(y_true, logits, label_smoothing)
    mask = ops.not_equal(ops.cast(y_true, "int32"), pad_id)
    # `where`, not `* mask`: non-finite logits at padding (0 · inf) must not leak.
    per_token = ops.where(mask, per_token, 0.0)
    return ops.divide_no_nan(ops.sum(per_token), ops.sum(ops.cast(mask, "float32")))


def float32_only(dtype, owner):
    """`"float32"`, the dtype every loss of this library computes in, or an error.

    Losses take Keras' `dtype` argument; any value but `None` or `"float32"` is
    refused rather than dropped (their sums are float32 whatever the model's
    compute dtype, e.g. under mixed precision).

    Raises:
        ValueError: naming `owner` and the value received.
    """
    if dtype is not None and str(getattr(dtype, "name", dtype)) != "float32":
        raise ValueError(f"{owner} computes in float32; `dtype` must be None or 'float32'. "
                         f"Received: dtype={dtype!r}")
    return "float32"


@register_loss("cross_entropy")
@export
class MaskedSequenceCrossEntropy(keras.losses.Loss):
    """Keras loss: sequence cross-entropy averaged over non-padding tokens.

    Padding positions (`y_true == pad_id`) contribute nothing; with the default
    `"sum_over_batch_size"` reduction the result is the per-token mean over the
    batch (Keras divides by the number of unmasked tokens), computed in float32
    whatever the model's compute dtype.

    Args:
        label_smoothing: float in `[0, 1)`. Defaults to `0.0`.
        pad_id: int. Defaults to `0`.
        reduction: Keras reduction. Defaults to `"sum_over_batch_size"`.
        name: Defaults to `"masked_sequence_cross_entropy"`.

    Example:
    ```python
    import numpy as np
    from tf_outheads import MaskedSequenceCrossEntropy
    loss = MaskedSequenceCrossEntropy(label_smoothing=0.1)
    value = loss(np.array([[5, 7, 0]]), np.zeros((1, 3, 10), "float32"))
    ```

    Formula:
    ```
    loss = Σ_{y≠pad} [(1 − ε)(−log p(y)) + ε · mean_v(−log p(v))] / #(y≠pad)
    ```
    """

    def __init__(
        self,
        label_smoothing=0.0,
        pad_id=PAD_ID,
        reduction="sum_over_batch_size",
        name="masked_sequence_cross_entropy",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction,
                         dtype=float32_only(dtype, type(self).__name__))
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "`label_smoothing` must be in [0, 1). "
                f"Received: label_smoothing={label_smoothing}"
            )
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def __call__(self, y_true, y_pred, sample_weight=None):
        return super().__call__(y_true, y_pred, sample_weight=sentence_weights(sample_weight))

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        per_token = sequence_cross_entropy_per_token(y_true, y_pred, self.label_smoothing)
        mask = ops.not_equal(y_true, self.pad_id)
        per_token = ops.where(mask, per_token, 0.0)
        # Keras divides by the number of unmasked entries under
        # "sum_over_batch_size": a per-token mean, not a per-padded-slot one.
        set_keras_mask(per_token, mask)
        return per_token

    def token_losses(self, y_true, outputs, head):
        """Per-token losses `(B, T)` of `head`'s logits in a model's step (the
        `tf_outheads.losses.SequenceLoss` protocol; padding is masked there)."""
        return sequence_cross_entropy_per_token(y_true, outputs.of(head), self.label_smoothing)

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config
