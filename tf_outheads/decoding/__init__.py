"""Search kept out of the model: a step function is the only contract."""

from tf_outheads.decoding.greedy import GreedyResult
from tf_outheads.decoding.greedy import greedy_search
from tf_outheads.decoding.greedy import max_length_from_source

__all__ = ["GreedyResult", "greedy_search", "max_length_from_source"]
