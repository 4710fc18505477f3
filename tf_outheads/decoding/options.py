"""`DecodeOptions`: every decoding option, checked once, for every host of a search.

`Translator`, `TranslationGraph`, the exported SavedModel (`TranslatorModule`) and the
command line take one frozen `DecodeOptions` whole. Each field is one option, and its
metadata says all that the hosts need to know about it, so that adding an option
means adding a field (and the code that uses it, and one command-line flag):

- `check`: its check, run once by `DecodeOptions.__post_init__`: a value a search
  cannot use is refused with a `ValueError` that names the option and the value
  received, before anything is decoded (a NaN length penalty, for one, would
  otherwise make every score NaN and every output empty);
- `request`: a `RequestInput` when the SavedModel's `translate` signature takes
  the option per request (its dtype, the value meaning "the export's default",
  and the graph's check of the values; `tf_outheads.decoding.requests`), `None`
  when it is fixed at export;
- `traced`: whether a search is traced with the value (`False`: `batch_size`
  and `seed`, which a `Translator` may change between calls without a trace);
- `exported`: whether a SavedModel uses it (`False`: `batch_size`; a request is
  one batch).

    options = DecodeOptions(beam_size=5, length_penalty=0.6)
    Translator(model, source_tokenizer, target_tokenizer, options=options)
    dataclasses.replace(options, num_hypotheses=3)  # checked again, once
"""

import dataclasses
import math
import numbers
from typing import Callable, NamedTuple, Optional

import tensorflow as tf

from tf_outheads.ops.quantize import QUANTIZATION_MODES
from tf_outheads.validation import int_at_least

# Largest GNMT α accepted. The length penalty ((5 + |Y|) / 6) ** α of a
# 400-token output (the default limit for a 256-piece source) passes float32's
# largest value (3.4e38) near α = 21, and then every normalised score is 0;
# α = 10 stays finite for outputs up to 43,000 tokens. Useful values lie in
# [0, 1] (Wu et al. 2016 tune α in [0.2, 1]).
MAX_LENGTH_PENALTY = 10.0
# Largest |eos_bias| accepted. A step's score is a log-probability (a few nats, tens
# for unlikely pieces), a cosine in [-1, 1] or a vMF log-density: a bias of 100 already
# makes EOS always (or never) the best piece; beyond it only float32 rounding grows
# (the bias is added to, then removed from, each ended hypothesis' score).
MAX_EOS_BIAS = 100.0
# The options any of which turns sampling on (`check_sampling`).
SAMPLING_OPTIONS = ("sampling_topk", "sampling_topp", "sampling_temperature")


def _real(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"`{name}` must be a number. Received: {name}={value!r}")
    return float(value)


def check_length_penalty(length_penalty):
    """`float(length_penalty)` if it is a finite GNMT α in `[0, MAX_LENGTH_PENALTY]`.

    Args:
        length_penalty: number, the GNMT α of the beam search.

    Returns:
        float, the value.

    Raises:
        ValueError: `length_penalty` is not a number, is NaN or infinite,
            negative, or above `MAX_LENGTH_PENALTY` (10).

    Example:

    ```python
    from tf_outheads.decoding.options import check_length_penalty
    check_length_penalty(0.6)  # 0.6
    check_length_penalty(float("nan"))  # ValueError: ... Received: length_penalty=nan
    ```
    """
    value = _real("length_penalty", length_penalty)
    if not (math.isfinite(value) and 0.0 <= value <= MAX_LENGTH_PENALTY):
        raise ValueError(
            f"`length_penalty` must be a finite number in [0, {MAX_LENGTH_PENALTY:g}]. "
            f"Received: length_penalty={length_penalty!r}")
    return value


def check_eos_bias(eos_bias):
    """`float(eos_bias)` if it is a finite number in `[-MAX_EOS_BIAS, MAX_EOS_BIAS]`.

    Args:
        eos_bias: number, added to EOS's score at every step
            (`tf_outheads.decoding.constraints`).

    Returns:
        float, the value.

    Raises:
        ValueError: `eos_bias` is not a number, is NaN or infinite, or its size is
            above `MAX_EOS_BIAS` (100).
    """
    value = _real("eos_bias", eos_bias)
    if not (math.isfinite(value) and abs(value) <= MAX_EOS_BIAS):
        raise ValueError(
            f"`eos_bias` must be a finite number in [-{MAX_EOS_BIAS:g}, {MAX_EOS_BIAS:g}]. "
            f"Received: eos_bias={eos_bias!r}")
    return value


def check_flag(name, value):
    """`value` if it is a bool: the check of every on/off option (`block_repeats`,
    `replace_unk`, `with_alignments`).

    Raises:
        ValueError: naming the option and the value received (an int or a string is
            refused: `"False"` would read as on).
    """
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be a bool (True or False). Received: {name}={value!r}")
    return value


