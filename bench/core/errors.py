"""One exception type for every user-facing failure: its message is the one line we print."""


class KitError(Exception):
    """Bad input or an unusable host. `str(err)` is a single line that says what to do;
    `exit_code` is what `python -m bench` exits with (2: bad input; 130: interrupted).
    orchestrate.py (and `cnn-bench`) tell a usage error from a failed run instead: see
    `host_exit_code`."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(KitError):
    """The command line itself is wrong: an unknown name, a malformed or out-of-range value,
    options that do not go together, a path that does not exist or is not what the option needs.
    orchestrate.py exits 2 for it, as click does for the usage errors it finds itself."""


def host_exit_code(err: KitError) -> int:
    """orchestrate.py's exit status for ERR: 2 for a usage error (UsageError), 130 for an
    interrupt, else 1: the command line was fine and the work failed (a download, a build, a
    result dir that cannot be read, a check that does not pass)."""
    if isinstance(err, UsageError):
        return 2
    return 130 if err.exit_code == 130 else 1
