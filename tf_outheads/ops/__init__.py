"""Pure tensor math shared by layers and losses (no Keras state).

The Bessel / von Mises–Fisher functions, the fused attentional LSTM decoder
(`attentional_lstm`) and the whole-sequence LSTM layer (`sequence_lstm`, cuDNN
where it can run) are exported here; the candidate sampling of sampled softmax
is used as a module, `tf_outheads.ops.candidate_sampling`.
"""

from tf_outheads.ops.bessel import bessel_iv_ratio
from tf_outheads.ops.bessel import log_bessel_iv
from tf_outheads.ops.bessel import log_vmf_normalizer
from tf_outheads.ops.bessel import log_vmf_normalizer_lower_bound
from tf_outheads.ops.recurrent import attentional_lstm
from tf_outheads.ops.recurrent import sequence_lstm

__all__ = [
    "attentional_lstm",
    "bessel_iv_ratio",
    "log_bessel_iv",
    "log_vmf_normalizer",
    "log_vmf_normalizer_lower_bound",
    "sequence_lstm",
]