def check_block_repeats(block_repeats):
    """`block_repeats` if it is a bool (`tf_outheads.decoding.constraints`; `check_flag`)."""
    return check_flag("block_repeats", block_repeats)


def _check_ratio(max_length_ratio):
    ratio = _real("max_length_ratio", max_length_ratio)
    if not (math.isfinite(ratio) and ratio > 0):
        raise ValueError("`max_length_ratio` must be a finite number > 0. "
                         f"Received: max_length_ratio={max_length_ratio!r}")
    return ratio


def _check_quantize(quantize):
    if quantize not in QUANTIZATION_MODES:
        raise ValueError(f"`quantize` must be one of {QUANTIZATION_MODES}. "
                         f"Received: quantize={quantize!r}")
    return quantize


def check_num_hypotheses(num_hypotheses, beam_size):
    """`int(num_hypotheses)` if it is an int in `[1, beam_size]`: a beam of k keeps k
    hypotheses, so no more can be returned.

    Raises:
        ValueError: naming `num_hypotheses`, the beam size and the value received.
    """
    value = int_at_least("num_hypotheses", num_hypotheses, 1)
    if value > beam_size:
        raise ValueError(f"`num_hypotheses` must be at most `beam_size` ({beam_size}): a beam "
                         f"of {beam_size} keeps {beam_size} hypotheses. "
                         f"Received: num_hypotheses={num_hypotheses}")
    return value


def check_sampling(sampling_topk=None, sampling_topp=None, sampling_temperature=None,
                   beam_size=1):
    """The sampling options as `{"topk", "topp", "temperature"}`, or `None` when none is
    given (the search takes the arg-max).

    Any option given turns sampling on; the others take their neutral values (k = 0:
    the whole vocabulary; p = 1: no nucleus cut; T = 1: the model's distribution).

    Args:
        sampling_topk: int >= 0 or `None`. Draw from the k most probable pieces (0:
            from all).
        sampling_topp: float in (0, 1] or `None`. Draw from the smallest set of pieces
            holding probability p (the nucleus).
        sampling_temperature: float, finite and > 0, or `None`. Divides the
            log-probabilities before the cuts (< 1 sharpens, > 1 flattens).
        beam_size: int, the search's width: sampling draws one piece at a time, so it
            needs 1.

    Raises:
        ValueError: naming the option out of range and its value, or `beam_size`.
    """
    if sampling_topk is None and sampling_topp is None and sampling_temperature is None:
        return None
    topk = 0 if sampling_topk is None else _check_topk(sampling_topk)
    topp = 1.0 if sampling_topp is None else _check_topp(sampling_topp)
    temperature = (1.0 if sampling_temperature is None
                   else _check_temperature(sampling_temperature))
    if beam_size != 1:
        raise ValueError("Sampling draws one piece at a time: it needs `beam_size=1`. "
                         f"Received: beam_size={beam_size} with sampling options")
    return {"topk": topk, "topp": topp, "temperature": temperature}


def _check_topk(sampling_topk):
    return int_at_least("sampling_topk", sampling_topk, 0,
                        "an int >= 0 (0: the whole vocabulary)")


def _check_topp(sampling_topp):
    topp = _real("sampling_topp", sampling_topp)
    if not (math.isfinite(topp) and 0.0 < topp <= 1.0):
        raise ValueError("`sampling_topp` must be a number in (0, 1]. "
                         f"Received: sampling_topp={sampling_topp!r}")
    return topp


def _check_temperature(sampling_temperature):
    temperature = _real("sampling_temperature", sampling_temperature)
    if not (math.isfinite(temperature) and temperature > 0.0):
        raise ValueError("`sampling_temperature` must be a finite number > 0. "
                         f"Received: sampling_temperature={sampling_temperature!r}")
    return temperature


def check_seed(seed):
    """`int(seed)` if it is an int in `[0, 2**63)`, or `None` (a fresh seed per call).

    Raises:
        ValueError: naming `seed` and the value received.
    """
    if seed is None:
        return None
    value = int_at_least("seed", seed, 0)
    if value >= 1 << 63:
        raise ValueError(f"`seed` must be below 2**63. Received: seed={seed}")
    return value


class RequestInput(NamedTuple):
    """How the exported `translate` signature carries an option: a `(None,)` tensor of
    one value for the whole request or one per source (`tf_outheads.decoding.requests`).

    Args:
        dtype: `tf.DType` of the input.
        not_set: the value that means "the export's default", recorded as the
            input's default in the SignatureDef (a gRPC request may leave it out).
        unset: function of the values `(None,)` → bool `(None,)`: those that take the
            export's default (any negative value, by default).
        valid: `None`, or a function of the values → bool `(None,)`: those the
            search can use (values that are `unset` included). Any other fails the
            request with an `InvalidArgumentError` "`name` must be {requirement}.
            Received: name=[...]".
        requirement: str, what `valid` asks for, in that message.
    """

    dtype: tf.DType
    not_set: float = -1
    unset: Callable = lambda values: values < 0
    valid: Optional[Callable] = None
    requirement: str = ""


