"""The schema's building blocks: `setting` (a field: default, doc, checks), `ConfigError`,
and the coercion and checks of a value against its field (`check_value`).

`tf_outheads_zoo.config` defines the sections with them.
"""

import copy
import dataclasses
import difflib
import types
import typing

SAME_AS_DEFAULT = object()  # `legacy` unset: a stored file without the key gets the default


class ConfigError(ValueError):
    """A setting the schema refuses: unknown key, wrong type, value not among the choices."""


def setting(default, doc, *, legacy=SAME_AS_DEFAULT, choices=None, keys=None, check=None):
    """A schema field: its default, its one-line doc and its checks.

    Args:
        default: the value when nothing sets the key (copied for lists and dicts).
        doc: str, one line: what the key does (docs/presets.md prints it).
        legacy: the value for a stored `run.json` (`preset.json`) written before the key
            existed (what the code did without it). Defaults to `default`.
        choices: tuple of the allowed values, a callable returning it (a registry
            read when a value is checked), or `None`.
        keys: tuple of the keys a dict value may have, or `None` (any).
        check: callable `(value, dotted)` that raises `ConfigError` for a value
            of the right type but the wrong shape, or `None`.
    """
    metadata = {"doc": doc, "legacy": legacy, "choices": choices, "keys": keys,
                "check": check}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def refuse_unknown(values, allowed, where, noun="key", listing="Valid keys"):
    """`ConfigError` naming `where` for the first key of the mapping `values` that is not
    in `allowed`, with the closest allowed one and the list."""
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        close = difflib.get_close_matches(unknown[0], allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "."
        raise ConfigError(f"{where}: unknown {noun} {unknown[0]!r}{hint} {listing}: "
                          f"{', '.join(allowed)}. Received: {unknown[0]}="
                          f"{values[unknown[0]]!r}")


def field_choices(field):
    """The allowed values of `field` (its `choices`, called if callable), or `None`."""
    choices = field.metadata["choices"]
    return tuple(choices()) if callable(choices) else choices


def check_share(value, dotted):
    """`check` of a share: a number in [0, 1]."""
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{dotted} must be between 0 and 1. Received: {dotted}={value!r}")


def check_positive(value, dotted):
    """`check` of a limit that must be above 0."""
    if not value > 0:
        raise ConfigError(f"{dotted} must be above 0 (or None). Received: {dotted}={value!r}")


def check_at_least_one(value, dotted):
    """`check` of a step count: 0 and negatives are refused (`None`, where the key takes
    it, means no budget)."""
    if value < 1:
        none = " (omit it, or None, for no step budget)" if dotted.endswith("max_steps") else ""
        raise ConfigError(f"{dotted} must be >= 1{none}. Received: {dotted}={value!r}")


def at_least(minimum):
    """`check` of a count or size: an int `>= minimum`."""
    def check(value, dotted):
        if value < minimum:
            raise ConfigError(f"{dotted} must be >= {minimum}. Received: {dotted}={value!r}")
    return check


def above(minimum):
    """`check` of a number that must exceed `minimum` (a rate, a ratio, a norm)."""
    def check(value, dotted):
        if not value > minimum:  # NaN too
            raise ConfigError(f"{dotted} must be above {minimum}. Received: {dotted}={value!r}")
    return check


def check_probability(value, dotted):
    """`check` of a dropout rate or a smoothing share: in [0, 1)."""
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"{dotted} must be in [0, 1). Received: {dotted}={value!r}")


# `SampledSoftmaxLoss`'s modes a zoo run can use (`tf_outheads.losses.sampled_softmax.MODES`
# but 'unigram', whose counts a run does not give; not imported: no TensorFlow here).
SAMPLED_SOFTMAX_MODES = ("batch", "uniform", "log_uniform")


def check_sampled_softmax(value, dotted):
    """`check` of `train.sampled_softmax`: `SampledSoftmaxLoss`'s checks of its mode,
    fraction (in (0, 1]) and sample size (a positive int), naming `dotted`."""
    mode = value.get("mode", "batch")
    fraction, num_sampled = value.get("fraction"), value.get("num_sampled")
    received = f"Received: {dotted}={value!r}"
    if mode == "unigram":
        raise ConfigError(f"{dotted}.mode 'unigram' needs unigram counts, which a zoo run does "
                          f"not give: use 'batch', 'uniform' or 'log_uniform'. {received}")
    if mode not in SAMPLED_SOFTMAX_MODES:
        raise ConfigError(f"{dotted}.mode must be one of "
                          f"{', '.join(map(repr, SAMPLED_SOFTMAX_MODES))}. {received}")
    if mode == "batch" and num_sampled is not None:
        raise ConfigError(f"{dotted}: mode 'batch' takes a fraction (p of Pappas et al. Table "
                          f"4), not num_sampled. {received}")
    if mode != "batch" and (fraction is None) == (num_sampled is None):
        raise ConfigError(f"{dotted}: mode {mode!r} takes exactly one of fraction and "
                          f"num_sampled. {received}")
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(
            fraction, (int, float)) or not 0.0 < fraction <= 1.0):
        raise ConfigError(f"{dotted}.fraction must be in (0, 1]. {received}")
    if num_sampled is not None and (isinstance(num_sampled, bool) or not isinstance(
            num_sampled, int) or num_sampled < 1):
        raise ConfigError(f"{dotted}.num_sampled must be an int >= 1. {received}")


