"""`orchestrate.py export DIR... --out bundle.tar.gz`: one file to share a set of results.

The bundle is a gzipped tar with one top folder: the result dir's name when it bundles one dir
(`export results/vm --out results/vm.tar.gz` unpacks to `vm/`), else the file's name. It holds:

    results/<dir name>/...   every result file of each DIR (of a bundle of one dir: results/...):
                             rows.jsonl, rows.csv, cell.json,
                             system.json, log.txt, platforms.json, summaries/ (regular files
                             only: no symlinks, no hidden temp or lock files, no report
                             rendered inside a result dir)
    report/                  the report rendered from exactly these dirs: REPORT.md, the
                             PNGs, table1.csv, tidy.csv and tidy.parquet
    environment/             environment.json (python, platform, host label, the exporting
                             kit's git sha, sha256 of every requirements lock, the lock
                             hashes, images and library versions the rows recorded),
                             pip-freeze.txt (the exporting environment) and requirements/
                             (the checkout's *.in and hash-locked *.txt)
    COMMANDS.md              the export command line, the report command, and each cell's
                             reproduce command (rebuilt from its cell.json, never a row's own:
                             `reproduce`)
    README.md                what is inside and how to check it
    MANIFEST.sha256          sha256 of every other file (`sha256sum -c MANIFEST.sha256`; a name
                             holding a backslash or a line break escaped as sha256sum does)

It is written under a temp name beside --out, fsynced and renamed into place, so no
half-written bundle is ever left; a write that fails (a full or read-only disk, a file-size
limit) is one line naming the file and the cause (host.outdir.cannot_write). Refused in one line
before anything is written: a missing, empty or non-result dir; an --out that is or lies inside
a dir it reads (the bundle would be read back as results); an --out that exists and is not a
bundle the kit wrote (a gzipped tar with one top folder holding MANIFEST.sha256: `is_bundle`),
which is never replaced. The report's manifest (`report/.cnn-bench-report.json`, host/outdir.py)
is bundled, so `report --out <bundle>/report` replaces the bundled report's files and no other.
A file or dir whose name is not UTF-8 is not bundled; README.md names what was left out. Host
side only (no torch, numba or scikit-learn).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.core.errors import KitError, UsageError
from bench.core.resultset import ResultCell, collect_set, shown_name, walk
from bench.core.text import manifest_line, md_code
from bench.core.text import md as md_text

REPO = Path(__file__).resolve().parent.parent
SUFFIXES = (".tar.gz", ".tgz", ".tar")
MAX_BUNDLE_MEMBERS = 1_000_000  # what `is_bundle` reads of an existing --out before it says no


def _top_name(out: Path) -> str:
    name = out.name
    for s in SUFFIXES:
        if name.endswith(s) and len(name) > len(s):
            return name[: -len(s)]
    return name


def is_bundle(path: Path) -> str | None:
    """Why the existing PATH is not a bundle the kit wrote (None: it is one): a gzipped tar whose
    every member lies under one top folder, which holds MANIFEST.sha256. Read as a stream, headers
    only (at most MAX_BUNDLE_MEMBERS), never unpacked."""
    if path.is_symlink():
        return "a symlink"
    if not path.is_file():
        return "not a regular file"
    import zlib

    try:
        with tarfile.open(path, "r|gz") as tar:
            top = None
            for i, m in enumerate(tar):
                if i >= MAX_BUNDLE_MEMBERS:
                    return f"more than {MAX_BUNDLE_MEMBERS:,} members"
                head = m.name.split("/", 1)[0]
                top = top if top is not None else head
                if head != top or head in ("", ".", ".."):
                    return "its members are not under one top folder"
                if m.name == f"{top}/MANIFEST.sha256" and m.isfile():
                    return None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        return f"not a gzipped tar ({type(err).__name__})"
    return "no MANIFEST.sha256 in its top folder"


def check_inputs(dirs: list[Path], out: Path) -> list[ResultCell]:
    """The cells under DIRS; KitError (one line) for anything that would make a bad bundle."""
    return _check(dirs, out)[0]


def _check(dirs: list[Path], out: Path) -> tuple[list[ResultCell], list[str]]:
    """(the cells under DIRS, the skipped lines of reading them); KitError (one line) for anything
    that would make a bad bundle (module docstring), before anything is written."""
    if not dirs:
        raise UsageError("export needs at least one result dir")
    for d in dirs:
        if d.exists() and not d.is_dir():
            raise UsageError(f"{d} is not a directory (expected a result dir: <dir>/<study>/<cell>/rows.jsonl)")
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory: name the bundle file, e.g. {out / 'bundle.tar.gz'}")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: the folder {out.parent} does not exist")
    where = Path(os.path.realpath(out.parent)) / out.name
    for d in dirs:
        r = Path(os.path.realpath(d))
        if where == r or r in where.parents:
            raise UsageError(
                f"--out {shown_name(out)} lies inside {shown_name(d)}, a result dir it bundles: name a file outside the inputs"
            )
    if os.path.lexists(out):
        why = is_bundle(out)
        if why is not None:
            raise UsageError(
                f"--out {shown_name(out)} exists and is not a bundle the kit wrote ({why}): "
                "move it away or choose another --out; only a bundle is replaced"
            )
    rs = collect_set(dirs)  # missing dir / no results under it: KitError
    if not rs.cells:
        raise KitError("no result cells under " + ", ".join(str(d) for d in dirs) + " (only platform notes)")
    return rs.cells, rs.skipped


def _result_files(root: Path, skip: set[Path], not_utf8: list[Path] | None = None) -> list[Path]:
    """Regular files under ROOT, sorted; no symlinks, hidden files, or rendered reports, nothing
    below the depth a result tree is read to (bench.core.resultset.MAX_DEPTH), and no name that
    is not UTF-8 (appended to NOT_UTF8)."""
    files = []
    for h, subdirs, names in walk(root, not_utf8=not_utf8):
        subdirs[:] = [s for s in subdirs if not s.startswith(".") and not (h / s / "REPORT.md").exists()]
        for n in sorted(names):
            p = h / n
            if n.startswith(".") or p.is_symlink() or not p.is_file() or p.resolve() in skip:
                continue
            files.append(p)
    return files


class _Hashing(io.RawIOBase):
    """A file read once, in blocks, hashing exactly the bytes handed on (never held whole)."""

    def __init__(self, fh: io.BufferedReader) -> None:
        self.fh, self.sha = fh, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.sha.update(data)
        return data


def _add_file(tar: tarfile.TarFile, info: Callable[[str, int], tarfile.TarInfo], name: str, path: Path) -> str:
    """Stream PATH into TAR as NAME (its size when opened: a file that grows is cut there, one
    that shrinks is an error); the sha256 of the bytes bundled."""
    with open(path, "rb") as fh:
        src = _Hashing(fh)
        tar.addfile(info(name, os.fstat(fh.fileno()).st_size), src)
        return src.sha.hexdigest()


def _labels(dirs: list[Path]) -> list[str]:
    """A folder name per result dir (its own name; -2, -3 ... where two share one)."""
    seen: dict[str, int] = {}
    out = []
    for d in dirs:
        base = d.resolve().name or "results"
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


@functools.cache  # one environment per process
def _pip_freeze() -> str:
    try:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "freeze", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout
    except (OSError, subprocess.SubprocessError):
        pass
    from importlib import metadata

    return "".join(sorted(f"{d.metadata['Name']}=={d.version}\n" for d in metadata.distributions() if d.metadata["Name"]))


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _venv_lock(locks: dict[str, str]) -> list[str]:
    """The requirements locks scripts/setup.sh installed into the running venv (its stamps)."""
    if Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        return []
    out = []
    for stamp in sorted(Path(sys.prefix).glob(".kit-lock-*")):
        digest = stamp.read_text().strip()
        name = f"requirements/{stamp.name.removeprefix('.kit-lock-')}.txt"
        out.append(f"{name} sha256:{digest}" + ("" if locks.get(name) == digest else " (the lock file has changed since)"))
    return out


def environment(cells: list[ResultCell]) -> dict:
    """What the bundle says about the environments: the exporter's and what the cells recorded."""
    from bench.core.provenance import git_sha, host_label

    locks = {str(p.relative_to(REPO)): _sha256(p) for p in sorted((REPO / "requirements").glob("*.txt")) if p.is_file()}
    rows = [r for c in cells for r in c.rows]

    def seen(key: str) -> list[str]:
        return sorted({str(r.get(key)) for r in rows if r.get(key) is not None})

    libs: dict[str, list[str]] = {}
    for c in cells:
        for k, v in (c.system.get("libraries") or {}).items():
            libs.setdefault(k, [])
            if str(v) not in libs[k]:
                libs[k].append(str(v))
    return {
        "exported_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "exported_by": {
            "host": host_label(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "kit_git_sha": git_sha(),
            "pip_freeze": "environment/pip-freeze.txt",
            "venv_lock": _venv_lock(locks),
        },
        "requirements_locks_sha256": locks,
        "recorded_by_the_rows": {
            "hosts": seen("host"),
            "devices": seen("device"),
            "lock_hash": seen("lock_hash"),
            "image_id": seen("image_id"),
            "runtime": sorted({str(c.system.get("runtime")) for c in cells if c.system.get("runtime")}),
            "python": sorted({str(c.system.get("python")) for c in cells if c.system.get("python")}),
            "kit_git_sha": sorted({str(c.system.get("kit_git_sha")) for c in cells if c.system.get("kit_git_sha")}),
            "libraries": {k: sorted(v) for k, v in sorted(libs.items())},
        },
        "note": "a lock_hash of 'native' means the cell ran in a venv, not an image: its libraries are in its system.json",
    }


