"""The von Mises–Fisher negative log-likelihood of Kumar & Tsvetkov (2019).

A continuous-output model predicts a vector ê ∈ R^m per target position; the
loss is the negative log-density of the gold word's unit-norm vector e(w)
under the vMF distribution with mean direction ê/‖ê‖ and concentration
κ = ‖ê‖ (VIVO report Eq. 1–2):

    NLLvMF(ê; e) = −log C_m(‖ê‖) − ê·e,
    log C_m(κ) = (m/2 − 1)·log κ − (m/2)·log 2π − log I_{m/2−1}(κ).

The normaliser comes from `tf_outheads.ops.bessel`: exact (`"exact"`), or
Kumar & Tsvetkov's closed-form stand-in (`"lower_bound"`, VIVO Eq. 3), whose
gradient approximates the exact one but whose value is off by a constant and
a slowly growing term — a pseudo-loss, to compare only with itself.
"""

import numbers

from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.losses.embedding_regression import EmbeddingTargetLoss
from tf_outheads.losses.embedding_regression import masked_per_token
from tf_outheads.losses.embedding_regression import reduce_per_token
from tf_outheads.losses.embedding_regression import safe_norm
from tf_outheads.ops.bessel import log_vmf_normalizer
from tf_outheads.ops.bessel import log_vmf_normalizer_lower_bound
from tf_outheads.registry import register_loss

NORMALIZERS = {"exact": log_vmf_normalizer, "lower_bound": log_vmf_normalizer_lower_bound}


def _check_vmf_arguments(normalizer, norm_penalty, dot_scale):
    if normalizer not in NORMALIZERS:
        raise ValueError(f"`normalizer` must be one of {tuple(NORMALIZERS)}. "
                         f"Received: normalizer={normalizer!r}")
    if isinstance(norm_penalty, numbers.Real) and not norm_penalty >= 0.0:
        raise ValueError(f"`norm_penalty` must be >= 0. Received: norm_penalty={norm_penalty!r}")
    if isinstance(dot_scale, numbers.Real) and not dot_scale > 0.0:
        raise ValueError(f"`dot_scale` must be > 0. Received: dot_scale={dot_scale!r}")


def vmf_negative_log_likelihood(target_vectors, y_pred, normalizer="exact", norm_penalty=0.0,
                                dot_scale=1.0):
    """Per-token vMF negative log-likelihood `(…)`, float32 (padding not masked).

    Formula (κ = ‖ê‖, λ1 = `norm_penalty`, λ2 = `dot_scale`):
    ```
    loss = −log C_m(κ) − λ2·ê·e + λ1·κ
    log C_m(κ) = (m/2 − 1)·log κ − (m/2)·log 2π − log I_{m/2−1}(κ)
    ∂loss/∂ê = (I_{m/2}(κ)/I_{m/2−1}(κ) + λ1)·ê/κ − λ2·e
    ```
    The defaults (λ1 = 0, λ2 = 1) give the plain NLLvMF. Kumar & Tsvetkov §4
    regularise it one way or the other: "NLLvMF_reg1" adds λ1·‖ê‖ (λ1 = 0.02
    in their experiments), "NLLvMF_reg2" scales the dot product by λ2
    (λ2 = 0.1); both can be set, each term is exactly as written above. The
    first term's gradient pulls κ down (the ratio is in (0, 1)), the second
    pulls ê towards e, so κ settles where the Bessel ratio equals
    λ2·cos(ê, e) − λ1: a penalty keeps κ small, a small λ2 too.

    `normalizer="exact"` uses `tf_outheads.ops.log_vmf_normalizer` (float64
    inside, exact to ~1e-13, finite at κ = 0). `"lower_bound"` uses
    `log_vmf_normalizer_lower_bound`, which has the sign of log C_m (so the
    loss is `−bound − λ2·ê·e + λ1·κ`, the authors' `+logcmkappox`): its gradient
    is within 1/(m/2 − 1) of the exact one (0.67 % at m = 300) in the same
    direction, but its value is not the NLL (m = 300: +265.56 at κ = 0 minus a
    term growing like 1.5·log κ), so values of the two are not comparable.

    κ is the norm computed safely: at ê = 0 the loss is −log C_m(0) (log of the
    sphere's area) and the gradient wrt ê is finite (−λ2·e).

    Args:
        target_vectors: float tensor `(…, m)`, the gold words' unit-norm
            vectors e (not normalised here; see :func:`vmf_loss`).
        y_pred: float tensor `(…, m)`, the predicted vectors ê; any float
            dtype, computed in float32.
        normalizer: `"exact"` or `"lower_bound"`. Defaults to `"exact"`.
        norm_penalty: float λ1 ≥ 0. Defaults to `0.0`.
        dot_scale: float λ2 > 0. Defaults to `1.0`.

    Returns:
        float32 tensor `(…)`.

    References:
        Kumar & Tsvetkov 2019, §3 (NLLvMF), §4 (the two regularisers);
        VIVO report (Boldt et al.), Eq. 1–3.
    """
    _check_vmf_arguments(normalizer, norm_penalty, dot_scale)
    y_pred = ops.cast(y_pred, "float32")
    target_vectors = ops.cast(target_vectors, "float32")
    dim = y_pred.shape[-1]
    if dim is None:
        dim = ops.shape(y_pred)[-1]
    kappa = safe_norm(y_pred)  # (…)
    log_normalizer = NORMALIZERS[normalizer](kappa, dim)
    dot = ops.sum(y_pred * target_vectors, axis=-1)
    return -log_normalizer - dot_scale * dot + norm_penalty * kappa


