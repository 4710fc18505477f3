"""Export to CTranslate2 (optional extra: `pip install tf_outheads[ctranslate2]`).

TensorFlow's int8 products are slower than its float32 ones on AVX2 CPUs without
VNNI, and a float32 decoding step has no single op left to remove (issue 57), so the
fast CPU path is CTranslate2's fused C++ kernels, as OpenNMT-tf's
`export --format ctranslate2`. `to_ctranslate2` writes a CTranslate2 model directory
from a trained model, with the run's SentencePiece models beside it, so the directory
is all a server needs:

    DIR/model.bin, config.json,         CTranslate2's files (ctranslate2.Translator(DIR))
        source_vocabulary.json, ...
    DIR/source.spm.model, target.spm.model   the tokenizers (the run's, byte for byte)
    DIR/tf_outheads_ctranslate2.json    what was exported: head, exactness, decoding
                                        defaults, fingerprints

What can go there, each checked before anything is written:

- the model: one whose `ctranslate2_backbone` gives a `TransformerSpec` (a Transformer
  encoder-decoder). CTranslate2 runs no RNN decoder (OpenNMT/CTranslate2 #796), so an
  LSTM model is refused, naming why;
- the head: its `linear_scores()` (the decoder ends with one linear layer).
  Softmax, tied (with its projection folded), shared-private (its tables
  assembled), sampled- and ReWE-trained heads (the auxiliary head is not used to
  decode) and the joint head with a linear activation export exactly; vMF exports
  its nearest-neighbour arg-max (exact scores too with `scoring="posterior"`); a
  joint head with a nonlinearity is refused, naming it.

Positions are written out as CTranslate2 encodings from this library's own
sinusoids (interleaved sine/cosine from position 0, Vaswani et al. §3.5), not left
to CTranslate2's (concatenated halves), up to `max_positions` per sentence.
"""

import json
import os

import numpy as np

from tf_outheads.data.special_tokens import BOS_PIECE, EOS_PIECE, UNK_PIECE
from tf_outheads.export.atomic import CTRANSLATE2, check_export_directory, replace_directory
from tf_outheads.layers.linear_scores import to_numpy

METADATA_FILE = "tf_outheads_ctranslate2.json"
SOURCE_TOKENIZER_FILE = "source.spm.model"
TARGET_TOKENIZER_FILE = "target.spm.model"
# CTranslate2's weight types (`ctranslate2.specs.ModelSpec.optimize`); None keeps float32.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16", "float32")
DEFAULT_MAX_POSITIONS = 1024
INSTALL_HINT = "pip install 'tf_outheads[ctranslate2]'"


def import_ctranslate2():
    """The `ctranslate2` module, or an `ImportError` that says how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise ImportError(f"CTranslate2 is not installed: {INSTALL_HINT}") from error
    return ctranslate2


def set_linear(spec, dense):
    """A `LinearSpec` from a Keras `Dense` (its `(in, out)` kernel transposed)."""
    spec.weight = np.ascontiguousarray(to_numpy(dense.kernel).T)
    if dense.use_bias:
        spec.bias = to_numpy(dense.bias)


def set_layer_norm(spec, norm):
    """A `LayerNormSpec` from a Keras `LayerNormalization` (scale and center on)."""
    spec.gamma = to_numpy(norm.gamma)
    spec.beta = to_numpy(norm.beta)


def set_attention(spec, attention, norm, self_attention):
    """A `MultiHeadAttentionSpec` from `tf_outheads.layers.MultiHeadAttention` and the
    layer norm of its sub-layer: query, key and value projections fused for
    self-attention (one `[3d, d]` linear), key and value for cross-attention."""
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec

    parts = []
    for dense in (attention.query_dense, attention.key_dense, attention.value_dense):
        part = common_spec.LinearSpec()
        set_linear(part, dense)
        parts.append(part)
    if self_attention:
        utils.fuse_linear(spec.linear[0], parts)
    else:
        utils.fuse_linear(spec.linear[0], parts[:1])
        utils.fuse_linear(spec.linear[1], parts[1:])
    set_linear(spec.linear[-1], attention.output_dense)
    set_layer_norm(spec.layer_norm, norm)


def set_feed_forward(spec, inner, outer, norm):
    """A `FeedForwardSpec` from the two `Dense` layers and the sub-layer's layer norm."""
    set_linear(spec.linear_0, inner)
    set_linear(spec.linear_1, outer)
    set_layer_norm(spec.layer_norm, norm)


def position_encodings(dim, count):
    """`(count, dim)` float32: this library's sinusoids of positions 0 … count − 1."""
    from tf_outheads.layers.attention import sinusoidal_position_encoding

    return to_numpy(sinusoidal_position_encoding(np.arange(count, dtype="int32"), dim))


def _checked_quantization(quantization):
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(f"`quantization` must be None or one of {QUANTIZATIONS}. "
                         f"Received: quantization={quantization!r}")
    return quantization


def _checked_vocabulary(tokenizer, size, side):
    pieces = tokenizer.vocabulary()
    if len(pieces) != size:
        raise ValueError(f"The {side} tokenizer has {len(pieces)} pieces and the model's "
                         f"{side} vocabulary {size}: they do not belong together. "
                         f"Received: {side}_tokenizer={tokenizer!r}")
    return pieces


