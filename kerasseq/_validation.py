"""Argument checks shared by every kerasseq module (written once, used everywhere).

Each error names the argument, what was received and what was expected:
`ValueError("num_beams must be >= 1. Received: num_beams=0")`. This module
imports nothing from kerasseq, so layers, data, models, decoding and the
training code can all use it. (The command line's parser, `kerasseq_cli`,
parses text arguments with the standard library only, so that `--help` needs
no TensorFlow; its argparse types check the training options, while search
settings go to `SearchConfig`.)
"""

import numbers


class ArgumentError(ValueError):
    """A `ValueError` about one argument, which it names in `.field`.

    The message says what was wrong and what was expected; `.field` lets a
    caller that set the argument another way (the command line's flags) name
    it its own way without reading the message.
    """

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # pickle / copy: the two constructor arguments
        return type(self), (self.field, str(self))


def is_int(value):
    """True for an integer (a Python or NumPy int), False for a bool or anything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name, value, minimum=1, maximum=None, maximum_name=None):
    """`value` as a Python int, if it is an integer (not a bool) in range.

    Args:
        name: the argument's name, for the message.
        value: what was received.
        minimum: smallest allowed value.
        maximum: largest allowed value, or None.
        maximum_name: how to name the maximum in the message (e.g.
            `"num_beams=4"`), default its value.

    Returns:
        `int(value)`.

    Raises:
        ArgumentError: (a `ValueError`) naming `name`, the received value and
            the expected range; `.field` is `name`.
    """
    if not is_int(value):
        raise ArgumentError(name, f"{name} must be an int >= {minimum}. Received: {name}={value!r}")
    if value < minimum:
        raise ArgumentError(name, f"{name} must be >= {minimum}. Received: {name}={value!r}")
    if maximum is not None and value > maximum:
        bound = f"{maximum_name}={maximum}" if maximum_name else str(maximum)
        raise ArgumentError(name, f"{name} must be <= {bound}. Received: {name}={value!r}")
    return int(value)


def check_positive_int(name, value):
    """`check_int(name, value, minimum=1)`."""
    return check_int(name, value, 1)


def check_rate(name, value):
    """A float in `[0, 1)` (dropout rates, label smoothing)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ArgumentError(name, f"{name} must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


def check_choice(name, value, choices):
    """One of `choices`."""
    if value not in choices:
        raise ArgumentError(
            name, f"{name} must be one of {sorted(choices)}. Received: {name}={value!r}"
        )
    return value
