"""Deprecated names of the attention API (issue 24), kept for one release."""

import warnings

REMOVED_IN = "the next release"


def warn_deprecated(old, new, stacklevel=3):
    warnings.warn(
        f"{old} is deprecated and will be removed in {REMOVED_IN}; use {new}.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed_argument(owner, old_name, old_value, new_name, new_value, stacklevel=4):
    """The value of `new_name`, taking a deprecated `old_name` (with a warning).

    Raises:
        ValueError: both names were given.
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ValueError(
            f"{owner} got both `{new_name}` and its deprecated name `{old_name}`. "
            f"Pass only `{new_name}`."
        )
    warn_deprecated(f"`{owner}({old_name}=...)`", f"`{new_name}=`", stacklevel=stacklevel)
    return old_value


def padding_mask_argument(owner, name, value, keras_mask, old_name, old_value):
    """The padding mask a call uses: its argument `name`'s `value`; else the
    value of the argument's deprecated name `old_name` (with a warning, as
    `renamed_argument`); else `keras_mask`, the mask that Keras fills from the
    masked sequence's input (`mask`, `<input>_mask`)."""
    value = renamed_argument(owner, old_name, old_value, name, value, stacklevel=5)
    return keras_mask if value is None else value


def renamed_method(old_name, new_name):
    """A deprecated alias of method `new_name` that warns once per call."""

    def alias(self, *args, **kwargs):
        warn_deprecated(
            f"`{type(self).__name__}.{old_name}`",
            f"`{type(self).__name__}.{new_name}`",
        )
        return getattr(self, new_name)(*args, **kwargs)

    alias.__name__ = old_name
    alias.__doc__ = f"Deprecated alias of `{new_name}` (removed in {REMOVED_IN})."
    return alias


