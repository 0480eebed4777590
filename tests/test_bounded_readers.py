"""Bounded readers (bench.core.bounded): every compressed or line-oriented input is streamed
within stated caps, its header read before its bulk, and a cap it passes is one line naming
the file and the cap. Memory is measured (tracemalloc), never time."""

from __future__ import annotations

import gzip
import json
import struct
import tarfile
import tracemalloc
import zlib
from pathlib import Path

import pytest

from bench.core import bounded
from bench.core.errors import KitError


def peak_bytes(fn, *args):
    """(what FN returned or the exception it raised, the most memory Python held meanwhile)."""
    tracemalloc.start()
    try:
        try:
            got = fn(*args)
        except Exception as err:  # noqa: BLE001 - the caller asserts what it was
            got = err
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def gzip_of(path: Path, head: bytes, zeros: int) -> Path:
    """PATH: gzip of HEAD then ZEROS zero bytes, written a block at a time (a small file that
    inflates to ZEROS bytes)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        fh.write(comp.compress(head))
        block = bytes(1 << 20)
        for _ in range(zeros >> 20):
            fh.write(comp.compress(block))
        fh.write(comp.flush())
    return path


# ---------------------------------------------------------------------------- MNIST
def test_an_idx_gz_that_inflates_past_its_header_is_refused_after_reading_only_what_the_header_says(tmp_path):
    """Form 1 (the issue's): a 14 MB-class .gz inflating to gigabytes; here a valid header for 10
    images followed by 512 MiB of zeros (0.5 MB gzip'd): refused having inflated 7,857 bytes."""
    from bench.data.mnist import read_idx

    p = gzip_of(tmp_path / "train-images-idx3-ubyte.gz", struct.pack(">IIII", 2051, 10, 28, 28), 512 << 20)
    got, peak = peak_bytes(read_idx, p, 2051)
    assert isinstance(got, KitError) and "header says 10 items" in str(got) and "more than 7856 bytes" in str(got), got
    assert peak < 4 << 20, f"held {peak / 2**20:.0f} MiB"


def test_an_idx_header_promising_more_than_the_cap_is_refused_before_its_bulk(tmp_path):
    """Form 2: a raw (not gzip'd) file whose header claims 2^31 images, and a .gz claiming
    10 million: one line stating the cap, the bulk never read."""
    from bench.data.mnist import MAX_IDX_ITEMS, read_idx

    raw = tmp_path / "t10k-images-idx3-ubyte"
    raw.write_bytes(struct.pack(">IIII", 2051, 1 << 31, 28, 28) + bytes(4096))
    gz = gzip_of(tmp_path / "train-labels-idx1-ubyte.gz", struct.pack(">II", 2049, 10_000_000), 64 << 20)
    for path, magic in ((raw, 2051), (gz, 2049)):
        got, peak = peak_bytes(read_idx, path, magic)
        assert isinstance(got, KitError) and f"over the {MAX_IDX_ITEMS:,}" in str(got), got
        assert peak < 1 << 20


# ---------------------------------------------------------------------------- rows files
def test_a_rows_file_of_many_short_lines_is_refused_at_its_line_cap(tmp_path):
    """The issue's 39 MB of short lines took 5.1 GB in `report`: a file over the size cap is not
    read at all, and one under it with more lines than the line cap stops at the cap."""
    from bench.core.rows import ROWS_CAPS, read_rows_checked

    big = tmp_path / "big.jsonl"
    line = json.dumps({"study": "mnist-cnn", "status": "ok"}) + "\n"
    big.write_text(line * ((39 << 20) // len(line)))
    rows, problems = read_rows_checked(big)
    assert rows == [] and problems == [f"{big}: 39 MiB, over the 16 MiB this input may have: not read"]
    many = tmp_path / "many.jsonl"
    many.write_text("{}\n" * (ROWS_CAPS.lines + 5))
    (rows, problems), peak = peak_bytes(read_rows_checked, many)
    assert rows == [] and problems == [f"{many}: over {ROWS_CAPS.lines:,} lines: not read further"]
    assert peak < 16 << 20


def test_problems_of_one_rows_file_are_counted_past_the_first_twenty(tmp_path):
    from bench.core.rows import MAX_PROBLEMS, read_rows_checked

    p = tmp_path / "rows.jsonl"
    p.write_text("not json\n" * 5000)
    rows, problems = read_rows_checked(p)
    assert rows == [] and len(problems) == MAX_PROBLEMS + 1 and problems[-1].endswith("4980 more line(s) that cannot be trusted")


# ---------------------------------------------------------------------------- journals
def _journal(tmp_path: Path) -> Path:
    d = tmp_path / "cell"
    d.mkdir()
    return d / "optuna-journal.log"


def test_an_optuna_journal_with_a_line_past_its_cap_is_one_line_never_read_whole(tmp_path):
    """Form 1 (the issue's): a 1 GB line (sparse); form 2: a 2 MiB line in a small file."""
    from bench.studies.cifar_opt.search import check_journal

    j = _journal(tmp_path)
    with open(j, "wb") as fh:
        fh.write(b'{"op_code": 0, "worker_id": "')
        fh.truncate(1 << 30)
    got, peak = peak_bytes(check_journal, j)
    assert isinstance(got, KitError) and "over the 64 MiB" in str(got) and "move it away" in str(got), got
    j.write_text('{"op_code": 0, "worker_id": "w"}\n' + '{"op_code": 1, "worker_id": "' + "x" * (2 << 20) + '"}\n')
    got, peak = peak_bytes(check_journal, j)
    assert isinstance(got, KitError) and "line 2: longer than 1 MiB" in str(got), got
    assert peak < 8 << 20


def test_an_optuna_journal_line_that_is_no_journal_operation_is_one_line(tmp_path):
    from bench.studies.cifar_opt.search import check_journal

    j = _journal(tmp_path)
    for bad, says in (
        ('{"op_code": "drop", "worker_id": "w"}', "'op_code'"),
        ("[1, 2]", "not a JSON object"),
        ("{}", "'op_code' is missing"),
    ):
        j.write_text('{"op_code": 0, "worker_id": "w"}\n' + bad + "\n")
        with pytest.raises(KitError, match="line 2") as err:
            check_journal(j)
        assert says in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------- archives and traces
def test_a_cifar_archive_member_bigger_than_its_cap_is_refused_from_its_header(tmp_path):
    from bench.data import cifar10 as c10

    p = tmp_path / "cifar-10-binary.tar.gz"
    with gzip.open(p, "wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo(f"{c10.BATCH_DIR}/data_batch_1.bin")
        info.size = 1 << 30  # a header that promises 1 GiB: the content never needs to exist
        tar.addfile(info)
    got, peak = peak_bytes(c10.read_archive, p)
    assert isinstance(got, KitError) and "over the 64 MiB one may have" in str(got), got
    assert peak < 4 << 20


def test_a_profile_trace_that_inflates_past_its_cap_is_named_not_loaded(tmp_path):
    from bench.studies.profile import _unreadable

    (tmp_path / "trace").mkdir()
    gzip_of(tmp_path / "trace" / "trace_0.json.gz", b'{"traceEvents": [', 300 << 20)
    got, peak = peak_bytes(_unreadable, tmp_path, ["trace_0.json.gz"])
    assert got == "trace_0.json.gz: over 256 MiB decompressed: not read further", got
    assert peak < 300 << 20


def test_open_stream_refuses_a_link_and_a_fifo(tmp_path):
    import os

    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    for name, says in (("link", "a symlink"), ("fifo", "not a regular file")):
        with pytest.raises(KitError, match=says):
            bounded.read_bytes(tmp_path / name, bounded.Caps(file_bytes=10))
    assert bounded.read_bytes(tmp_path / "link", bounded.Caps(file_bytes=10), follow=True) == b"x"
