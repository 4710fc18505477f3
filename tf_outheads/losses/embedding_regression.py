"""Losses that regress the gold word's vector: cosine and squared error.

A continuous-output model (Kumar & Tsvetkov 2019) or the auxiliary head of ReWE
(Jauregi Unanue et al. 2019, Eq. 6) predicts a vector ê `(…, m)` per target
position; the loss compares it with the gold word's vector e(y) `(…, m)` from a
`(V, m)` table. This module also holds what every such loss shares, once:

- the gather of e(y) from the table (:func:`gather_target_vectors`);
- padding masking and the "token" / "sentence" reductions of the functional
  API (:func:`masked_per_token`, :func:`reduce_per_token`);
- :class:`EmbeddingTargetLoss`, the Keras base class; in a model it reads the
  vectors its head predicts and the head's table (`token_losses`). The vMF
  loss (`tf_outheads.losses.vmf.VMFLoss`) subclasses it too.
"""

import keras
import numpy as np
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.compat import set_keras_mask
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.losses.cross_entropy import float32_only
from tf_outheads.losses.cross_entropy import sentence_weights
from tf_outheads.registry import register_loss

FUNCTION_REDUCTIONS = ("token", "sentence")


def safe_norm(vectors, axis=-1):
    """‖x‖ over `axis`, with a zero (not NaN) gradient at x = 0.

    `sqrt` has an infinite derivative at 0, and `0 · ∞` is NaN; the square
    root here only ever sees positive arguments, and exact zeros take the
    constant branch of a `where`, so the gradient there is exactly 0.
    """
    squared_norm = ops.sum(ops.square(vectors), axis=axis)
    positive = squared_norm > 0.0
    return ops.where(positive, ops.sqrt(ops.where(positive, squared_norm, 1.0)), 0.0)


def _check_function_reduction(reduction):
    if reduction not in FUNCTION_REDUCTIONS:
        raise ValueError(
            f"`reduction` must be one of {FUNCTION_REDUCTIONS}. Received: reduction={reduction!r}")


def gather_target_vectors(target_embeddings, y_true, normalize=True):
    """The gold words' vectors e(y) `(…, m)` float32, rows of a `(V, m)` table.

    Args:
        target_embeddings: float array/tensor `(V, m)`.
        y_true: int tensor `(…)`, ids in `[0, V)`.
        normalize: bool. L2-normalise the gathered rows (zero rows stay zero).
            Defaults to `True`.

    Normalising the `B·T` gathered rows is cheaper than the `V` rows of the
    table whenever a batch has fewer tokens than the vocabulary has words.
    """
    table = ops.convert_to_tensor(target_embeddings)
    table = ops.cast(table, "float32")
    if len(table.shape) != 2:
        raise ValueError("`target_embeddings` must be a (V, m) table. "
                         f"Received: target_embeddings of shape {tuple(table.shape)}")
    vectors = ops.take(table, ops.cast(y_true, "int32"), axis=0)  # (…, m)
    if normalize:
        norm = safe_norm(vectors)[..., None]
        vectors = ops.where(norm > 0.0, vectors / ops.where(norm > 0.0, norm, 1.0), 0.0)
    return vectors


def masked_per_token(per_token_fn, y_true, y_pred, target_embeddings, pad_id=PAD_ID,
                     normalize_targets=True):
    """Per-token losses `(…)` float32 with padding masked, and the mask `(…)` bool.

    `per_token_fn(target_vectors, y_pred)` computes the unmasked losses. At
    padding (`y_true == pad_id`) the ids are replaced by 0 before the gather
    (any pad id, even −1, is safe), the predictions by zeros before the loss
    and the losses by 0 after it: padding contributes nothing to the value,
    its gradient is exactly zero, and non-finite predictions there cannot leak.
    """
    y_true = ops.cast(y_true, "int32")
    y_pred = ops.convert_to_tensor(y_pred)
    table = ops.convert_to_tensor(target_embeddings)
    prediction_dim, table_dim = y_pred.shape[-1], table.shape[-1]
    if prediction_dim is not None and table_dim is not None and prediction_dim != table_dim:
        raise ValueError(
            "The predicted vectors and the target table must have the same size m. "
            f"Received: y_pred of shape {tuple(y_pred.shape)}, "
            f"target_embeddings of shape {tuple(table.shape)}")
    mask = ops.not_equal(y_true, pad_id)
    target_vectors = gather_target_vectors(
        table, ops.where(mask, y_true, 0), normalize=normalize_targets)
    y_pred = ops.where(mask[..., None], y_pred, ops.zeros((), y_pred.dtype))
    per_token = per_token_fn(target_vectors, y_pred)
    return ops.where(mask, per_token, 0.0), mask


