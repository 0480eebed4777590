"""The one rule for a value read from a job dir or a result dir that a command is built from.

Job dirs (`manifest.json`) and result dirs (rows, `system.json`) come from other users and other
machines. Nothing read from them is code, and nothing becomes an argument, a bind or a line of a
script except as a field with its own allowlist, checked here (`check`) wherever it is spliced:

    rule     what the value is spliced as                      what it may hold
    arg      ONE argv element (`--data-dir X`, `--out X`;      a str of 1..4096 printable characters
             shlex-quoted where a script or a command is        (no line break, control or bidi
             written or shown)                                  character), not starting with `-`
    bind     the source of an Apptainer `--bind` entry          arg's, absolute, and no `,` or `:` (the
             (`SRC:/data:ro,...`)                               bind list's separators: `/x:/opt/cnn-bench,
                                                                /d` would mount a planted dir over the
                                                                image's kit code)
    sbatch   a path in an `#SBATCH` line (not shell-quoted:     arg's, and no white space, quote,
             sbatch splits it at white space)                   backslash or `%` (a Slurm filename pattern)
    image    an image reference (an env value of the task)      Docker's letters: `A-Za-z0-9._/:@+-`,
                                                                1..500, a letter or digit first

Who calls it: host/cluster/jobdir.py (`plan` before it writes a job dir, `load` before anything
reads one), host/cluster/slurm.py (every value of the job dir an sbatch script holds), and
host/verify.py + host/export.py (the `--out` and `--data-dir` of a row's command, from which the
command is rebuilt with the spec of cell.json: a row's own command is never shown or trusted).
A value that fails is one line (KitError) naming the field and the reason; nothing is written.
"""

from __future__ import annotations

import re
from typing import Literal

from bench.core.errors import KitError
from bench.core.schema import show

Rule = Literal["arg", "bind", "sbatch", "image"]
MAX_PATH = 4096
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,499}")
_SBATCH_BAD = re.compile(r"[\s\"'\\%]")


def _why(value: object, rule: Rule) -> str | None:
    """Why VALUE cannot be spliced under RULE (None: it can)."""
    if not isinstance(value, str):
        return "not a string"
    if rule == "image":
        ok = _IMAGE.fullmatch(value)
        return None if ok else "an image reference holds only letters, digits and ._/:@+- (a letter or digit first)"
    if not 1 <= len(value) <= MAX_PATH:
        return f"a path of 1 to {MAX_PATH} characters"
    if not value.isprintable():
        return "a path holds no line break, control or bidi character"
    if value.startswith("-"):
        return "a path does not start with '-' (it would read as an option)"
    if rule == "bind":
        if not value.startswith("/"):
            return "an absolute path (it is mounted into the container)"
        if "," in value or ":" in value:
            return "a path holds no ',' or ':' (they separate an Apptainer bind list: more mounts)"
    if rule == "sbatch" and _SBATCH_BAD.search(value):
        return "a path in an #SBATCH line holds no white space, quote, backslash or '%'"
    return None


def check(value: object, what: str, rule: Rule = "arg") -> str:
    """VALUE (read from a job dir or a result dir; WHAT names where) as it may be spliced under
    RULE (the table above); KitError, one line, otherwise."""
    why = _why(value, rule)
    if why is not None:
        raise KitError(f"{what} {show(value, 120)} cannot go into a command: {why}")
    assert isinstance(value, str)
    return value


def ok(value: object, rule: Rule = "arg") -> bool:
    """Whether VALUE passes RULE (`check` without the error)."""
    return _why(value, rule) is None
