"""profile's readout (bench/studies/profile/readout.py, issue 58 item 1): the one place the study's
rows become numbers.

- every figure the report, the many-GPU section, the claims and the Study hooks read is a function
  of a cell's ok rows with its epochs in their own order (by `epoch`), so a permutation of real
  cells' rows (Hypothesis; the H100 profile reference: CPU and GPU cells with their overhead and
  profile rows, profile.json and telemetry; the H200-x4 reference: repeats, DDP and DataParallel
  over 2 and 4 GPUs) moves none of them, nor a line of the report's tables, nor a claim's finding;
- "the last epoch" is the highest-numbered one, whatever order the rows were written in;
- claims.py, report.py, multigpu.py and the package's Study hooks read no measured row field
  themselves: the names protocol.py writes a measurement under (and profile.json's, and the
  system.json figures the report shows) appear, among the study's own modules, only in readout.py
  and in the writers, and the readers import no per-value accessor (num, med, real, number,
  quotient, ratio, summarize...) to read rows with.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from readout_strategies import shuffled_epochs

from bench.core import answers as A
from bench.core import claims as C
from bench.core.registry import get_study
from bench.core.resultset import ResultCell, load_cells
from bench.studies.profile import claims, multigpu, protocol, readout, report

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is in requirements/dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STUDY_DIR = ROOT / "bench" / "studies" / "profile"
REFS = ROOT / "results" / "reference"
H100 = REFS / "H100-80GB-HBM3-profile" / "profile"
X4 = REFS / "H200-x4" / "profile"
FEW = settings(max_examples=12, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
STUDY = get_study("profile")

_CELLS: dict[Path, list[ResultCell]] = {}


def _cells(where: Path) -> list[ResultCell]:
    """Every committed profile cell under WHERE (ok and skipped: the report lists both)."""
    if where not in _CELLS:
        dirs = sorted(p for p in where.glob("*") if (p / "rows.jsonl").is_file())
        if not dirs:
            pytest.skip(f"no committed profile cells under {where}")
        _CELLS[where] = load_cells(dirs)
    return _CELLS[where]


def _claim_metrics() -> list[tuple[str, C.Metric]]:
    """Every metric a claim of the study reads: a Ratio's or Level's, and each condition's of a
    Measured one (answers.conditions keeps them in its closure)."""
    out = []
    for claim in STUDY.claims:
        rule = claim.rule
        if isinstance(rule, (C.Ratio, C.Level)):
            out.append((claim.id, rule.metric))
        elif isinstance(rule, C.Measured):
            items = inspect.getclosurevars(rule.fn).nonlocals.get("items", ())
            out += [(f"{claim.id}: {what}", r.metric) for what, r, _ in items]
    return [(name, m) for name, m in out if m is not None]


def _per_cell(c: ResultCell) -> dict:
    """A cell's figures as readout.py gives them to the report, the many-GPU section, the claims
    and the Study hooks."""
    part = str(c.first.get("backend"))
    rs = c.rows
    return {
        "epochs": [r.get("epoch") for r in readout.epochs(c)],
        "projection": readout.projection(c),
        "energy": readout.energy(c),
        "training": readout.training(c),
        "telemetry": readout.telemetry(c),
        "cost": readout.measuring_cost(c),
        "breakdown": readout.breakdown(c),
        "summary": readout.summary_figures(c),
        "ips": readout.ips(c),
        "step ms": readout.step_ms(c),
        "per gpu": [
            readout.gpu_median(c, i, k)
            for i in readout.gpus(c)
            for k in (readout.GPU_MEM, readout.GPU_UTIL, readout.GPU_J_PER_IMG, readout.GPU_POWER, readout.GPU_TEMP)
        ],
        "busbw": readout.busbw(c),
        "claims": {name: m(rs, part) for name, m in _claim_metrics()},
        "throughput": STUDY.throughput(rs),
        "speed": STUDY.speed(rs, part),
        "accuracy": STUDY.accuracy(rs, part),
        "loss curve": STUDY.loss_curve(rs, part),
        "invariants": STUDY.invariants(rs),
        "check": STUDY.check_rows(rs),
    }


def _findings(cells: list[ResultCell]) -> list:
    """Every claim's findings on CELLS: what each rests on (its value and where), and the verdicts."""
    out = []
    for claim in STUDY.claims:
        fs = A.findings_of(STUDY, cells, claim)
        out.append((claim.id, [(f.what, f.value, f.rank, sorted(f.split.items(), key=str)) for f in fs]))
        out.append((claim.id, [(a.key(), a.verdict, a.why) for a in A.judge(STUDY, cells, claim)]))
    return out


