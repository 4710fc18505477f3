"""Losses, each a function + `keras.losses.Loss` class pair, and the `Objective` a
seq2seq model trains with (`tf_outheads.losses.objective`)."""

from tf_outheads.losses.bag_of_words import BagOfWordsLoss
from tf_outheads.losses.bag_of_words import bag_of_words_loss
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import masked_sequence_cross_entropy
from tf_outheads.losses.embedding_regression import CosineEmbeddingLoss
from tf_outheads.losses.embedding_regression import EmbeddingTargetLoss
from tf_outheads.losses.embedding_regression import MSEEmbeddingLoss
from tf_outheads.losses.embedding_regression import cosine_embedding_loss
from tf_outheads.losses.embedding_regression import mse_embedding_loss
from tf_outheads.losses.objective import Objective
from tf_outheads.losses.objective import SequenceLoss
from tf_outheads.losses.objective import StepOutputs
from tf_outheads.losses.rewe import ReWELoss
from tf_outheads.losses.rewe import rewe_loss
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.losses.sampled_softmax import sampled_softmax_loss
from tf_outheads.losses.vmf import VMFLoss
from tf_outheads.losses.vmf import vmf_loss
from tf_outheads.losses.vmf import vmf_negative_log_likelihood

__all__ = ["BagOfWordsLoss", "CosineEmbeddingLoss", "EmbeddingTargetLoss", "MSEEmbeddingLoss",
           "MaskedSequenceCrossEntropy", "Objective", "ReWELoss", "SampledSoftmaxLoss",
           "SequenceLoss", "StepOutputs", "VMFLoss", "bag_of_words_loss", "cosine_embedding_loss",
           "masked_sequence_cross_entropy", "mse_embedding_loss", "rewe_loss",
           "sampled_softmax_loss", "vmf_loss", "vmf_negative_log_likelihood"]
