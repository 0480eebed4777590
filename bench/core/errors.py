"""One exception type for every user-facing failure: its message is the one line we print."""


class KitError(Exception):
    """Bad input or an unusable host. `str(err)` is a single line that says what to do;
    `exit_code` is what the command exits with (2: bad input; 130: interrupted)."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
