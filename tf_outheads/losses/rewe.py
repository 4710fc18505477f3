"""The ReWE loss: regress the gold word's embedding next to the NLL (Eq. 6–7).

Jauregi Unanue et al. (2019) train the categorical output as usual and, on the
same decoder state, the ReWE head (`tf_outheads.ReWEHead`) to predict the
gold word's embedding; the objective is

    Loss = NLL + λ · ReWE_loss,    ReWE_loss = l(e_j, e(y_j))          (Eq. 7, 6)

with `l` the cosine embedding loss 1 − cos (their "CEL", λ = 20, the setting
of all their main results) or the squared error (λ < 1 only helped).

The per-token distances, the gather of e(y), padding masking and reductions
are those of `tf_outheads.losses.embedding_regression`; this module adds the
choice of distance, and the link to the ReWE head's table that lets Keras'
multi-output `compile` compute the loss: the model binds its ReWE head to the
loss (`bind_head`), and `loss(y_true, e)` reads e(y) from
`head.target_vectors()`. Eq. 7 itself is Keras' `loss_weights`:

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

    The second entry of a ReWE model's loss dict; `loss_weights` gives λ of
    Eq. 7. The table of e(·) comes, in order of precedence, from:

    - `target_embeddings=` given to the constructor (standalone use, tests);
    - the ReWE head bound with `bind_head(head)`: what
      `tf_outheads.training.HeadLossMixin` does before computing a loss, so
      `model.compile(loss={"logits": ..., "rewe": ReWELoss()})` needs nothing
      more (the binding is not part of the config);
    - `call_with_head(y_true, y_pred, head)` (the `needs_head` protocol): a
      model compiled with this loss alone on a `ContinuousOutputHead` is the
      paper's contrastive set-up B, ReWE without the categorical output,
      decoded by nearest neighbour.

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
        self._head = None

    def bind_head(self, head):
        """Read e(·) from `head.target_vectors()` (a `ReWEHead`) when called."""
        self._head = head

    def per_token(self, target_vectors, y_pred):
        return DISTANCES[self.distance](target_vectors, y_pred)

    def call(self, y_true, y_pred):
        if self.target_embeddings is not None:
            return super().call(y_true, y_pred)
        if self._head is None:
            raise ValueError(
                "ReWELoss has no target table: compile a model that has a ReWE head "
                "(it binds its head to the loss), call `bind_head(head)`, or pass "
                "`target_embeddings=` (a (V, m) array). Received: target_embeddings=None")
        return self._masked_per_token(y_true, y_pred, self._head.target_vectors())

    def get_config(self):
        config = super().get_config()
        config.update({"distance": self.distance})
        return config
