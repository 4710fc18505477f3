"""Argument checks shared by the library's constructors."""

import numbers


def positive_int(name, value):
    """`int(value)` if `value` is an int >= 1 (not a bool), else a `ValueError` naming `name`."""
    return int_at_least(name, value, 1, "a positive int")


def int_at_least(name, value, minimum, what=None):
    """`int(value)` if `value` is an int >= `minimum` (not a bool), else a `ValueError`
    naming `name` (`what`: how the message describes a valid value)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"`{name}` must be {what or f'an int >= {minimum}'}. "
                         f"Received: {name}={value!r}")
    return int(value)


def spec_class_and_config(spec, base, aliases, argument, kind):
    """`(class, config dict)` of an auxiliary head's spec: `True` (the defaults), a config
    dict of `base`, or `{"class_name", "config"}` naming a registered subclass of `base`
    (or `base` itself by one of `aliases`).

    Raises:
        ValueError: naming `argument`, for any other value or class.
    """
    import keras

    if spec is True:
        spec = {}
    if not isinstance(spec, dict):
        raise ValueError(f"`{argument}` must be None, True, a {base.__name__} config or spec "
                         f"dict, or a {base.__name__}. Received: {argument}={spec!r}")
    if "class_name" not in spec:
        return base, dict(spec)
    cls = keras.saving.get_registered_object(spec["class_name"]) or (
        base if spec["class_name"] in aliases else None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"Unknown {kind} {spec['class_name']!r}. "
                         f"Received: {argument}={spec!r}")
    return cls, dict(spec.get("config", {}))