def commands_md(cells: list[ResultCell], dirs: list[Path], labels: list[str], argv: list[str]) -> str:
    md = [
        "# Commands",
        "",
        "This bundle was made by:",
        "",
        "```bash",
        " ".join(shlex.quote(a) for a in argv),
        "```",
        "",
        "Re-render its report from the bundled results (in the kit's checkout):",
        "",
        "```bash",
        "python orchestrate.py report "
        + " ".join(f"<bundle>/{_where(lab, labels)}" for lab in labels)
        + " --out <bundle>/report",
        "```",
        "",
        "Each cell's reproduce command, rebuilt from its cell.json (`--out` and `--data-dir` are the",
        f"paths of the machine that ran it, where its rows recorded them; else `--out {PLACEHOLDER_OUT}`):",
        "",
    ]
    of: dict[Path, list[ResultCell]] = {}  # each named dir's cells, found by walking up from each cell (linear)
    named = set(dirs)
    for c in cells:
        d = next((a for a in (c.dir, *c.dir.parents) if a in named), None)
        if d is not None:
            of.setdefault(d, []).append(c)
    for d, lab in zip(dirs, labels):
        mine = of.get(d, [])
        if not mine:
            continue
        md += [f"## {_where(lab, labels)}", ""]
        for c in mine:
            cmd, note = reproduce(c)
            md += [f"{md_code(str(c.dir.relative_to(d)))} ({md_text(c.status)}{'; ' + md_text(note) if note else ''})", ""]
            md += [*fenced(cmd or "# no cell.json: no command can be rebuilt"), ""]
    return "\n".join(md)