def reduce_per_token(per_token, mask, reduction="token"):
    """Scalar from masked per-token losses `(B, T…)`.

    `"token"`: Σ loss / #tokens, the mean over non-padding tokens. `"sentence"`:
    the sum over each sentence's tokens (all axes but the first), averaged over
    the sentences that have at least one token. An all-padding batch gives 0.
    """
    _check_function_reduction(reduction)
    float_mask = ops.cast(mask, "float32")
    if reduction == "token":
        return ops.divide_no_nan(ops.sum(per_token), ops.sum(float_mask))
    if len(per_token.shape) < 2:
        raise ValueError("reduction='sentence' needs losses of shape (batch, time, ...). "
                         f"Received: shape {tuple(per_token.shape)}")
    token_axes = tuple(range(1, len(per_token.shape)))
    num_sentences = ops.sum(ops.cast(ops.max(float_mask, axis=token_axes) > 0.0, "float32"))
    return ops.divide_no_nan(ops.sum(per_token), num_sentences)


def cosine_embedding_loss(target_vectors, y_pred):
    """Per-token cosine distance `1 − cos(ê, e)` `(…)`, float32.

    Formula:
    ```
    loss = 1 − ê·e / (‖ê‖·‖e‖)
    ```
    in `[0, 2]`; PyTorch's `CosineEmbeddingLoss` with target `+1`, the "CEL" of
    ReWE. Where ê or e is the zero vector the cosine is taken to be 0 (loss 1)
    with a zero gradient — there is no direction to prefer; the norms are
    computed safely so nothing is NaN.

    Args:
        target_vectors: float tensor `(…, m)`, e.
        y_pred: float tensor `(…, m)`, ê (any float dtype; computed in float32).
    """
    y_pred = ops.cast(y_pred, "float32")
    target_vectors = ops.cast(target_vectors, "float32")
    denominator = safe_norm(y_pred) * safe_norm(target_vectors)
    positive = denominator > 0.0
    dot = ops.sum(y_pred * target_vectors, axis=-1)
    cosine = ops.where(positive, dot / ops.where(positive, denominator, 1.0), 0.0)
    return 1.0 - cosine


def mse_embedding_loss(target_vectors, y_pred):
    """Per-token squared error, summed over the m features: ‖ê − e‖² `(…)`, float32.

    Formula:
    ```
    loss = Σ_{i=1..m} (ê_i − e_i)²
    ```

    A *sum* over features, not a mean. ReWE's paper names the loss "MSE" and
    points to PyTorch's `MSELoss` (Eq. 6 and its footnote), whose default would
    average over the features too; the authors' code builds it as
    `nn.MSELoss(size_average=False)` (onmt/Loss.py of ijauregiCMCRC/ReWE_NMT):
    the sum of squared errors over all features and tokens, then divided by
    the batch's normalisation (tokens or sentences). The per-token sum follows
    that code, so their λ (Eq. 7, Fig. 2) applies unchanged; the per-feature
    mean is this divided by m.

    Args:
        target_vectors: float tensor `(…, m)`, e.
        y_pred: float tensor `(…, m)`, ê (any float dtype; computed in float32).
    """
    y_pred = ops.cast(y_pred, "float32")
    target_vectors = ops.cast(target_vectors, "float32")
    return ops.sum(ops.square(y_pred - target_vectors), axis=-1)