def type_name(annotation):
    if isinstance(annotation, types.UnionType):
        return " or ".join(type_name(arg) for arg in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if typing.get_origin(annotation) is list:
        return f"list of {type_name(typing.get_args(annotation)[0])}"
    return annotation.__name__


def coerce(value, annotation):
    """`value` as `annotation` (int, float, bool, str, dict, None, `list[X]`, unions), or
    raises `TypeError`. Numbers written as strings (YAML reads `1e-3` as one) and
    `true`/`false` are converted; an integral float is an int."""
    if isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            try:
                return coerce(value, arg)
            except TypeError:
                pass
        raise TypeError
    if annotation is type(None):
        if value is None:
            return None
        raise TypeError
    if typing.get_origin(annotation) is list:
        if not isinstance(value, (list, tuple)):
            raise TypeError
        return [coerce(item, typing.get_args(annotation)[0]) for item in value]
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise TypeError
    if annotation is int:
        if isinstance(value, str):
            try:
                value = float(value) if value.strip() else value
            except ValueError:
                raise TypeError from None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError
    if annotation is float:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise TypeError from None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TypeError
    if annotation is str:
        if isinstance(value, str):
            return value
        raise TypeError
    if annotation is dict:
        if isinstance(value, dict):
            return copy.deepcopy(value)
        raise TypeError
    raise TypeError


def check_value(field, value, dotted, source):
    """The value of `field` (dotted name `dotted`) as its type, checked; `ConfigError` else."""
    try:
        value = coerce(value, field.type)
    except TypeError:
        raise ConfigError(f"{source}: {dotted} must be {type_name(field.type)}. "
                          f"Received: {dotted}={value!r}") from None
    choices = field_choices(field)
    if choices is not None and value is not None and value not in choices:
        raise ConfigError(f"{source}: {dotted} must be one of {', '.join(map(repr, choices))}. "
                          f"Received: {dotted}={value!r}")
    allowed = field.metadata["keys"]
    if allowed is not None and isinstance(value, dict):
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise ConfigError(f"{source}: {dotted} takes the keys {', '.join(allowed)}; "
                              f"{', '.join(unknown)} is not one of them. "
                              f"Received: {dotted}={value!r}")
        if "class_name" in allowed and not isinstance(value.get("class_name"), str):
            raise ConfigError(f"{source}: {dotted} needs a 'class_name'. "
                              f"Received: {dotted}={value!r}")
    check = field.metadata.get("check")
    if check is not None and value is not None:
        try:
            check(value, dotted)
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None
    return value


# Keys of data.target_vectors, and the values a run stored without them meant.
TARGET_VECTOR_KEYS = ("dim", "epochs", "path", "model", "center", "remove_components", "eos")
TARGET_VECTOR_DEFAULTS = {"dim": 300, "epochs": 5, "path": None, "model": "fasttext",
                          "center": False, "remove_components": 0, "eos": "far"}


def check_subword_sampling(value, dotted):
    """`check` of `data.subword_sampling`: `SubwordSampling`'s own checks, as a
    `ConfigError` naming `dotted`."""
    if value is None:
        return
    from tf_outheads.data.subword_sampling import SubwordSampling

    try:
        SubwordSampling.from_config(value)
    except ValueError as error:
        raise ConfigError(f"{dotted}: {error}") from None


def check_target_vectors(value, dotted):
    """`check` of `data.target_vectors`: each key's type and range.

    Raises:
        ConfigError: naming `dotted.key` and the value received.
    """
    if value is None:
        return
    for key in ("dim", "epochs"):
        if key in value and (isinstance(value[key], bool) or not isinstance(value[key], int)
                             or value[key] < 1):
            raise ConfigError(f"{dotted}.{key} must be an int >= 1. "
                              f"Received: {dotted}.{key}={value[key]!r}")
    if value.get("path") is not None and not isinstance(value["path"], str):
        raise ConfigError(f"{dotted}.path must be a file path or None. "
                          f"Received: {dotted}.path={value['path']!r}")
    choices = {"model": ("fasttext", "word2vec"), "eos": ("far", "file", "negative_period")}
    for key, allowed in choices.items():
        if key in value and value[key] not in allowed:
            raise ConfigError(f"{dotted}.{key} must be one of {', '.join(map(repr, allowed))}. "
                              f"Received: {dotted}.{key}={value[key]!r}")
    if "center" in value and not isinstance(value["center"], bool):
        raise ConfigError(f"{dotted}.center must be true or false. "
                          f"Received: {dotted}.center={value['center']!r}")
    components = value.get("remove_components", 0)
    if isinstance(components, bool) or not isinstance(components, int) or components < 0:
        raise ConfigError(f"{dotted}.remove_components must be an int >= 0. "
                          f"Received: {dotted}.remove_components={components!r}")
    if components and not value.get("center", False):
        raise ConfigError(f"{dotted}.remove_components removes principal components of centred "
                          f"vectors: it needs {dotted}.center: true. Received: "
                          f"{dotted}.remove_components={components!r}, "
                          f"{dotted}.center={value.get('center', False)!r}")


def check_eos_bias_setting(value, dotted):
    """`check` of `decode.eos_bias`: finite, in [-100, 100]
    (`tf_outheads.decoding.options.MAX_EOS_BIAS`, not imported: no TensorFlow here).

    Raises:
        ConfigError: naming `dotted` and the value received (NaN and infinities too).
    """
    if not abs(value) <= 100.0:
        raise ConfigError(f"{dotted} must be a finite number in [-100, 100]. "
                          f"Received: {dotted}={value!r}")
