"""Argument checks shared by the layers: each error names the argument,
what was received and what was expected."""

import numbers


def check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer. Received: {name}={value!r}")
    return int(value)


def check_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"{name} must be one of {sorted(choices)}. Received: {name}={value!r}"
        )
    return value