class EmbeddingTargetLoss(keras.losses.Loss):
    """Base class: a Keras loss between predicted vectors and the gold words' vectors.

    `y_true` `(B, T)` holds the gold ids, `y_pred` `(B, T, m)` the predicted
    vectors ê. Subclasses define `per_token(target_vectors, y_pred)`; this class
    gathers e(y) from the `(V, m)` table, masks padding (`y_true == pad_id`:
    no contribution, exactly zero gradient) and reduces like every Keras loss,
    with `"sum_over_batch_size"` the mean over non-padding tokens. Per-sentence
    sample weights `(B,)` weight every token of their sentence.

    Where the table comes from:

    - in a model: `token_losses(y_true, outputs, head)` (the protocol of
      `tf_outheads.losses.objective`) reads the vectors `head` predicts and
      the table `head.target_vectors()` — a continuous output head, or an
      auxiliary head such as ReWE's;
    - standalone, `loss(y_true, y_pred)` uses `target_embeddings`, given to the
      constructor. It is data, not configuration: it is left out of
      `get_config`, so a revived loss has none until a model supplies the head.

    Gradients flow into the table only if it is a trainable variable (a
    continuous head's table is frozen).

    Args:
        pad_id: int. Defaults to `0`.
        target_embeddings: optional float array `(V, m)`. Defaults to `None`.
        reduction: a Keras reduction. Defaults to `"sum_over_batch_size"`.
        name: the loss's name.
    """

    # Whether the gathered rows are L2-normalised before `per_token`.
    normalize_targets = True

    def __init__(self, pad_id=PAD_ID, target_embeddings=None,
                 reduction="sum_over_batch_size", name=None, dtype=None):
        super().__init__(name=name, reduction=reduction,
                         dtype=float32_only(dtype, type(self).__name__))
        if target_embeddings is not None:
            shape = getattr(target_embeddings, "shape", None)
            shape = tuple(np.shape(target_embeddings) if shape is None else shape)
            if len(shape) != 2:
                raise ValueError("`target_embeddings` must be a (V, m) array. "
                                 f"Received: target_embeddings of shape {shape}")
        self.pad_id = pad_id
        self.target_embeddings = target_embeddings

    def per_token(self, target_vectors, y_pred):
        """Unmasked per-token losses `(…)` float32 from e `(…, m)` and ê `(…, m)`."""
        raise NotImplementedError

    def _masked_per_token(self, y_true, y_pred, target_embeddings):
        per_token, mask = masked_per_token(
            self.per_token, y_true, y_pred, target_embeddings, pad_id=self.pad_id,
            normalize_targets=self.normalize_targets)
        # Keras divides by the number of unmasked entries under
        # "sum_over_batch_size": a per-token mean, not a per-padded-slot one.
        set_keras_mask(per_token, mask)
        return per_token

    def __call__(self, y_true, y_pred, sample_weight=None):
        return super().__call__(y_true, y_pred, sample_weight=sentence_weights(sample_weight))

    def call(self, y_true, y_pred):
        if self.target_embeddings is None:
            raise ValueError(
                f"{type(self).__name__} has no target table: pass "
                "`target_embeddings=` (a (V, m) array) to the constructor, or compile a "
                "model with it, where it reads the table of the head it trains "
                "(`head.target_vectors()`). Received: target_embeddings=None")
        return self._masked_per_token(y_true, y_pred, self.target_embeddings)

    def token_losses(self, y_true, outputs, head):
        """Per-token losses `(B, T)` in a model's step (`tf_outheads.losses.SequenceLoss`):
        the vectors `head` predicts against its table `head.target_vectors()`.

        Args:
            y_true: int `(B, T)`, gold ids.
            outputs: `tf_outheads.training.StepOutputs` of the step.
            head: any layer with `target_vectors()` → `(V, m)` float tensor
                (`tf_outheads.ContinuousOutputHead`, `tf_outheads.ReWEHead`).
        """
        per_token, _ = masked_per_token(
            self.per_token, y_true, outputs.of(head), head.target_vectors(),
            pad_id=self.pad_id, normalize_targets=self.normalize_targets)
        return per_token

    def get_config(self):
        config = super().get_config()
        config.update({"pad_id": self.pad_id})
        return config