def vmf_loss(y_true, y_pred, target_embeddings, normalizer="exact", norm_penalty=0.0,
             dot_scale=1.0, pad_id=PAD_ID, reduction="token"):
    """vMF NLL of the gold words' vectors, masked and reduced to a scalar.

    e(y) is gathered from `target_embeddings` and L2-normalised here (zero
    rows stay zero): the vMF density lives on the unit sphere, and a table
    that is only approximately normalised (float16 storage, a trainable
    table) would otherwise bias the dot product. Padding (`y_true == pad_id`)
    contributes nothing and gets an exactly zero gradient.

    Args:
        y_true: int tensor `(B, T)`, gold ids, `pad_id` at padding.
        y_pred: float tensor `(B, T, m)`, the predicted vectors.
        target_embeddings: float `(V, m)` table of the target words' vectors.
        normalizer, norm_penalty, dot_scale: as
            :func:`vmf_negative_log_likelihood`.
        pad_id: int. Defaults to `0`.
        reduction: `"token"` (mean over non-padding tokens) or `"sentence"`
            (sum over each sentence's tokens, mean over the sentences with at
            least one token). VIVO found the token mean better. Defaults to
            `"token"`.

    Returns:
        float32 scalar (0 for an all-padding batch).

    Formula:
    ```
    token:    loss = Σ_{b,t: y≠pad} NLLvMF(ê_bt; e(y_bt)) / #(y≠pad)
    sentence: loss = Σ_{b,t: y≠pad} NLLvMF(ê_bt; e(y_bt)) / #{b: ∃t y_bt≠pad}
    ```

    Example:
    ```python
    import numpy as np
    from tf_outheads.losses import vmf_loss
    table = np.random.normal(size=(100, 300)).astype("float32")
    y_pred = np.random.normal(size=(2, 3, 300)).astype("float32")
    value = vmf_loss(np.array([[5, 7, 0], [9, 0, 0]]), y_pred, table)
    ```
    """
    _check_vmf_arguments(normalizer, norm_penalty, dot_scale)

    def per_token_fn(target_vectors, predictions):
        return vmf_negative_log_likelihood(target_vectors, predictions, normalizer=normalizer,
                                           norm_penalty=norm_penalty, dot_scale=dot_scale)

    per_token, mask = masked_per_token(per_token_fn, y_true, y_pred, target_embeddings,
                                       pad_id=pad_id, normalize_targets=True)
    return reduce_per_token(per_token, mask, reduction)


@register_loss("vmf")
@export
class VMFLoss(EmbeddingTargetLoss):
    """Keras loss: the von Mises–Fisher NLL of the gold words' vectors.

    For a continuous-output model (`tf_outheads.ContinuousOutputHead`):
    `y_true` `(B, T)` holds gold ids, `y_pred` `(B, T, m)` the predicted
    vectors ê. In a model the table comes from the head (`token_losses`, which
    reads `head.target_vectors()`); standalone, from `target_embeddings`, which is
    data and not part of `get_config` (a revived loss has no table until a
    head supplies one). Gathered rows are L2-normalised. Padding
    contributes nothing; with `"sum_over_batch_size"` the result is the mean
    over non-padding tokens; per-sentence sample weights `(B,)` weight every
    token of their sentence. Computed in float32 whatever the inputs' dtype
    (the exact normaliser in float64 inside). For the per-sentence reduction
    use :func:`vmf_loss` with `reduction="sentence"`.

    Args:
        normalizer: `"exact"` or `"lower_bound"` (Kumar & Tsvetkov's
            approximation: right gradient direction, value off by a constant).
            Defaults to `"exact"`.
        norm_penalty: float λ1 ≥ 0 of NLLvMF_reg1 (paper: 0.02). Defaults to `0.0`.
        dot_scale: float λ2 > 0 of NLLvMF_reg2 (paper: 0.1). Defaults to `1.0`.
        pad_id: int. Defaults to `0`.
        target_embeddings: optional `(V, m)` array for standalone use; not part
            of the config. Defaults to `None`.
        reduction: Keras reduction. Defaults to `"sum_over_batch_size"`.
        name: Defaults to `"vmf_loss"`.

    Example:
    ```python
    import numpy as np
    from tf_outheads.losses import VMFLoss
    table = np.random.normal(size=(100, 300)).astype("float32")
    loss = VMFLoss(norm_penalty=0.02, target_embeddings=table)
    value = loss(np.array([[5, 7, 0]]), np.random.normal(size=(1, 3, 300)))
    ```

    Formula (κ = ‖ê‖, e = e(y)/‖e(y)‖):
    ```
    loss = Σ_{y≠pad} [−log C_m(κ) − λ2·ê·e + λ1·κ] / #(y≠pad)
    ```

    References:
        Kumar & Tsvetkov 2019, §3–4; VIVO report (Boldt et al.), Eq. 1–3.
    """

    normalize_targets = True

    def __init__(self, normalizer="exact", norm_penalty=0.0, dot_scale=1.0, pad_id=PAD_ID,
                 target_embeddings=None, reduction="sum_over_batch_size", name="vmf_loss",
                 dtype=None):
        super().__init__(pad_id=pad_id, target_embeddings=target_embeddings,
                         reduction=reduction, name=name, dtype=dtype)
        _check_vmf_arguments(normalizer, norm_penalty, dot_scale)
        self.normalizer = normalizer
        self.norm_penalty = float(norm_penalty)
        self.dot_scale = float(dot_scale)

    def per_token(self, target_vectors, y_pred):
        return vmf_negative_log_likelihood(
            target_vectors, y_pred, normalizer=self.normalizer,
            norm_penalty=self.norm_penalty, dot_scale=self.dot_scale)

    def get_config(self):
        config = super().get_config()
        config.update({
            "normalizer": self.normalizer,
            "norm_penalty": self.norm_penalty,
            "dot_scale": self.dot_scale,
        })
        return config