def ctranslate2_spec(model, source_tokenizer, target_tokenizer,
                     max_positions=DEFAULT_MAX_POSITIONS):
    """`(spec, linear_scores)`: the `ctranslate2.specs.TransformerSpec` of `model` with its
    head's linear form (`linear_scores`) as the output projection and the tokenizers'
    pieces as vocabularies; not yet optimized or saved.

    Raises:
        ValueError: naming why, for a model or head CTranslate2 cannot run, or
            tokenizers that do not match the model.
        ImportError: CTranslate2 is not installed.
    """
    import_ctranslate2()
    if isinstance(max_positions, bool) or not isinstance(max_positions, int) or \
            max_positions < 1:
        raise ValueError("`max_positions` must be a positive int. "
                         f"Received: max_positions={max_positions!r}")
    source = _checked_vocabulary(source_tokenizer, model.source_vocabulary_size, "source")
    target = _checked_vocabulary(target_tokenizer, model.target_vocabulary_size, "target")
    linear_scores = getattr(model.head, "linear_scores", None)
    if linear_scores is None:
        raise ValueError(f"Cannot export to CTranslate2: the head {type(model.head).__name__} "
                         "has no linear form (`linear_scores`), and CTranslate2's decoder "
                         "ends with one linear layer")
    try:
        linear = linear_scores()
    except ValueError as error:
        raise ValueError(f"Cannot export to CTranslate2: {error}") from error
    try:
        spec = model.ctranslate2_backbone(max_positions)
    except NotImplementedError as error:
        raise ValueError(f"Cannot export to CTranslate2: {error}") from error
    spec.decoder.projection.weight = linear.weight
    spec.decoder.projection.bias = linear.bias
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = UNK_PIECE, BOS_PIECE, EOS_PIECE
    config.decoder_start_token = BOS_PIECE  # the decoder is fed <s> first
    config.add_source_bos, config.add_source_eos = False, True  # sources end with </s>
    return spec, linear


def to_ctranslate2(model, source_tokenizer, target_tokenizer, output, quantization=None,
                   max_positions=DEFAULT_MAX_POSITIONS, decode=None):
    """Write `model` as a CTranslate2 model directory (see the module docstring).

    Args:
        model: a built `Seq2SeqModel` whose `ctranslate2_backbone` gives a spec.
        source_tokenizer, target_tokenizer: the run's `SubwordTokenizer`s.
        output: str or path-like, the directory; written whole, then renamed into
            place (`tf_outheads.export.atomic`); an older CTranslate2 export there
            is replaced, anything else refused before anything is written.
        quantization: `None` (float32) or one of `QUANTIZATIONS`: CTranslate2's
            weight type (`int8` is its fast CPU path).
        max_positions: int, the longest source or output (in pieces) the model
            takes: the position encodings written. Defaults to 1024.
        decode: dict or `None`, decoding defaults recorded for
            `CTranslate2Translator` (`DecodeOptions` names).

    Returns:
        str, `output`.

    Raises:
        ValueError: the model, head, quantization or tokenizers cannot go there,
            naming why (nothing is written).
        FileExistsError: `output` is a directory an export would not replace.
        ImportError: CTranslate2 is not installed.
    """
    ctranslate2 = import_ctranslate2()
    quantization = _checked_quantization(quantization)
    check_export_directory(output, CTRANSLATE2)
    spec, linear = ctranslate2_spec(model, source_tokenizer, target_tokenizer, max_positions)
    spec.validate()
    spec.optimize(quantization=quantization)
    metadata = {
        "format": 1,
        "ctranslate2_version": ctranslate2.__version__,
        "quantization": quantization or "float32",
        "model": type(model).__name__,
        "head": type(model.head).__name__,
        "output_layer": linear.note,
        # True: CTranslate2's scores are the head's (every search); False: greedy only.
        "exact_scores": bool(linear.exact),
        "max_positions": max_positions,
        "source_tokenizer": {"file": SOURCE_TOKENIZER_FILE,
                             "fingerprint": source_tokenizer.fingerprint},
        "target_tokenizer": {"file": TARGET_TOKENIZER_FILE,
                             "fingerprint": target_tokenizer.fingerprint},
        "decode": dict(decode or {}),
    }

    def write(directory):
        spec.save(directory)
        for name, tokenizer in ((SOURCE_TOKENIZER_FILE, source_tokenizer),
                                (TARGET_TOKENIZER_FILE, target_tokenizer)):
            with open(os.path.join(directory, name), "wb") as stream:
                stream.write(tokenizer.model_proto)
        with open(os.path.join(directory, METADATA_FILE), "w", encoding="utf-8") as stream:
            json.dump(metadata, stream, indent=2, sort_keys=True)
            stream.write("\n")

    return replace_directory(output, write, CTRANSLATE2)


__all__ = ["DEFAULT_MAX_POSITIONS", "METADATA_FILE", "QUANTIZATIONS", "ctranslate2_spec",
           "import_ctranslate2", "position_encodings", "set_attention", "set_feed_forward",
           "set_layer_norm", "set_linear", "to_ctranslate2"]
