"""Which machine made a result (issue 55, item 10): each cell records a hashed machine id and boot
id beside its machine class, a container gets its host's, and "same host" in a pair means the same
machine where both sides recorded one: two machines of one class are "same machine class", never
"same host", and a side that predates the id says "machine not recorded"."""

from __future__ import annotations

import re
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from bench.core import answers as A
from bench.core import provenance


def test_a_cell_records_a_hashed_machine_id_and_a_container_gets_its_hosts(monkeypatch):
    monkeypatch.delenv(provenance.MACHINE_ENV, raising=False)
    got = provenance.machine_identity()
    assert set(got) == {"machine_id", "machine_id_source", "boot_id"}
    if got["machine_id"] is not None:  # read from the board or the OS install here
        assert re.fullmatch(r"[0-9a-f]{12}", got["machine_id"]) and got["machine_id_source"] in ("product_uuid", "machine-id")
    mine = got["machine_id"] or "0123456789ab"
    monkeypatch.setenv(provenance.MACHINE_ENV, mine)  # what the host runner passes a container: kept
    assert provenance.machine_identity()["machine_id"] == mine
    monkeypatch.setenv(provenance.MACHINE_ENV, "a raw /etc/machine-id a job script passed")  # hashed, never kept raw
    raw = provenance.machine_identity()["machine_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", raw) and "machine" not in raw


def _side(run: str, cls: str, machine: str | None, boot: str = "b1") -> A.Side:
    system = {"cpu_model": cls, "cpu_logical_cores": 16, "machine_id": machine, "boot_id": boot}
    cell = SimpleNamespace(system=system, first={}, rows=[], spec={})
    side = A.Side(run=run, part="x", workload={}, facets={"platform": "cpu"})
    side.cells.append(cell)
    side.per[0] = 1.0
    return side


ids = st.sampled_from([None, "aaaaaaaaaaaa", "bbbbbbbbbbbb"])


@given(
    ca=st.sampled_from(["Xeon", "EPYC"]),
    cb=st.sampled_from(["Xeon", "EPYC"]),
    ma=ids,
    mb=ids,
    ba=st.sampled_from(["", "b1", "b2"]),
    bb=st.sampled_from(["", "b1", "b2"]),
    same_run=st.booleans(),
)
def test_same_host_means_the_same_machine_where_both_recorded_one(ca, cb, ma, mb, ba, bb, same_run):
    """Machine ids decide where both sides recorded one; where a side recorded none, one recorded boot
    is one machine, and anything else (two boots: two machines or one rebooted; a boot missing: nothing
    tells) ranks as "same machine class", never "same host" (issue 55 item 10: two H100 runs 33 h apart
    that recorded neither read as one host)."""
    a = _side("r1", ca, ma, ba)
    b = _side("r1" if same_run else "r2", cb, mb, bb)
    f = A.Finding(value=None, sides=(a, b), rank=A._rank(a, b))  # type: ignore[arg-type]
    same_host = A.Answer("s", None, "holds", findings=[f]).same_host  # type: ignore[arg-type]
    if same_run:  # one run is one machine: named where it recorded one, else its boot
        assert f.pairing == (f"same run, machine {ma}" if ma else f"same run, boot {ba}" if ba else "same run")
    elif ca != cb:
        assert f.pairing == "across hosts"
    elif ma and mb and ma != mb:
        assert f.pairing == f"same machine class (machines {ma} / {mb})" and not same_host
    elif ma and mb:
        assert f.pairing.startswith(f"same host and environment (machine {ma}") and same_host
    elif ba and ba == bb:
        assert f.pairing == f"same host and environment (machine not recorded; one boot, {ba})" and same_host
    elif ba and bb:
        assert f.pairing == f"same machine class (machine not recorded; boots {ba} / {bb}: two machines or one rebooted)"
        assert not same_host
    else:
        assert f.pairing == "same machine class (machine not recorded: one machine or two, nothing tells which)"
        assert not same_host


def test_a_host_with_no_readable_id_takes_its_gpus_uuids(monkeypatch, tmp_path):
    """Neither /sys's product_uuid nor /etc/machine-id readable (a lent GPU host recorded none): the
    GPUs' UUIDs from nvidia-smi, hashed; with no nvidia-smi either, none."""
    import os

    monkeypatch.delenv(provenance.MACHINE_ENV, raising=False)
    monkeypatch.setattr(
        provenance, "MACHINE_SOURCES", (("product_uuid", str(tmp_path / "no1")), ("machine-id", str(tmp_path / "no2")))
    )
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho GPU-7b3c2a10-0000-1111-2222-333344445555\necho not-a-uuid\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    got = provenance.machine_identity()
    assert got["machine_id_source"] == "gpu-uuid" and re.fullmatch(r"[0-9a-f]{12}", got["machine_id"])
    assert got["machine_id"] == provenance._hashed("GPU-7b3c2a10-0000-1111-2222-333344445555")  # hashed, never the serial
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert provenance.machine_identity()["machine_id"] is None


def test_two_boots_of_one_machine_say_so():
    a, b = _side("r1", "Xeon", "aaaaaaaaaaaa", "b1"), _side("r2", "Xeon", "aaaaaaaaaaaa", "b2")
    f = A.Finding(value=None, sides=(a, b), rank=A._rank(a, b))  # type: ignore[arg-type]
    assert f.pairing == "same host and environment (machine aaaaaaaaaaaa, two boots of it)"


def test_an_other_run_listed_beside_an_answer_says_how_its_sides_pair():
    """The audit's "other runs" lines paired two H200 machines (H200-rounds / H200-rounds-first) with
    nothing to say so; a pair from one run needs no label."""
    a, b = _side("r1", "Xeon", None, "b1"), _side("r2", "Xeon", None, "b2")
    two = A.Finding(value=None, sides=(a, b), rank=A._rank(a, b))  # type: ignore[arg-type]
    assert A._where(two).endswith("; same machine class (machine not recorded; boots b1 / b2: two machines or one rebooted)")
    one = A.Finding(value=None, sides=(a, _side("r1", "Xeon", None, "b1")), rank=0)  # type: ignore[arg-type]
    assert "same" not in A._where(one)
