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