@register_loss("cosine")
@export
class CosineEmbeddingLoss(EmbeddingTargetLoss):
    """Keras loss: cosine distance `1 − cos(ê, e(y))` per non-padding token.

    The ReWE loss "CEL" (Jauregi Unanue et al. 2019, Eq. 6, λ = 20 in Eq. 7)
    and the cosine baseline of Kumar & Tsvetkov (2019). Padding is masked
    (the ReWE code does not mask it). See :class:`EmbeddingTargetLoss` for the
    table (`token_losses` in a model, `target_embeddings` standalone).

    Args:
        pad_id: int. Defaults to `0`.
        target_embeddings: optional `(V, m)` array for standalone use; not part
            of the config. Defaults to `None`.
        reduction: Keras reduction. Defaults to `"sum_over_batch_size"`.
        name: Defaults to `"cosine_embedding_loss"`.

    Example:
    ```python
    import numpy as np
    from tf_outheads.losses import CosineEmbeddingLoss
    table = np.random.normal(size=(10, 4)).astype("float32")
    loss = CosineEmbeddingLoss(target_embeddings=table)
    value = loss(np.array([[5, 7, 0]]), np.random.normal(size=(1, 3, 4)))
    ```

    Formula:
    ```
    loss = Σ_{y≠pad} (1 − ê·e(y) / (‖ê‖·‖e(y)‖)) / #(y≠pad)
    ```

    References:
        Jauregi Unanue, Zare Borzeshi & Piccardi 2019 (ReWE), Eq. 6–7.
    """

    # The cosine is scale-invariant: normalising e would change nothing.
    normalize_targets = False

    def __init__(self, pad_id=PAD_ID, target_embeddings=None,
                 reduction="sum_over_batch_size", name="cosine_embedding_loss", dtype=None):
        super().__init__(pad_id=pad_id, target_embeddings=target_embeddings,
                         reduction=reduction, name=name, dtype=dtype)

    def per_token(self, target_vectors, y_pred):
        return cosine_embedding_loss(target_vectors, y_pred)


@register_loss("mse")
@export
class MSEEmbeddingLoss(EmbeddingTargetLoss):
    """Keras loss: squared error ‖ê − e(y)‖² (summed over features) per non-padding token.

    The ReWE "MSE" loss (Jauregi Unanue et al. 2019, Eq. 6): a sum over the m
    features, as in the authors' code (see :func:`mse_embedding_loss`). The
    table's rows are used *as given*, not L2-normalised: ReWE regresses the
    decoder's own embedding, and the squared error depends on the scale (a
    continuous head's `target_vectors()` are unit-norm already). See
    :class:`EmbeddingTargetLoss` for the table protocol.

    Args:
        pad_id: int. Defaults to `0`.
        target_embeddings: optional `(V, m)` array for standalone use; not part
            of the config. Defaults to `None`.
        reduction: Keras reduction. Defaults to `"sum_over_batch_size"`.
        name: Defaults to `"mse_embedding_loss"`.

    Example:
    ```python
    import numpy as np
    from tf_outheads.losses import MSEEmbeddingLoss
    table = np.random.normal(size=(10, 4)).astype("float32")
    loss = MSEEmbeddingLoss(target_embeddings=table)
    value = loss(np.array([[5, 7, 0]]), np.random.normal(size=(1, 3, 4)))
    ```

    Formula:
    ```
    loss = Σ_{y≠pad} Σ_i (ê_i − e(y)_i)² / #(y≠pad)
    ```

    References:
        Jauregi Unanue, Zare Borzeshi & Piccardi 2019 (ReWE), Eq. 6–7.
    """

    normalize_targets = False

    def __init__(self, pad_id=PAD_ID, target_embeddings=None,
                 reduction="sum_over_batch_size", name="mse_embedding_loss", dtype=None):
        super().__init__(pad_id=pad_id, target_embeddings=target_embeddings,
                         reduction=reduction, name=name, dtype=dtype)

    def per_token(self, target_vectors, y_pred):
        return mse_embedding_loss(target_vectors, y_pred)