def option(default, check, request=None, traced=True, exported=True):
    """A `DecodeOptions` field: `default`, and the metadata the hosts read (the module
    docstring). `check(name, value)` returns the value to keep, or raises `ValueError`."""
    return dataclasses.field(default=default, metadata={
        "check": check, "request": request, "traced": traced, "exported": exported})


def _count(name, value):
    return int_at_least(name, value, 1)


def _named(check):
    """`check(value)` as a field's `check(name, value)`."""
    return lambda name, value: check(value)


def _optional(check):
    """`_named(check)` that lets `None` (not set) through."""
    return lambda name, value: None if value is None else check(value)


# A size: 0 too means the export's default.
SIZE = RequestInput(tf.int32, unset=lambda values: values < 1)
# A flag: -1 not set, 0 off, > 0 on.
FLAG = RequestInput(tf.int32)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """The options of a translation, checked once (`__post_init__`); frozen, so
    one value serves as a cache key, and a change is `dataclasses.replace(options,
    name=value)` (checked again).

    Args:
        beam_size: int >= 1. 1 decodes greedily; more runs
            `tf_outheads.decoding.beam_search`. Defaults to 1.
        length_penalty: float, GNMT α of the beam search, finite, in `[0, 10]`
            (`MAX_LENGTH_PENALTY`). Defaults to 0.0.
        num_hypotheses: int in `[1, beam_size]`, the n-best size. Defaults to 1.
        replace_unk: bool. Write the most-attended source word over every
            `<unk>` the model outputs (`tf_outheads.decoding.replace_unknown_words`;
            the model needs `source_alignments(source_ids, target_in)`). Batches
            without `<unk>` cost nothing extra. Defaults to `False`.
        sampling_topk: int >= 0 or `None`. Sample each piece from the k most
            probable (0: from the whole vocabulary). Defaults to `None`.
        sampling_topp: float in (0, 1] or `None`. Sample from the nucleus: the
            smallest set of pieces holding probability p. Defaults to `None`.
        sampling_temperature: float > 0 or `None`. Sample from the distribution
            with its log-probabilities divided by T. Defaults to `None`. Any
            sampling option turns sampling on (the others neutral: k = 0, p = 1,
            T = 1); it needs `beam_size=1` and a head whose scores are
            log-probabilities (`tf_outheads.decoding.sampling`).
        seed: int in `[0, 2**63)` or `None`. Sampling seed of a call (the source
            at position i draws with `row_seeds(seed, i)`, so a sample depends
            neither on the batch nor on the host); `None`: a fresh one per call.
            Defaults to `None`.
        with_alignments: bool. Also return each hypothesis' alignment (`"i-j"`
            pairs, as fast_align writes them; the model needs
            `source_alignments`). Defaults to `False`.
        eos_bias: float, finite, in `[-100, 100]` (`MAX_EOS_BIAS`). Added to EOS's
            score at every step (`tf_outheads.decoding.constraints`), in the head's
            score unit: < 0 gives longer outputs. Scores returned stay the
            model's. Defaults to 0.0.
        block_repeats: bool. No output piece right after itself (a target prefix
            is still forced as given). Defaults to `False`.
        max_length_ratio: float > 0. Output limit = ratio × (source pieces + EOS)
            + offset, in subword pieces. Defaults to 1.5.
        max_length_offset: int >= 0. Defaults to 10.
        max_source_length: int >= 2. Sources keep their first
            `max_source_length - 1` pieces, then EOS. Defaults to 256.
        batch_size: int >= 1. Sentences per decoding batch of a `Translator`
            (an exported request is one batch). Defaults to 64.
        quantize: `None` or `"int8"`: decode with a quantized copy of the model
            (`tf_outheads.models.quantized_copy`). Defaults to `None`.

    Raises:
        ValueError: an option out of range, named with the value received;
            `num_hypotheses` above `beam_size`; sampling with a beam.
    """

    beam_size: int = option(1, _count, SIZE)
    length_penalty: float = option(0.0, _named(check_length_penalty), RequestInput(
        tf.float32, valid=lambda values: tf.logical_and(tf.math.is_finite(values),
                                                        values <= MAX_LENGTH_PENALTY),
        requirement=f"finite and in [0, {MAX_LENGTH_PENALTY:g}], or negative (-1) for the "
                    "export default"))
    num_hypotheses: int = option(1, _count, SIZE)
    replace_unk: bool = option(False, check_flag, FLAG)
    sampling_topk: Optional[int] = option(None, _optional(_check_topk), RequestInput(
        tf.int32, valid=lambda values: values >= -1,
        requirement=">= 0 (0: the whole vocabulary), or -1 (not set)"))
    sampling_topp: Optional[float] = option(None, _optional(_check_topp), RequestInput(
        tf.float32, valid=lambda values: tf.logical_or(
            tf.equal(values, -1.0), tf.logical_and(values > 0.0, values <= 1.0)),
        requirement="in (0, 1], or -1 (not set)"))
    sampling_temperature: Optional[float] = option(None, _optional(_check_temperature),
                                                   RequestInput(
        tf.float32, valid=lambda values: tf.logical_or(
            tf.equal(values, -1.0), tf.logical_and(tf.math.is_finite(values), values > 0.0)),
        requirement="finite and > 0, or -1 (not set)"))
    # A negative seed in a request: one drawn at random for it.
    seed: Optional[int] = option(None, _named(check_seed), RequestInput(tf.int64),
                                 traced=False)
    with_alignments: bool = option(False, check_flag, FLAG)
    # NaN: "not set", for a float whose negative values are real biases.
    eos_bias: float = option(0.0, _named(check_eos_bias), RequestInput(
        tf.float32, not_set=float("nan"), unset=tf.math.is_nan,
        valid=lambda values: tf.logical_or(tf.math.is_nan(values),
                                           tf.abs(values) <= MAX_EOS_BIAS),
        requirement=f"finite and in [-{MAX_EOS_BIAS:g}, {MAX_EOS_BIAS:g}], or NaN for the "
                    "export default"))
    block_repeats: bool = option(False, check_flag, FLAG)
    max_length_ratio: float = option(1.5, _named(_check_ratio))
    max_length_offset: int = option(10, lambda name, value: int_at_least(name, value, 0))
    max_source_length: int = option(256, lambda name, value: int_at_least(
        name, value, 2, "an int >= 2 (one piece and EOS)"))
    batch_size: int = option(64, _count, traced=False, exported=False)
    quantize: Optional[str] = option(None, _named(_check_quantize))

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = field.metadata["check"](field.name, getattr(self, field.name))
            object.__setattr__(self, field.name, value)
        check_num_hypotheses(self.num_hypotheses, self.beam_size)
        check_sampling(self.sampling_topk, self.sampling_topp, self.sampling_temperature,
                       self.beam_size)

    @property
    def sampling(self):
        """`{"topk", "topp", "temperature"}` of a search that samples, or `None`
        (`check_sampling`)."""
        return check_sampling(self.sampling_topk, self.sampling_topp,
                              self.sampling_temperature, self.beam_size)

    def as_dict(self):
        """`{name: value}` of every option (not copied, unlike `dataclasses.asdict`)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def trace_key(self):
        """The values a search is traced with (the `traced` options): equal keys, one
        search."""
        return (type(self),) + tuple(getattr(self, field.name)
                                     for field in dataclasses.fields(self)
                                     if field.metadata["traced"])

    @classmethod
    def request_inputs(cls):
        """`((name, RequestInput), ...)`: the options a request of the exported
        `translate` signature may set, in field order (its inputs' order)."""
        return tuple((field.name, field.metadata["request"])
                     for field in dataclasses.fields(cls)
                     if field.metadata["request"] is not None)

    @classmethod
    def exported_names(cls):
        """Names of the options a SavedModel uses (its defaults)."""
        return tuple(field.name for field in dataclasses.fields(cls)
                     if field.metadata["exported"])


def decode_options(options=None, **changes):
    """`options` (a `DecodeOptions`; `None`: the defaults) with `changes` (option names
    and values), checked once: the one way `Translator`, `TranslatorModule` and
    `export_translator` read their options.

    Raises:
        TypeError: `options` is not a `DecodeOptions`, or a change names no option.
        ValueError: as `DecodeOptions`.
    """
    if options is not None and not isinstance(options, DecodeOptions):
        raise TypeError("`options` must be a DecodeOptions. "
                        f"Received: options of type {type(options).__name__}")
    kind = type(options) if options is not None else DecodeOptions
    names = {field.name for field in dataclasses.fields(kind)}
    for name in changes:
        if name not in names:
            raise TypeError(f"`{name}` is not a decoding option (a field of "
                            f"{kind.__name__}: {', '.join(sorted(names))}). "
                            f"Received: {name}={changes[name]!r}")
    if options is None:
        return DecodeOptions(**changes)
    return dataclasses.replace(options, **changes) if changes else options


__all__ = ["MAX_EOS_BIAS", "MAX_LENGTH_PENALTY", "SAMPLING_OPTIONS", "DecodeOptions",
           "RequestInput", "check_block_repeats", "check_eos_bias", "check_flag",
           "check_length_penalty",
           "check_num_hypotheses", "check_sampling", "check_seed",
           "decode_options", "option"]