PLACEHOLDER_OUT = "RESULTS_DIR"


def reproduce(cell: ResultCell) -> tuple[str | None, str]:
    """(CELL's reproduce command, a note): rebuilt from its cell.json by bench.run.cell.
    reproduce_command, never read back from a row. Its --out and --data-dir are those a row (or
    system.json) recorded when that recorded command is exactly the rebuilt one (host/verify.py
    `rebuilt_command`: compared whole, its paths by the one rule for spliced values); else
    `--out RESULTS_DIR`, and the note says the recorded command was not shown. (None, note)
    without a readable cell.json."""
    from bench.core.cell import Cell
    from bench.core.request import Paths
    from bench.run.cell import reproduce_command
    from host.verify import rebuilt_command

    try:
        spec = Cell.from_json(json.dumps(cell.spec)) if cell.spec else None
    except KitError:
        spec = None
    if spec is None:
        return None, "no readable cell.json"
    recorded = [r.get("command") for r in cell.rows if r.get("command")] + [cell.system.get("command")]
    for cmd in recorded:
        rebuilt, _why = rebuilt_command(spec, cmd)
        if rebuilt is not None:
            return rebuilt, ""
    note = "its recorded command is not the one its cell.json rebuilds (`orchestrate.py verify` says why): not shown"
    return reproduce_command(spec, Paths(Path(PLACEHOLDER_OUT))), note if any(recorded) else "no command recorded"


