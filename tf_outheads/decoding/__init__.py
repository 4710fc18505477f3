"""Search kept out of the model: a step function is the only contract."""

from tf_outheads.decoding.greedy import GreedyResult
from tf_outheads.decoding.greedy import greedy_search
from tf_outheads.decoding.greedy import max_length_from_source
from tf_outheads.decoding.translate import Translator
from tf_outheads.decoding.translate import translate

__all__ = ["GreedyResult", "Translator", "greedy_search", "max_length_from_source", "translate"]