def _readings(cells: list[ResultCell]) -> dict:
    """Every figure readout.py gives for CELLS and the report's and claims' output built on them
    (the tables; the figures' files are drawn from the same readout calls)."""
    every = multigpu.configs(cells)
    rows = multigpu.scaling(every)
    return {
        "cells": {str(c.dir): _per_cell(c) for c in cells},
        "pairs": [(str(a.dir), str(b.dir)) for a, b in readout.cpu_gpu_pairs(cells)],
        "report": report.training_table(cells)
        + report.cpu_vs_gpu(cells)
        + report.telemetry_table(cells)
        + report.energy_table(cells)
        + report.overhead_table(cells)
        + report.breakdown_table(cells)
        + report.op_tables(cells),
        "representatives": [(name, str(c.dir), which) for name, c, which in report.representatives(cells)],
        "summary": report.summary(cells),
        "many GPUs": multigpu.scaling_table(rows) + multigpu.versus_dp_table(every) + multigpu.profiled_table(every)[0],
        "efficiency": [(g.name, s, e) for g, s, e in rows],
        "claims": _findings(cells),
    }


def _shuffled(cells: list[ResultCell], data) -> list[ResultCell]:
    return [dataclasses.replace(c, rows=data.draw(st.permutations(c.rows))) for c in cells]


_WANT: dict[Path, dict] = {}


def _want(where: Path) -> dict:
    if where not in _WANT:
        _WANT[where] = _readings(_cells(where))
    return _WANT[where]


def test_the_reference_cells_hold_what_each_figure_reads():
    """The cells the permutations use: several epochs with overhead and profile rows, CPU and GPU
    cells forming a CPU-vs-GPU pair, and (H200-x4) repeats of one-GPU, DDP and DataParallel
    configurations that give scaling efficiencies."""
    cells = _cells(H100)
    ran = [c for c in cells if readout.epochs(c)]
    assert len(ran) >= 5 and all(len(readout.epochs(c)) >= 2 for c in ran)
    assert all(readout.one_row(c, readout.OVERHEAD_PHASE) and readout.one_row(c, readout.PROFILE_PHASE) for c in ran)
    got = _want(H100)
    assert got["pairs"] and any(r.startswith("| ") for r in got["report"])
    assert any(v is not None for f in got["cells"].values() for v in f["claims"].values())
    if X4.is_dir():
        x4 = _want(X4)
        assert any(e is not None for _, _, e in x4["efficiency"]) and x4["many GPUs"]


@FEW
@given(st.data())
def test_the_h100_profile_references_figures_do_not_follow_the_row_order(data):
    cells = _cells(H100)
    shuffled = _shuffled(cells, data)
    assert _readings(shuffled) == _want(H100)
    for c in shuffled:  # the epochs by their own number
        got = [r["epoch"] for r in readout.epochs(c)]
        assert got == sorted(got)


@FEW
@given(st.data())
def test_the_h200_x4_references_figures_do_not_follow_the_row_order(data):
    if not X4.is_dir():
        pytest.skip(f"no committed many-GPU reference under {X4}")
    cells = _cells(X4)
    assert _readings(_shuffled(cells, data)) == _want(X4)


@FEW
@given(shuffled_epochs(1, 10))
def test_the_last_epoch_is_the_highest_numbered_whatever_the_row_order(case):
    order, accs = case
    base = {"phase": "epoch", "status": "ok", "backend": "torch-cuda", "parallel": "none", "devices": "", "epoch_s": 2.0,
            "samples": 100, "samples_per_s": 50.0}  # fmt: skip
    rows = [{**base, "epoch": e, "test_acc": a, "train_loss": 1.0 - a} for e, a in zip(order, accs)]
    rows.append({**base, "status": "error", "epoch": 10**6, "test_acc": 3.0})  # not ok: not an epoch
    want = accs[order.index(max(order))]
    cell = ResultCell(Path("/nonexistent/profile/c"), rows)
    assert readout.final_acc_pct(rows, "torch-cuda") == pytest.approx(100 * want)
    assert STUDY.accuracy(rows, "torch-cuda") == ("test_acc", want)
    t = readout.training(cell)
    assert t is not None and t["acc"] == want and t["loss"] == 1.0 - want and t["epochs"] == len(order)
    assert [r["epoch"] for r in readout.epochs(cell)] == sorted(order)


