"""The bag-of-words loss of neural vocabulary selection (Domhan et al. 2022, Sec. 4).

The selection head (`tf_outheads.VocabularySelectionHead`) predicts, per sentence,
a logit `b_v` for every target piece `v`; its target is the sentence's bag of target
pieces `y_v = [v ∈ y]`. As Sockeye's `BinaryCrossEntropyBowLoss` (the authors'
implementation), the loss is a binary cross-entropy whose positive class is
up-weighted by `w⁺ = pos_weight · #negatives / #positives` of the batch (a
sentence holds a few dozen of `V` pieces: unweighted, predicting "absent" for every
piece is nearly optimal), normalised by the `V + (w⁺ − 1)·n̄⁺` terms it stands for
(`n̄⁺` the batch's mean bag size):

    L_sentence = Σ_v [w⁺ y_v log σ(b_v) + (1 − y_v) log(1 − σ(b_v))] · −1 / (V + (w⁺ − 1) n̄⁺)

In a model it is the term of the `"selection"` auxiliary head: every target token of
a sentence carries its sentence's loss, so the objective's per-token mean is the
mean of sentence losses weighted by their lengths (Sockeye: unweighted).
"""

import keras
from keras import ops

from tf_outheads.api_export import export
from tf_outheads.data.special_tokens import PAD_ID

# Sockeye's `--bow-task-pos-weight` and `--bow-task-weight` defaults.
DEFAULT_POSITIVE_WEIGHT = 10.0
DEFAULT_SELECTION_WEIGHT = 1.0


def bag_of_words(ids, vocabulary_size, pad_id=PAD_ID):
    """`(B, V)` float32: 1 where piece `v` occurs in row `b` of `ids (B, T)` (padding
    excluded)."""
    ids = ops.cast(ids, "int32")
    present = ops.cast(ops.not_equal(ids, pad_id), "float32")
    rows = ops.broadcast_to(ops.arange(ops.shape(ids)[0], dtype="int32")[:, None],
                            ops.shape(ids))
    indices = ops.stack([ops.reshape(rows, [-1]), ops.reshape(ids, [-1])], axis=1)
    counts = ops.scatter(indices, ops.reshape(present, [-1]),
                         (ops.shape(ids)[0], vocabulary_size))
    return ops.cast(counts > 0, "float32")


def bag_of_words_loss(y_true, logits, positive_weight=DEFAULT_POSITIVE_WEIGHT,
                      pad_id=PAD_ID):
    """Per-sentence loss `(B,)` float32 (module doc) of selection `logits (B, V)` against
    the pieces of `y_true (B, T)`."""
    logits = ops.cast(logits, "float32")
    vocabulary_size = ops.shape(logits)[-1]
    bag = bag_of_words(y_true, vocabulary_size, pad_id)
    positives = ops.sum(bag)
    total = ops.cast(ops.size(bag), "float32")
    weight = positive_weight * ops.divide_no_nan(total - positives, positives)
    # −log σ(b) = softplus(−b), −log(1 − σ(b)) = softplus(b): stable for any logit.
    terms = weight * bag * ops.softplus(-logits) + (1.0 - bag) * ops.softplus(logits)
    mean_positives = ops.mean(ops.sum(bag, axis=1))
    scale = 1.0 / (ops.cast(vocabulary_size, "float32") + mean_positives * (weight - 1.0))
    return ops.sum(terms, axis=1) * scale


@export
class BagOfWordsLoss(keras.losses.Loss):
    """Binary cross-entropy of a selection head against the bag of target pieces.

    The `"selection"` term of a model with a `VocabularySelectionHead` (module doc):

    ```python
    model.compile(optimizer="adam",
                  loss={"logits": MaskedSequenceCrossEntropy(), "selection": BagOfWordsLoss()},
                  loss_weights={"logits": 1.0, "selection": 1.0})
    ```

    Args:
        positive_weight: float >= 0, `x` of `w⁺ = x · #neg / #pos` (Sockeye's
            `--bow-task-pos-weight`): larger favours recall, so larger selections.
            Defaults to `10.0`.
        pad_id: int. Defaults to `0`.

    Called as a Keras loss, `loss(y_true (B, T), logits (B, V))` is the mean over
    sentences of their losses.

    References:
        Domhan, Hasler, Tran, Trenous, Byrne & Hieber 2022, Sec. 4; Sockeye's
        `sockeye/loss.py:BinaryCrossEntropyBowLoss`.
    """

    def __init__(self, positive_weight=DEFAULT_POSITIVE_WEIGHT, pad_id=PAD_ID,
                 reduction="sum_over_batch_size", name="bag_of_words_loss", dtype=None):
        super().__init__(reduction=reduction, name=name, dtype=dtype)
        positive_weight = float(positive_weight)
        if not positive_weight >= 0.0:
            raise ValueError(f"`positive_weight` must be >= 0. "
                             f"Received: positive_weight={positive_weight}")
        self.positive_weight = positive_weight
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        return bag_of_words_loss(y_true, y_pred, self.positive_weight, self.pad_id)

    def token_losses(self, y_true, outputs, head):
        """`(B, T)`: each token carries its sentence's loss (`SequenceLoss`)."""
        sentence = bag_of_words_loss(y_true, outputs.of(head), self.positive_weight,
                                     self.pad_id)
        return ops.broadcast_to(sentence[:, None], ops.shape(y_true))

    def get_config(self):
        config = super().get_config()
        config.update({"positive_weight": self.positive_weight, "pad_id": self.pad_id})
        return config


__all__ = ["BagOfWordsLoss", "DEFAULT_POSITIVE_WEIGHT", "DEFAULT_SELECTION_WEIGHT",
           "bag_of_words", "bag_of_words_loss"]
