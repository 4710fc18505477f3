"""Evaluation: BLEU/chrF via sacrebleu, parameter counts, and the hubness of a
nearest-neighbour search (continuous outputs)."""

from tf_outheads.metrics.bleu import PairedResult
from tf_outheads.metrics.bleu import Score
from tf_outheads.metrics.bleu import corpus_bleu
from tf_outheads.metrics.bleu import corpus_chrf
from tf_outheads.metrics.bleu import evaluate_translations
from tf_outheads.metrics.bleu import format_report
from tf_outheads.metrics.bleu import paired_significance
from tf_outheads.metrics.bleu import read_lines
from tf_outheads.metrics.bleu import split_lines
from tf_outheads.metrics.hubness import Hubness
from tf_outheads.metrics.hubness import hubness
from tf_outheads.metrics.params import ParameterReport
from tf_outheads.metrics.params import parameter_report

__all__ = [
    "Hubness",
    "PairedResult",
    "ParameterReport",
    "Score",
    "corpus_bleu",
    "corpus_chrf",
    "evaluate_translations",
    "format_report",
    "hubness",
    "paired_significance",
    "parameter_report",
    "read_lines",
    "split_lines",
]
