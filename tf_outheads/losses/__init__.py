"""Losses, each a function + `keras.losses.Loss` class pair."""

from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import masked_sequence_cross_entropy

__all__ = ["MaskedSequenceCrossEntropy", "masked_sequence_cross_entropy"]
