"""Model zoo: seq2seq models that take any tf_outheads head, named presets, the CLI.

`from tf_outheads_zoo import LSTMSeq2Seq, TransformerSeq2Seq`. Imports are lazy so that `tf-outheads --help`
answers without loading TensorFlow.
"""

__all__ = ["LSTMSeq2Seq", "PRESETS", "TransformerSeq2Seq", "get_preset"]


def __getattr__(name):
    if name == "LSTMSeq2Seq":
        from tf_outheads_zoo.lstm import LSTMSeq2Seq

        return LSTMSeq2Seq
    if name == "TransformerSeq2Seq":
        from tf_outheads_zoo.transformer import TransformerSeq2Seq

        return TransformerSeq2Seq
    if name in ("PRESETS", "get_preset"):
        from tf_outheads_zoo import presets

        return getattr(presets, name)
    raise AttributeError(f"module 'tf_outheads_zoo' has no attribute {name!r}")
