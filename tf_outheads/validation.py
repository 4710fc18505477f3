"""Argument checks shared by the library's constructors."""

import numbers


def positive_int(name, value):
    """`int(value)` if `value` is an int >= 1 (not a bool), else a `ValueError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    return int(value)
