"""Error messages on one line (standard library only: the CLI's parser imports it)."""


def first_line(error):
    """The first non-blank line of an exception's message (or its type name)."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__