def test_the_readouts_names_are_the_writers():
    """The fields readout.py reads are the ones protocol.py writes (an epoch row of the H100
    reference's GPU cell and CPU cell, the overhead and profile rows)."""
    cells = [c for c in _cells(H100) if readout.epochs(c)]
    keys = {k for c in cells for r in c.rows for k in r}
    gpu_keys = {m.group(1) for k in keys if (m := re.fullmatch(r"gpu\d+_(.+)", k))}
    named = {v for k, v in vars(readout).items() if k.isupper() and isinstance(v, str)}
    per_gpu = {
        readout.GPU_UTIL,
        readout.GPU_MEM_UTIL,
        readout.GPU_MEM_IN_USE,
        readout.GPU_TEMP,
        readout.GPU_POWER,
        readout.GPU_POWER_MAX,
    }
    assert per_gpu <= gpu_keys
    # the cell's own GPU memory is derived from torch's figures (readout.own_gpu_mem), never written as such
    assert readout.GPU_MEM not in gpu_keys and readout.TORCH_PEAK_ONE in keys
    # the per-position figure's name is the one protocol.py writes (a DataParallel or DDP cell's)
    assert 'f"' + readout.TORCH_PEAK_POS.format("{k}") + '"' in (ROOT / "bench/studies/profile/protocol.py").read_text()
    phases = {readout.EPOCH_PHASE, readout.OVERHEAD_PHASE, readout.PROFILE_PHASE}
    not_in_rows = {readout.DEVICE_MS, readout.CPU_MS, readout.KERNEL_COUNT, readout.SEED_IMAGE_SIZE, readout.NO_RAPL,
                   readout.GPU_MEM, readout.TORCH_PEAK_POS, readout.OWN_MEM_MEANING}  # fmt: skip
    assert named - per_gpu - phases - not_in_rows <= keys, sorted(named - per_gpu - phases - not_in_rows - keys)
    assert {k for ks in readout.NEEDS.values() for k in ks} <= keys and set(readout.NEEDS) == phases


# ---- no other module of the study reads these itself ---------------------------------------------
WRITERS = {"protocol.py", "trainer.py", "config.py", "seed.py", "labfiles.py"}  # they make rows, settings, lab files
READERS = ("claims.py", "report.py", "multigpu.py", "__init__.py")


class _AnyCfg:
    """A stand-in Settings for Common.base(): every field a number, no devices."""

    def __getattr__(self, name: str):
        return [] if name == "device_list" else 1


def _measured() -> tuple[set[str], set[str]]:
    """(the names a cell's rows and files hold a measurement under, the per-GPU suffixes): every
    key of the reference cells' ok rows whose value is a number (or a list of them), less the
    cell's parameters (cell.json's params, protocol.Common.base: the settings a row repeats) and
    the runner's identity (what a skipped row also carries); profile.json's breakdown and operator figures; the system.json figures the report
    shows. A gpu<i>_<suffix> key gives its suffix."""
    cells = _cells(H100) + (_cells(X4) if X4.is_dir() else [])
    params = set(protocol.Common(cfg=_AnyCfg(), ctx=SimpleNamespace(), dataset={}, gpus=[], idle={}).base())  # type: ignore[arg-type]
    params |= {k for c in cells if isinstance(c.spec.get("params"), dict) for k in c.spec["params"]}
    runner = {k for c in cells for r in c.rows if r.get("status") != "ok" for k in r}

    def numeric(v) -> bool:
        if isinstance(v, list):
            return bool(v) and all(readout.num(x) is not None for x in v)
        return readout.num(v) is not None

    keys = {k for c in cells for r in c.rows if r.get("status") == "ok" for k, v in r.items() if numeric(v)}
    for c in cells:
        prof = readout.profile_doc(c)
        br = prof.get("breakdown")
        keys |= {k for k, v in br.items() if numeric(v)} if isinstance(br, dict) else set()
        for table in ("ops_self_device", "ops_self_cpu", "kernels_self_device"):
            keys |= {k for o in prof.get(table) or [] for k, v in o.items() if numeric(v)}
    keys |= {"cpu_logical_cores", "allreduce_busbw_gb_per_s"}
    keys -= params | runner
    suffixes = {m.group(1) for k in keys if (m := re.fullmatch(r"gpu\d+_(.+)", k))}
    return keys - {k for k in keys if re.fullmatch(r"gpu\d+_.+", k)}, suffixes


