"""tf_outheads: output layers for neural machine translation on Keras 3 / TensorFlow.

The public surface is the explicit list below (`__all__`); submodules
(`tf_outheads.data`, `.decoding`, `.export`, `.metrics`, `.models`, `.training`) hold
the rest, and `tf_outheads.registry` the names configurations give heads, losses,
optimizers and schedules (importing this package registers the built-in ones).
"""

from tf_outheads import data
from tf_outheads import decoding
from tf_outheads import export
from tf_outheads import metrics
from tf_outheads import training
from tf_outheads.decoding.greedy import greedy_search
from tf_outheads.decoding.neural_selection import NeuralSelection
from tf_outheads.decoding.options import DecodeOptions
from tf_outheads.decoding.scoring import Scorer
from tf_outheads.decoding.translator import Translator
from tf_outheads.decoding.translator import translate
from tf_outheads.layers.attention import LuongAttention
from tf_outheads.layers.continuous_head import ContinuousOutputHead
from tf_outheads.layers.heads import CategoricalHead
from tf_outheads.layers.heads import SoftmaxHead
from tf_outheads.layers.heads import TiedSoftmaxHead
from tf_outheads.layers.joint_head import JointEmbeddingHead
from tf_outheads.layers.rewe_head import ReWEHead
from tf_outheads.layers.selection_head import VocabularySelectionHead
from tf_outheads.layers.shared_private import SharedPrivateEmbedding
from tf_outheads.models.seq2seq import Seq2SeqModel
from tf_outheads.models.seq2seq import quantized_copy
from tf_outheads.losses.bag_of_words import BagOfWordsLoss
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.cross_entropy import masked_sequence_cross_entropy
from tf_outheads.losses.embedding_regression import CosineEmbeddingLoss
from tf_outheads.losses.embedding_regression import MSEEmbeddingLoss
from tf_outheads.losses.embedding_regression import cosine_embedding_loss
from tf_outheads.losses.embedding_regression import mse_embedding_loss
from tf_outheads.losses.rewe import ReWELoss
from tf_outheads.losses.rewe import rewe_loss
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.losses.sampled_softmax import sampled_softmax_loss
from tf_outheads.losses.vmf import VMFLoss
from tf_outheads.losses.vmf import vmf_loss
from tf_outheads.losses.vmf import vmf_negative_log_likelihood
from tf_outheads.metrics.bleu import corpus_bleu
from tf_outheads.metrics.params import parameter_report
from tf_outheads.training.callbacks import BleuCallback
from tf_outheads.training.translation import compile_for_translation
from tf_outheads.training.translation import translation_callbacks
from tf_outheads.training.optimizers import LazyAdam

__version__ = "0.1.0"

__all__ = [
    "BagOfWordsLoss",
    "BleuCallback",
    "CategoricalHead",
    "ContinuousOutputHead",
    "CosineEmbeddingLoss",
    "DecodeOptions",
    "LuongAttention",
    "MSEEmbeddingLoss",
    "MaskedSequenceCrossEntropy",
    "NeuralSelection",
    "ReWEHead",
    "ReWELoss",
    "SampledSoftmaxLoss",
    "Seq2SeqModel",
    "SharedPrivateEmbedding",
    "SoftmaxHead",
    "TiedSoftmaxHead",
    "VMFLoss",
    "VocabularySelectionHead",
    "Scorer",
    "Translator",
    "compile_for_translation",
    "corpus_bleu",
    "cosine_embedding_loss",
    "data",
    "decoding",
    "export",
    "greedy_search",
    "quantized_copy",
    "JointEmbeddingHead",
    "LazyAdam",
    "masked_sequence_cross_entropy",
    "mse_embedding_loss",
    "metrics",
    "parameter_report",
    "rewe_loss",
    "sampled_softmax_loss",
    "training",
    "translate",
    "translation_callbacks",
    "vmf_loss",
    "vmf_negative_log_likelihood",
]
