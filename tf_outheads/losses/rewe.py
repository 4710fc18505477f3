"""The ReWE loss: regress the gold word's embedding next to the NLL (Eq. 6–7).

Jauregi Unanue et al. (2019) train the categorical output as usual and, on the
same decoder state, the ReWE head (`tf_outheads.ReWEHead`) to predict the
gold word's embedding; the objective is

    Loss = NLL + λ · ReWE_loss,    ReWE_loss = l(e_j, e(y_j))          (Eq. 7, 6)

with `l` the cosine embedding loss 1 − cos (their "CEL", λ = 20, the setting
of all their main results) or the squared error (λ < 1 only helped).

The per-token distances, the gather of e(y), padding masking and reductions
are those of `tf_outheads.losses.embedding_regression`; this module adds the
choice of distance. In a model the loss is the term of the ReWE head (an
auxiliary head, `tf_outheads.losses.objective`): it reads the vectors the head
predicts and e(y) from `head.target_vectors()`. Eq. 7 itself is `loss_weights`:

```python
model.compile(optimizer="adam",
              loss={"logits": MaskedSequenceCrossEntropy(), "rewe": ReWELoss("cosine")},
              loss_weights={"logits": 1.0, "rewe": 20.0})
```
"""

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.losses.embedding_regression import EmbeddingTargetLoss
from tf_outheads.losses.embedding_regression import cosine_embedding_loss
from tf_outheads.losses.embedding_regression import masked_per_token
from tf_outheads.losses.embedding_regression import mse_embedding_loss
from tf_outheads.losses.embedding_regression import reduce_per_token

# The paper's two choices of `l` (Eq. 6): the per-token distance functions.
DISTANCES = {"cosine": cosine_embedding_loss, "mse": mse_embedding_loss}
# λ of Eq. 7 with the cosine loss in every main result (Table 2, §4.1).
PAPER_REWE_WEIGHT = 20.0


def _check_distance(distance):
    if distance not in DISTANCES:
        raise ValueError(f"`distance` must be one of {sorted(DISTANCES)}. "
                         f"Received: distance={distance!r}")


def rewe_loss(y_true, y_pred, target_embeddings, distance="cosine", pad_id=PAD_ID,
              reduction="token"):
    """ReWE_loss (Eq. 6): the distance between e_j and e(y_j), masked over padding.

    Args:
        y_true: int tensor `(B, T)`, gold ids, `pad_id` at padding.
        y_pred: float tensor `(B, T, m)`, the ReWE head's output e_j.
        target_embeddings: float `(V, m)`, the table of e(·) (not normalised).
        distance: `"cosine"` (1 − cos, the paper's CEL) or `"mse"` (‖e_j − e(y)‖²,
            summed over the m features as in the authors' code). Defaults to
            `"cosine"`.
        pad_id: int. Defaults to `0`.
        reduction: `"token"` (mean over non-padding tokens) or `"sentence"`
            (sum over each sentence's tokens, mean over sentences). Defaults
            to `"token"`.

    Returns:
        float32 scalar. Padding contributes nothing and gets a zero gradient.

    Formula:
    ```
    cosine: Σ_{y≠pad} (1 − e_j·e(y_j) / (‖e_j‖·‖e(y_j)‖)) / #(y≠pad)
    mse:    Σ_{y≠pad} ‖e_j − e(y_j)‖² / #(y≠pad)
    ```
    """
    _check_distance(distance)
    per_token, mask = masked_per_token(DISTANCES[distance], y_true, y_pred, target_embeddings,
                                       pad_id=pad_id, normalize_targets=False)
    return reduce_per_token(per_token, mask, reduction)


@export
class ReWELoss(EmbeddingTargetLoss):
    """Keras loss: ReWE_loss (Eq. 6), cosine or squared error to e(y), padding masked.

    The `"rewe"` entry of a ReWE model's loss dict; `loss_weights` gives λ of
    Eq. 7. The table of e(·) comes from:

    - the head the loss trains, in a model (`token_losses`, the protocol of
      `tf_outheads.losses.objective`): the ReWE head's `target_vectors()`.
      Compiled alone on a `ContinuousOutputHead` it is the paper's contrastive
      set-up B, ReWE without the categorical output, decoded by nearest
      neighbour;
    - `target_embeddings=` given to the constructor, standalone (`loss(y, e)`).

    Args:
        distance: `"cosine"` or `"mse"`. Defaults to `"cosine"` (the paper's
            choice for λ = 20).
        pad_id: int. Defaults to `0`.
        target_embeddings: optional `(V, m)` array; not part of the config.
            Defaults to `None`.
        reduction: a Keras reduction. Defaults to `"sum_over_batch_size"`
            (the mean over non-padding tokens).
        name: Defaults to `"rewe_loss"`.

    Example:
    ```python
    import numpy as np
    from tf_outheads import ReWELoss
    table = np.random.normal(size=(10, 4)).astype("float32")
    loss = ReWELoss("cosine", target_embeddings=table)
    value = loss(np.array([[5, 7, 0]]), np.random.normal(size=(1, 3, 4)))
    ```

    Formula:
    ```
    loss = Σ_{y≠pad} l(e_j, e(y_j)) / #(y≠pad),
    l = 1 − cos (cosine) or ‖e_j − e(y_j)‖² (mse)
    ```

    References:
        Jauregi Unanue, Zare Borzeshi, Esmaili & Piccardi 2019, Eq. 6–7.
    """

    # Cosine is scale-invariant; MSE regresses the table as given.
    normalize_targets = False

    def __init__(self, distance="cosine", pad_id=PAD_ID, target_embeddings=None,
                 reduction="sum_over_batch_size", name="rewe_loss", dtype=None):
        super().__init__(pad_id=pad_id, target_embeddings=target_embeddings,
                         reduction=reduction, name=name, dtype=dtype)
        _check_distance(distance)
        self.distance = distance

    def per_token(self, target_vectors, y_pred):
        return DISTANCES[self.distance](target_vectors, y_pred)

    def get_config(self):
        config = super().get_config()
        config.update({"distance": self.distance})
        return config