def _modules() -> dict[str, ast.Module]:
    """The study's own modules (not its backends)."""
    return {p.name: ast.parse(p.read_text(), str(p)) for p in sorted(STUDY_DIR.glob("*.py"))}


def _reads_of(tree: ast.Module, keys: set[str], suffixes: set[str]) -> dict[str, list[int]]:
    """KEYS (or `_SUFFIX`, a piece of f"gpu{i}_SUFFIX") used as a string other than as a key of a
    dict display (a row a writer builds) or as a table column's header (the text of a (key,
    header) pair: "steps", "calls"), with their lines: r["epoch_s"], r.get("epoch_s"),
    med(ep, "samples_per_s"), f"gpu{i}_util_pct_mean", a column ("epoch_s", "epoch s")..."""
    dict_keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    headers = {
        id(node.elts[1])
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple)
        and len(node.elts) == 2
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    }
    out: dict[str, list[int]] = {}
    for n in ast.walk(tree):
        if not isinstance(n, ast.Constant) or not isinstance(n.value, str) or id(n) in dict_keys | headers:
            continue
        v = n.value
        if v in keys or v in suffixes or (v.startswith("_") and v[1:] in suffixes):
            out.setdefault(v, []).append(n.lineno)
    return out


def test_only_the_readout_reads_a_measurement_from_a_row():
    mods = _modules()
    assert set(READERS) <= set(mods) and "readout.py" in mods
    assert set(mods) - WRITERS - {"readout.py"} == set(READERS), "a new module of the study: a reader or a writer?"
    keys, suffixes = _measured()
    assert {readout.EPOCH_S, readout.IPS, readout.TEST_ACC, readout.SAMPLER_COST, readout.KERNEL_COUNT} <= keys
    assert {readout.GPU_UTIL, readout.GPU_MEM_UTIL, readout.GPU_J_PER_IMG} <= suffixes
    named = _reads_of(mods["readout.py"], keys, suffixes)
    assert {readout.EPOCH_S, readout.IPS, readout.TEST_ACC, readout.GPU_UTIL, readout.DEVICE_MS} <= set(named)
    bad = {name: got for name in READERS if (got := _reads_of(mods[name], keys, suffixes))}
    assert not bad, f"measured fields read outside readout.py (go through bench.studies.profile.readout): {bad}"


def test_the_readers_read_rows_through_the_readout():
    """claims.py, report.py, multigpu.py and the Study hooks import no per-value accessor of rows
    (bench.core.tables' num/nums/real/quotient, bench.core.study's number/curve/medians/last/ok_rows,
    bench.core.stats' ratio/summarize, readout's own num/med/rows), index no row list from its end
    (`ep[-1]`: "last" in file order), and each imports the readout."""
    accessors = {"num", "nums", "real", "quotient", "number", "curve", "medians", "last", "ok_rows", "ratio", "summarize"}
    own = {"num", "med", "rows", "_get", "_float", "epoch_rows"}
    mods = _modules()
    for name in READERS:
        tree = mods[name]
        froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        core = {a.name for n in froms if (n.module or "").startswith("bench.core") for a in n.names}
        assert not core & accessors, f"{name} imports {sorted(core & accessors)}: read rows through readout.py"
        mine = {a.name for n in froms if n.module == "bench.studies.profile.readout" for a in n.names}
        assert not mine & own, f"{name} imports readout's {sorted(mine & own)}: ask the readout for the figure"
        from_end = [
            n.lineno
            for n in ast.walk(tree)
            if isinstance(n, ast.Subscript)
            and isinstance(n.slice, ast.UnaryOp)
            and isinstance(n.slice.op, ast.USub)
            and isinstance(n.slice.operand, ast.Constant)
        ]
        assert not from_end, f"{name} indexes from the end at lines {from_end}: an order-dependent reading"
        uses = any(n.module == "bench.studies.profile" and any(a.name == "readout" for a in n.names) for n in froms)
        assert uses, f"{name} does not import bench.studies.profile.readout"


