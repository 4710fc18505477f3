"""Search kept out of the model: a step function is the only contract.

`DecodeOptions` holds every decoding option, checked once; `Translator`, the
exported SavedModel and the command line all take it whole.
"""

from tf_outheads.decoding.beam_pool import BeamResult
from tf_outheads.decoding.beam import beam_search
from tf_outheads.decoding.beam_layout import gather_beams
from tf_outheads.decoding.beam_layout import tile_for_beam
from tf_outheads.decoding.greedy import GreedyResult
from tf_outheads.decoding.greedy import greedy_search
from tf_outheads.decoding.greedy import max_length_from_source
from tf_outheads.decoding.neural_selection import NeuralSelection
from tf_outheads.decoding.options import DecodeOptions
from tf_outheads.decoding.scoring import Scorer
from tf_outheads.decoding.scoring import score
from tf_outheads.decoding.selection import Shortlist
from tf_outheads.decoding.selection import build_shortlist
from tf_outheads.decoding.translator import Translator
from tf_outheads.decoding.translator import translate
from tf_outheads.decoding.unk import replace_unknown_words

__all__ = [
    "BeamResult",
    "DecodeOptions",
    "GreedyResult",
    "NeuralSelection",
    "Scorer",
    "Shortlist",
    "Translator",
    "beam_search",
    "build_shortlist",
    "gather_beams",
    "greedy_search",
    "max_length_from_source",
    "replace_unknown_words",
    "score",
    "tile_for_beam",
    "translate",
]
