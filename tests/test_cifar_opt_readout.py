"""cifar-opt's readout (bench/studies/cifar_opt/readout.py, issue 58 item 1): the one place the
study's rows become numbers.

- every figure the report, the GPU-over-CPU table, the claims and the Study hooks read is a
  function of a cell's ok rows in their own order (epoch, trial, the deployment form's place), so
  a permutation of every committed reference cell's rows (Hypothesis; the 2-core EPYC's CPU
  default profile and the H100's GPU cells, read together) moves none of them: not a readout
  figure, not a line of the report section or a figure's data, not a claim's verdict or value;
- "final test accuracy" is the highest epoch's, whatever order the rows were written in (the
  report read the last row of the file before);
- the report, the claims, the GPU-over-CPU table and the package's Study hooks read no measured
  row field themselves: the names protocol.py, search.py and inference.py write a measurement
  under appear, among those modules, only as the keys of a dict they build (a reader may not go
  back to `r["epoch_s"]`), and they import no per-value accessor (num, nums, number, last...) to
  read rows with; readings.py, the claims' second reader, is gone.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import tempfile
from pathlib import Path

import pytest

from bench.core import answers as A
from bench.core import figures
from bench.core.registry import get_study
from bench.core.resultset import ResultCell, collect, group_repeats
from bench.studies.cifar_opt import crossdevice, readout, report
from bench.studies.cifar_opt.config import CifarOptConfig
from host.answers import study_section

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STUDY_DIR = ROOT / "bench" / "studies" / "cifar_opt"
REFS = ROOT / "results" / "reference"
CPU, GPU = REFS / "cpu-2core-epyc-cifar-opt-default", REFS / "H100-80GB-HBM3-cifar-opt"
FEW = settings(max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
STUDY = get_study("cifar-opt")

_CELLS: list[ResultCell] = []


def _cells() -> list[ResultCell]:
    """The ok cifar-opt cells of the committed references (the H100's where it is committed)."""
    if not _CELLS:
        if not (CPU / "cifar-opt").is_dir():
            pytest.skip(f"no committed cifar-opt reference under {CPU}")
        dirs = [CPU, *([GPU] if (GPU / "cifar-opt").is_dir() else [])]
        cells, _, _ = collect(dirs)
        _CELLS.extend(c for c in cells if c.study == "cifar-opt" and c.status == "ok")
    return _CELLS


# ---- every figure, as the readout gives it and as the report and the claims show it ----------------
METRICS = (
    readout.seed_epoch_s,
    readout.final_acc_pct,
    readout.peak_rss_mb,
    readout.heap_mb,
    readout.gpu_alloc_mb,
    readout.eager_ms,
    readout.slowest_ms,
    readout.fastest_ms,
    readout.int8_drop_pts,
    readout.int8_size_mb,
    readout.int8_size_ratio,
    readout.int8_speedup,
    readout.quantized(readout.peak_rss_mb),
    readout.quantized(readout.heap_mb),
)


def _per_cell(c: ResultCell) -> dict:
    """One repeat's figures: the claims' metrics, the Study hooks, its search."""
    rs, part = c.rows, str(c.first.get("backend"))
    return {
        "metrics": [m(rs, part) for m in METRICS],
        "throughput": STUDY.throughput(rs),
        "speed": STUDY.speed(rs, part),
        "accuracy": STUDY.accuracy(rs, part),
        "loss curve": STUDY.loss_curve(rs, part),
        "invariants": STUDY.invariants(rs),
        "epoch images": STUDY.epoch_samples(c),
        "check": STUDY.check_rows(rs),
        "row flags": STUDY.row_flags(rs),
        "search": readout.search(c),
        "seed": readout.training_seed(c),
    }


def _readout(groups: list[list[ResultCell]]) -> list[dict]:
    """Every figure readout.py gives for each configuration."""
    out = []
    for g in groups:
        forms = readout.forms(g)
        out.append(
            {
                "forms": forms,
                "training": readout.training(g),
                "batches": readout.batches(g),
                "images": readout.n_train(g),
                "sizes": readout.sizes(g),
                "inference": [readout.inference(g, f) for f in forms],
                "bars": [readout.bar(g, what, f) for what in readout.BARS for f in [None, *forms]],
                "cells": [_per_cell(c) for c in g],
            }
        )
    return out


def _report(cells: list[ResultCell]) -> dict:
    """The report section's lines and its figures' data (collected, not drawn), the summary, the
    tables and the GPU-over-CPU rows."""
    groups = group_repeats(cells)
    drawn: list[tuple[str, bytes]] = []
    with (
        tempfile.TemporaryDirectory() as d,
        figures.collecting(lambda out, name, draw, data: drawn.append((name, figures.canonical(data)))),
    ):
        section = report.section(cells, Path(d))
    return {
        "section": section,
        "figures": drawn,
        "summary": report.summary(cells),
        "training": report.training_table(groups),
        "inference": report.inference_table(groups),
        "ratios": report.ratios(groups),
        "cross": crossdevice.cross_device(groups),
    }


def _side(s: A.Side) -> tuple:
    return (s.run, s.part, json.dumps(s.workload, sort_keys=True, default=str), sorted(s.per.items()))


def _claims(cells: list[ResultCell]) -> dict:
    """Every claim's answers (verdict, value, the per-repeat figures of each side) and the claims
    table host/answers.py renders."""
    answers = A.judge_all({"cifar-opt": STUDY}, cells)
    return {
        "answers": [
            (
                a.claim.id,
                a.verdict,
                a.why,
                json.dumps(a.split, sort_keys=True, default=str),
                a.primary,
                [(f.what, f.value, f.unit, f.rank, [_side(s) for s in f.sides]) for f in a.findings],
                a.others,
            )
            for a in answers
        ],
        "table": study_section("cifar-opt", answers),
    }


def _everything(cells: list[ResultCell]) -> dict:
    return {"readout": _readout(group_repeats(cells)), "report": _report(cells), "claims": _claims(cells)}


def _shuffled(cells: list[ResultCell], data) -> list[ResultCell]:
    return [dataclasses.replace(c, rows=data.draw(st.permutations(c.rows))) for c in cells]


_WANT: dict = {}


def _want() -> dict:
    if not _WANT:
        _WANT.update(_everything(_cells()))
    return _WANT


def test_the_reference_cells_hold_every_phase_and_every_figure():
    """The cells the permutations use have what each figure reads: several epochs, trials and a
    search pick, more than one deployment form (int8 beside compiled fp32), a claim measured."""
    cells = _cells()
    phases = {r.get("phase") for c in cells for r in c.rows}
    assert {"epoch", "inference", "trial", "search"} <= phases
    assert all(len(readout.rows(c, "epoch")) >= 2 for c in cells)
    want = _want()
    assert any(len(g["forms"]) == 2 for g in want["readout"])
    assert any(c["search"] is not None for g in want["readout"] for c in g["cells"])
    assert all(g["training"].epoch_s and g["training"].img_s for g in want["readout"])
    assert {a[1] for a in want["claims"]["answers"]} - {"not measured here"}, "no claim measured on the references"
    assert want["report"]["figures"] and any("#### Optuna searches" in x for x in want["report"]["section"])
    if (GPU / "cifar-opt").is_dir():
        assert want["report"]["cross"] and all(r["train_ratio"] is not None for r in want["report"]["cross"])


@FEW
@given(st.data())
def test_the_references_figures_report_and_claims_do_not_follow_the_row_order(data):
    shuffled = _shuffled(_cells(), data)
    got = _everything(shuffled)
    want = _want()
    assert got["readout"] == want["readout"]
    assert got["report"] == want["report"]
    assert got["claims"] == want["claims"]
    for c in shuffled:  # each selection in its own order
        assert [r["epoch"] for r in readout.rows(c, "epoch")] == sorted(r["epoch"] for r in readout.rows(c, "epoch"))
        trials = [r["trial"] for r in readout.rows(c, "trial")]
        assert trials == sorted(trials)
        forms = [r["form"] for r in readout.rows(c, "inference")]
        assert forms == sorted(forms, key=readout.form_place)


# ---- the highest epoch, whatever the file says ---------------------------------------------------
def _cell(rows: list[dict], repeat: int = 0) -> ResultCell:
    base = {"study": "cifar-opt", "backend": "torch-cpu", "variant": "default", "model": "resnet18", "repeat": repeat}
    rows = [{**base, "status": "ok", **r} for r in rows]
    spec = {"study": "cifar-opt", "backend": "torch-cpu", "variant": "default", "repeat": repeat, "params": {"n_train": 1000}}
    return ResultCell(Path(f"/r/run/cifar-opt/torch-cpu_resnet18_default_{repeat}"), rows, {}, spec=spec, origin="run")


def test_final_accuracy_is_the_highest_epochs_not_the_last_rows():
    """Epochs written 3, 1, 2: every reader says epoch 3's accuracy (the report's table read the
    file's last row, epoch 2's, before); at one epoch twice, the larger."""
    ep = [
        {"phase": "epoch", "epoch": 3, "test_acc": 0.7, "epoch_s": 3.0, "samples_per_s": 300.0, "n_train": 1000},
        {"phase": "epoch", "epoch": 1, "test_acc": 0.3, "epoch_s": 1.0, "samples_per_s": 100.0, "n_train": 1000},
        {"phase": "epoch", "epoch": 2, "test_acc": 0.5, "epoch_s": 2.0, "samples_per_s": 200.0, "n_train": 1000},
    ]
    c = _cell(ep)
    assert readout.training([c]).acc == {0: 0.7}
    assert readout.final_acc_pct(c.rows, "torch-cpu") == pytest.approx(70.0)
    assert STUDY.accuracy(c.rows, "torch-cpu") == ("test_acc", 0.7)
    assert readout.bar([c], "accuracy").values == [pytest.approx(70.0)]  # type: ignore[union-attr]
    [row] = report.training_table([[c]])
    assert row["acc"] == "70.0"
    twice = _cell([*ep, {**ep[0], "test_acc": 0.9}])
    assert readout.training([twice]).acc == {0: 0.9} and STUDY.accuracy(twice.rows, "torch-cpu") == ("test_acc", 0.9)


@FEW
@given(st.data())
def test_rows_sharing_a_number_come_in_one_order(data):
    """Two rows of one epoch (or two of one form) are put in one order whatever the file's: a
    figure of the first epoch row (the batch the table names) does not follow the file."""
    rows = [
        {"phase": "epoch", "status": "ok", "epoch": 1, "batch_size": 32, "epoch_s": 1.0},
        {"phase": "epoch", "status": "ok", "epoch": 1, "batch_size": 64, "epoch_s": 2.0},
        {"phase": "epoch", "status": "ok", "epoch": 2, "batch_size": 16, "epoch_s": 3.0},
        {"phase": "inference", "status": "ok", "form": "int8-pt2e", "latency_p50_ms": 2.0},
        {"phase": "inference", "status": "ok", "form": "fp32-compiled", "latency_p50_ms": 5.0},
        {"phase": "inference", "status": "ok", "form": "fp32-compiled", "latency_p50_ms": 4.0},
    ]
    shuffled = data.draw(st.permutations(rows))
    for phase in ("epoch", "inference"):
        assert readout.rows(shuffled, phase) == readout.rows(rows, phase)
    assert [r["form"] for r in readout.rows(shuffled, "inference")] == ["fp32-compiled", "fp32-compiled", "int8-pt2e"]
    assert readout.batches([_cell(shuffled)]) == readout.batches([_cell(rows)])


# ---- the names the readout reads are the writers' ------------------------------------------------
def _writer_keys() -> set[str]:
    """The keys of every row dict protocol.py, search.py and inference.py build (a dict with a
    "phase"), and the search's memory peaks protocol.py adds by name."""
    out = {"search_rss_peak_mb", "search_gpu_alloc_peak_mb", "trial_rss_peak_mb", "trial_gpu_alloc_peak_mb", "acc_drop_pts"}
    for name in ("protocol.py", "search.py", "inference.py"):
        tree = ast.parse((STUDY_DIR / name).read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Dict):
                keys = [k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                if "phase" in keys:
                    out.update(keys)
    return out


def _measured() -> set[str]:
    """The names a cell's rows hold a measurement under: every key of a phase's rows (in the
    committed references and in the writers' row dicts) but those every phase's rows carry (the
    cell's identity and settings: model, batch_size, n_train...), the rows' own numbers (epoch,
    trial) and the form (what a row is, not what it measured), and the study's parameters (a
    cell's params, validated in __init__.py and read through readout.param)."""
    per_phase: dict[str, set[str]] = {}
    for c in _cells():
        for r in c.rows:
            per_phase.setdefault(str(r.get("phase")), set()).update(r)
    common = set.intersection(*per_phase.values())
    keys = set.union(*per_phase.values()) | _writer_keys()
    return keys - common - {"phase", "status", "epoch", "trial", "form"} - set(CifarOptConfig.__dataclass_fields__)


def test_the_readouts_names_are_the_writers():
    written = _writer_keys()
    named = {
        readout.EPOCH_S,
        readout.IMG_S,
        readout.ACC,
        readout.LOSS,
        readout.RSS_PEAK,
        readout.HEAP_PEAK,
        readout.COMPILE_S,
        readout.P50,
        readout.P90,
        readout.P99,
        readout.INFER_IMG_S,
        readout.DROP,
        readout.SIZE,
        readout.CALLS,
        readout.TRIAL_ACC,
        readout.TRIAL_EPOCH_S,
        readout.TRIAL_BATCH,
        readout.TRIAL_LR,
        readout.TRIAL_STATE,
        readout.EPOCH,
        readout.TRIAL,
        readout.FORM,
    }
    assert named <= written, sorted(named - written)
    assert readout.GPU_PEAK in {k for c in _cells() for r in c.rows for k in r}  # trainer.memory() writes it
    assert set(readout.FORMS) | {f for pair in readout.QUANTIZED.values() for f in pair} == set(readout.FORMS)
    src = (STUDY_DIR / "inference.py").read_text()
    assert all(f'"{f}"' in src for f in readout.FORMS)  # the CPU's forms, as inference.forms_for names them


# ---- no other module of the study reads these itself ---------------------------------------------
READERS = ("report.py", "claims.py", "__init__.py", "crossdevice.py")


def _modules() -> dict[str, ast.Module]:
    """The study's own modules (not its backends)."""
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted(STUDY_DIR.glob("*.py"))}


def _reads_of(tree: ast.Module, keys: set[str]) -> dict[str, list[int]]:
    """KEYS used as a string other than as a key of a dict display (a row or a table line a module
    builds), with their lines: r["epoch_s"], r.get("epoch_s"), per_repeat(g, "epoch", "epoch_s")..."""
    dict_keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    out: dict[str, list[int]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys and id(n) not in dict_keys:
            out.setdefault(n.value, []).append(n.lineno)
    return out


GONE = "bench.studies.cifar_opt." + "readings"  # (spelled apart: this file is no importer of it)


def test_readings_is_folded_into_the_readout():
    assert not (STUDY_DIR / "readings.py").exists()
    imports = [
        p
        for d in ("bench", "host", "lab", "tests")
        for p in (ROOT / d).rglob("*.py")
        if p != Path(__file__).resolve() and "import" in (text := p.read_text(errors="replace")) and GONE in text
    ]
    assert not imports, f"still naming {GONE}: {imports}"


def test_only_the_readout_reads_a_measurement_from_a_row():
    mods = _modules()
    fields = _measured()
    assert {"epoch_s", "test_acc", "latency_p50_ms", "model_size_mb", "trial_val_acc", "search_s", "rss_peak_mb"} <= fields
    named = _reads_of(mods["readout.py"], fields)
    assert {readout.EPOCH_S, readout.ACC, readout.P50, readout.TRIAL_ACC, "search_s", "pareto_trials"} <= set(named)
    bad = {name: got for name in READERS if (got := _reads_of(mods[name], fields))}
    assert not bad, f"measured row fields read outside readout.py (go through bench.studies.cifar_opt.readout): {bad}"


def test_the_readers_read_rows_through_the_readout():
    """The report, the claims, the GPU-over-CPU table and the Study hooks import no per-value
    accessor of rows (bench.core.tables' num/nums/real/quotient/finite, bench.core.study's
    number/curve/medians/last/ok_rows) and no statistic of repeats beside the readout's (a ratio is
    readout.ratio's, cross_ratios'; a difference is answers.conditions(minus=True)'s), and each imports the readout."""
    accessors = {"num", "nums", "real", "quotient", "finite", "number", "curve", "medians", "last", "ok_rows"}
    mods = _modules()
    for name in READERS:
        tree = mods[name]
        imported = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("bench.core")
            for a in n.names
        }
        assert not imported & accessors, f"{name} imports {sorted(imported & accessors)}: read rows through readout.py"
        ratios = [
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and n.attr in ("ratio", "summarize")
            and isinstance(n.value, ast.Name)
            and n.value.id == "stats"
        ]
        assert not ratios, f"{name} forms a statistic of repeats itself at lines {ratios}: readout.py's"
        uses = any(
            isinstance(n, ast.ImportFrom)
            and (
                (n.module == "bench.studies.cifar_opt" and any(a.name == "readout" for a in n.names))
                or n.module == "bench.studies.cifar_opt.readout"
            )
            for n in ast.walk(tree)
        )
        assert uses, f"{name} does not import bench.studies.cifar_opt.readout"


@FEW
@given(st.lists(st.floats(0.05, 1.2), min_size=1, max_size=4), st.floats(5.0, 50.0))
def test_a_pt2e_int8_model_that_kept_fp32_weights_is_named_in_the_report(shares, fp32_mb):
    """int8-pt2e at PT2E_FOLDED_MAX or more of the fp32 model's bytes kept its weights fp32 (the H200
    host's torch 2.11 + torchao 0.18 stored 0.998x, the images' torch 2.10 + torchao 0.16 too): the
    readout names it and the report flags it beside the inference table; a folded model (0.25x) goes
    unflagged. The cell's invariant (verify) asks only that int8 be smaller than fp32: an
    environment that does not fold is not a broken cell."""
    from hypothesis import assume

    assume(all(abs(x - readout.PT2E_FOLDED_MAX) > 1e-6 for x in shares))  # not on the edge, where rounding decides
    group = [
        _cell(
            [
                {"phase": "inference", "form": "fp32-compiled", "model_size_mb": fp32_mb, "latency_p50_ms": 1.0},
                {"phase": "inference", "form": "int8-pt2e", "model_size_mb": share * fp32_mb, "latency_p50_ms": 1.0},
            ],
            repeat=i,
        )
        for i, share in enumerate(shares)
    ]
    import statistics

    unfolded = statistics.median(shares) >= readout.PT2E_FOLDED_MAX
    got = readout.unfolded_pt2e(group)
    assert (got is not None) == unfolded
    if got is not None:
        assert got == pytest.approx(statistics.median(shares), rel=1e-6)
    with tempfile.TemporaryDirectory() as d:
        text = "\n".join(report.section(group, Path(d)))
    assert ("kept its weights fp32" in text) == unfolded
    for c, share in zip(group, shares, strict=True):
        [(what, fault)] = [x for x in STUDY.invariants(c.rows) if x[0].startswith("int8-pt2e")]
        assert (fault is None) == (share < 1.0), (what, fault)