def test_the_readout_imports_not_its_own_package():
    """readout.py imports no bench.studies.profile (its __init__: an import cycle) and nothing of
    report.py or multigpu.py (they read it)."""
    tree = _modules()["readout.py"]
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert "bench.studies.profile" not in names
    assert not {"bench.studies.profile.report", "bench.studies.profile.multigpu", "bench.studies.profile.claims"} & names
    assert claims.of is readout.of and claims.final_acc_pct is readout.final_acc_pct  # the claims' metrics are the readout's


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_cpu_configuration_of_a_run_pairs_once_per_gpu_and_with_its_own_runs_gpu_first(data):
    """H200-mlp-scratch-profile's three CPU repeats printed three rows of one label in the projection
    table (75.2x, 67.3x, 54.8x), and a CPU paired with another run's H200 where its own run had one.
    Whatever subset of the committed profile runs a report merges, in any order: one row per (CPU run and
    configuration, GPU model), the CPU's own run's GPU where it has one."""
    names = ["H200-mlp-scratch-profile", "H200-fixed-rounds", "H100-80GB-HBM3-profile", "H200"]
    chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    cells = [c for n in chosen for c in _cells(ROOT / "results" / "reference" / n / "profile")]
    cells = data.draw(st.permutations(cells))
    pairs = readout.cpu_gpu_pairs(cells)

    def key(c):
        return (c.first.get("variant"), c.first.get("batch_size"))

    rows = [(a.run_label, key(a), a.first.get("pipeline"), b.device) for a, b in pairs]
    assert len(rows) == len(set(rows)), rows
    for a, b in pairs:
        own = [g for g in cells if readout.is_backend(g, "torch-cuda") and g.run_label == a.run_label and g.device == b.device]
        if any(key(g) == key(a) and readout.cpu_vs_gpu(a, g) is not None for g in own):
            assert b.run_label == a.run_label, (a.dir, b.dir)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True),
    named=st.booleans(),
    device_wide=st.floats(0, 1e6, allow_nan=False),
    own=st.lists(st.one_of(st.none(), st.floats(1, 1e5, allow_nan=False)), min_size=4, max_size=4),
    one=st.one_of(st.none(), st.floats(1, 1e5, allow_nan=False)),
)
def test_own_gpu_memory_comes_from_torch_by_position_never_from_nvmls_device_reading(ids, named, device_wide, own, one):
    """readout.own_gpu_mem: GPU i of a cell (the k-th it names) reads torch's peak at position k, or the
    one-GPU figure for a cell of one GPU; NVML's device-wide memory (every process) is never read."""
    r = {"phase": "epoch", "devices": ",".join(map(str, ids)) if named else ""}
    r |= {f"gpu{i}_mem_used_mb_max": device_wide for i in ids} | {f"gpu{i}_util_pct_mean": 50.0 for i in ids}
    r |= {f"gpu{k}_alloc_peak_mb_torch": v for k, v in enumerate(own[: len(ids)]) if v is not None}
    if one is not None:
        r["gpu_alloc_peak_mb"] = one
    got = readout.own_gpu_mem(r)
    order = ids if named else sorted(ids)
    for k, i in enumerate(order):
        want = own[k] if k < len(own) and own[k] is not None else (one if len(ids) == 1 else None)
        assert got.get(f"gpu{i}_{readout.GPU_MEM}") == want
    assert {k: v for k, v in got.items() if not k.endswith(readout.GPU_MEM)} == r  # nothing else changes
    assert readout.own_gpu_mem(got) == got  # a row that has it keeps it


def test_a_cuda_cell_without_nvml_has_its_own_memory_on_device_0_and_a_cpu_cell_none():
    cuda = {"phase": "epoch", "backend": "torch-cuda", "devices": "", readout.TORCH_PEAK_ONE: 812.5}
    assert readout.own_gpu_mem(cuda)[f"gpu0_{readout.GPU_MEM}"] == 812.5
    cpu = {"phase": "epoch", "backend": "torch-cpu", "devices": "", readout.TORCH_PEAK_ONE: None}
    assert readout.own_gpu_mem(cpu) == cpu
