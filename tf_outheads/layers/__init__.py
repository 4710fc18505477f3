"""Keras layers: output heads and attention."""

from tf_outheads.layers.attention import LuongAttention
from tf_outheads.layers.attention import MultiHeadAttention
from tf_outheads.layers.attention import sinusoidal_position_encoding
from tf_outheads.layers.continuous_head import ContinuousOutputHead
from tf_outheads.layers.heads import HEADS
from tf_outheads.layers.heads import CategoricalHead
from tf_outheads.layers.heads import SoftmaxHead
from tf_outheads.layers.heads import TiedSoftmaxHead
from tf_outheads.layers.heads import build_head
from tf_outheads.layers.heads import register_head
from tf_outheads.layers.rewe_head import ReWEHead
from tf_outheads.layers.selection_head import VocabularySelectionHead

__all__ = ["HEADS", "CategoricalHead", "ContinuousOutputHead", "LuongAttention",
           "MultiHeadAttention", "ReWEHead", "SoftmaxHead", "TiedSoftmaxHead",
           "VocabularySelectionHead", "build_head", "register_head",
           "sinusoidal_position_encoding"]
