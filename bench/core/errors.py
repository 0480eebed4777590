"""One exception type for every user-facing failure: its message is the one line we print."""


class KitError(Exception):
    """Bad input or an unusable host. `str(err)` is a single line that says what to do."""
