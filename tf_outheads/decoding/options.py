"""Checks of the decoding options that `Translator` and the export share.

A value a search cannot use is refused with a `ValueError` that names the
option and the value received, before anything is decoded: a NaN length
penalty, for one, would otherwise make every score NaN and every output empty.
"""

import math
import numbers

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


def check_block_repeats(block_repeats):
    """`block_repeats` if it is a bool (`tf_outheads.decoding.constraints`).

    Raises:
        ValueError: naming `block_repeats` and the value received (an int or a
            string is refused: `"False"` would read as on).
    """
    if not isinstance(block_repeats, bool):
        raise ValueError("`block_repeats` must be a bool (True or False). "
                         f"Received: block_repeats={block_repeats!r}")
    return block_repeats


def check_length_limits(max_length_ratio, max_length_offset, max_source_length):
    """Check the output and source length limits of `Translator` and the export.

    Args:
        max_length_ratio: number, finite and > 0.
        max_length_offset: int >= 0.
        max_source_length: int >= 2 (one piece and EOS).

    Returns:
        `(float(max_length_ratio), int(max_length_offset), int(max_source_length))`.

    Raises:
        ValueError: naming the first option out of range and its value.
    """
    ratio = _real("max_length_ratio", max_length_ratio)
    if not (math.isfinite(ratio) and ratio > 0):
        raise ValueError("`max_length_ratio` must be a finite number > 0. "
                         f"Received: max_length_ratio={max_length_ratio!r}")
    return (ratio, int_at_least("max_length_offset", max_length_offset, 0),
            int_at_least("max_source_length", max_source_length, 2,
                         "an int >= 2 (one piece and EOS)"))


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
    topk = 0 if sampling_topk is None else int_at_least(
        "sampling_topk", sampling_topk, 0, "an int >= 0 (0: the whole vocabulary)")
    topp = 1.0 if sampling_topp is None else _real("sampling_topp", sampling_topp)
    if not (math.isfinite(topp) and 0.0 < topp <= 1.0):
        raise ValueError("`sampling_topp` must be a number in (0, 1]. "
                         f"Received: sampling_topp={sampling_topp!r}")
    temperature = (1.0 if sampling_temperature is None
                   else _real("sampling_temperature", sampling_temperature))
    if not (math.isfinite(temperature) and temperature > 0.0):
        raise ValueError("`sampling_temperature` must be a finite number > 0. "
                         f"Received: sampling_temperature={sampling_temperature!r}")
    if beam_size != 1:
        raise ValueError("Sampling draws one piece at a time: it needs `beam_size=1`. "
                         f"Received: beam_size={beam_size} with sampling options")
    return {"topk": topk, "topp": topp, "temperature": temperature}


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
