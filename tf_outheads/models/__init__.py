"""Seq2seq models that take any head: the base class and the contracts it keeps."""

from tf_outheads.models.contracts import AuxiliaryHead
from tf_outheads.models.contracts import DecodingModel
from tf_outheads.models.contracts import OutputHead
from tf_outheads.models.seq2seq import Seq2SeqModel
from tf_outheads.models.seq2seq import inference_model
from tf_outheads.models.seq2seq import quantized_copy
from tf_outheads.models.weight_transfer import piece_tables
from tf_outheads.models.weight_transfer import transfer_weights

__all__ = ["AuxiliaryHead", "DecodingModel", "OutputHead", "Seq2SeqModel", "inference_model",
           "quantized_copy", "piece_tables", "transfer_weights"]
