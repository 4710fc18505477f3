"""Losses, each a function + `keras.losses.Loss` class pair."""

from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import masked_sequence_cross_entropy
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.losses.sampled_softmax import sampled_softmax_loss

__all__ = ["MaskedSequenceCrossEntropy", "SampledSoftmaxLoss", "masked_sequence_cross_entropy",
           "sampled_softmax_loss"]