def _where(label: str, labels: list[str]) -> str:
    """Where a result dir's files lie in the bundle: results/ alone for a bundle of one dir."""
    return "results" if len(labels) == 1 else f"results/{label}"


def fenced(text: object) -> list[str]:
    """TEXT as a bash block it cannot leave: one line (a newline in a command is another command;
    a line of printable characters is kept as it is), fenced with more backticks than any run it
    holds."""
    line = str(text) if str(text).isprintable() else " ".join(str(text).split())
    longest = max((len(m) for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "bash", line, fence]


README = """# cnn-bench results bundle

- `results/`: the result dirs as they were ({dirs}); one folder per cell: `rows.jsonl`
  (one JSON row per epoch or step), `rows.csv`, `cell.json` (the spec), `system.json`
  (provenance: host, runtime, image, git sha, library versions, dataset checksum).
- `report/REPORT.md`: the report of exactly these results; `report/tidy.csv` /
  `tidy.parquet`: every row in one flat table (`pandas.read_parquet`).
- `environment/`: the exporting environment and the requirements locks.
- `COMMANDS.md`: how it was made and how to rerun each cell.

Check it: `sha256sum -c MANIFEST.sha256` (in this folder).
"""


def export(dirs: list[Path], out: Path, argv: list[str] | None = None, say: Any = None) -> dict:
    """Write the bundle OUT from the result DIRS. Returns {"path", "files", "cells", "bytes"}.
    SAY (host.progress.stages) hears each stage: the report, then every file bundled."""
    say = say or (lambda what, done=None, total=None: None)
    dirs = [Path(d) for d in dirs]
    out = Path(out)
    cells, skipped = _check(dirs, out)
    if not os.access(out.parent, os.W_OK):
        raise KitError(f"--out {out}: the folder {out.parent} is not writable")
    try:
        return _write(dirs, out, cells, skipped, argv, say)
    except OSError as err:  # a full or read-only disk, a file-size limit: one line naming the file and the cause
        from host.outdir import cannot_write

        named = Path(err.filename) if isinstance(err.filename, str) and err.filename else None
        if named is not None and os.path.abspath(named.parent) != os.path.abspath(out.parent):
            raise KitError(f"export: cannot read {shown_name(named)} ({err.strerror or err}): nothing written") from None
        line = cannot_write("export", out.parent, err)  # the temp bundle shown as OUT (host.outdir.shown_path)
        raise KitError(f"export --out {shown_name(out)}: " + line.removeprefix(f"export --out {out.parent}: ")) from None


def _write(dirs: list[Path], out: Path, cells: list[ResultCell], skipped: list[str], argv: list[str] | None, say: Any) -> dict:
    """Write the bundle OUT (export's checks passed); OSError as the disk gives it."""
    from host.outdir import manifest_name
    from host.report import build_report

    labels = _labels(dirs)
    top = labels[0] if len(labels) == 1 else _top_name(out)
    argv = argv if argv is not None else ["python", "orchestrate.py", *sys.argv[1:]]
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    stage: Path | None = None
    try:
        stage = Path(tempfile.mkdtemp(prefix="cnn-bench-export-"))
        members: list[tuple[str, Path]] = []  # (path in the bundle, file on disk)
        skip = {tmp.resolve(), out.resolve()}
        for d, lab in zip(dirs, labels):  # a name that is not UTF-8 is left out (walk), as collect_set left it out
            members += [(f"{_where(lab, labels)}/{p.relative_to(d).as_posix()}", p) for p in _result_files(d, skip)]
        build_report(dirs, stage / "report", say=lambda what, done=None, total=None: say(f"report: {what}", done, total))
        say("the environment (pip freeze, the locks)")
        members += [(f"report/{p.relative_to(stage / 'report').as_posix()}", p) for p in _result_files(stage / "report", set())]
        kit_manifest = stage / "report" / manifest_name("report")  # hidden, so _result_files leaves it: bundled on purpose
        if kit_manifest.is_file() and not kit_manifest.is_symlink():
            members.append((f"report/{kit_manifest.name}", kit_manifest))
        env_dir = stage / "environment"
        (env_dir / "requirements").mkdir(parents=True)
        (env_dir / "environment.json").write_text(json.dumps(environment(cells), indent=2, sort_keys=True) + "\n")
        (env_dir / "pip-freeze.txt").write_text(_pip_freeze())
        for p in sorted((REPO / "requirements").iterdir()):
            if p.suffix in (".in", ".txt") and p.is_file() and not p.is_symlink():
                shutil.copyfile(p, env_dir / "requirements" / p.name)
        members += [(f"environment/{p.relative_to(env_dir).as_posix()}", p) for p in _result_files(env_dir, set())]
        (stage / "COMMANDS.md").write_text(commands_md(cells, dirs, labels, argv))
        left = [f"- {md_text(line)}" for line in skipped]  # names not UTF-8, copies, cells past the budget
        readme = README.format(dirs=", ".join(md_code(d) for d in dirs))
        if left:
            readme += "\nNot bundled or not read (the report says the same):\n\n" + "\n".join(left) + "\n"
        (stage / "README.md").write_text(readme)
        members += [("COMMANDS.md", stage / "COMMANDS.md"), ("README.md", stage / "README.md")]
        now = int(time.time())

        def info(name: str, size: int) -> tarfile.TarInfo:
            ti = tarfile.TarInfo(f"{top}/{name}")
            ti.size, ti.mtime, ti.mode, ti.uid, ti.gid, ti.uname, ti.gname = size, now, 0o644, 0, 0, "", ""
            return ti

        manifest = []
        with tarfile.open(tmp, "w:gz") as tar:
            for i, (name, p) in enumerate(members):
                say("compressing files into the bundle", i + 1, len(members))
                manifest.append(manifest_line(_add_file(tar, info, name, p), name))
            text = "".join(manifest).encode()
            tar.addfile(info("MANIFEST.sha256", len(text)), io.BytesIO(text))
        os.chmod(tmp, 0o644)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the bundle's bytes on disk before its name: a crash never leaves a cut bundle named OUT
        finally:
            os.close(fd)
        os.replace(tmp, out)
        try:
            dfd = os.open(out.parent, os.O_RDONLY)
        except OSError:
            dfd = -1
        if dfd >= 0:
            try:
                os.fsync(dfd)  # the rename itself
            except OSError:
                pass
            finally:
                os.close(dfd)
    except OSError as err:
        if not err.filename:  # a write() past a file-size limit or onto a full disk names no file: the bundle's
            err.kit_writing = str(tmp)  # type: ignore[attr-defined]  # host.outdir.cannot_write names it
        raise
    finally:
        if tmp.exists():
            tmp.unlink()
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
    return {"path": str(out), "files": len(members) + 1, "cells": len(cells), "bytes": out.stat().st_size, "top": top}
