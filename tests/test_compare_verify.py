"""`orchestrate.py compare` and `verify` on the committed reference dirs (copied to tmp_path,
then edited to make each failure): no training, a few seconds."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.core.cell import Cell

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
CPU = REF / "cpu-2core-epyc"
GPU = REF / "H100-80GB-HBM3"
MULTI = REF / "H200-x4"


def orch(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


def read_rows(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def write_rows(p: Path, rows: list[dict]) -> None:
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def edit_rows(cell_dir: Path, fn) -> None:
    p = cell_dir / "rows.jsonl"
    rows = read_rows(p)
    fn(rows)
    write_rows(p, rows)


def cell_dir(root: Path, prefix: str) -> Path:
    """One cell (the first by name) of the configuration PREFIX names; references hold 3 repeats."""
    return sorted(d for d in root.glob("*/*") if d.name.startswith(prefix))[0]


@pytest.fixture
def cpu(tmp_path) -> Path:
    return Path(shutil.copytree(CPU, tmp_path / "cpu-2core-epyc"))


def only_repeat0(root: Path) -> Path:
    """ROOT with every cell but repeat 0 removed: one run of each configuration."""
    for d in sorted(root.glob("*/*")):
        if (d / "cell.json").exists() and Cell.load(d / "cell.json").repeat != 0:
            shutil.rmtree(d)
    return root


def all_cells(root: Path, prefix: str) -> list[Path]:
    return sorted(d for d in root.glob("*/*") if d.name.startswith(prefix))


def add_repeats(root: Path, n: int, scale: float = 1.0, flags: str | None = None) -> None:
    """Turn every cell under ROOT into N repeats (repeat r: throughput x (1 + 0.01 r) x SCALE),
    as `--repeats N` would have written them: own dir, cell.json, row keys and command. FLAGS
    (when given) replaces every row's noise flags ("": a quiet run)."""
    for d in sorted(root.glob("*/*")):
        if not (d / "cell.json").exists():
            continue
        cell = Cell.load(d / "cell.json")
        rows = read_rows(d / "rows.jsonl")
        for r in range(n):
            c = cell.replace(repeat=r)
            new = c.dir(root)
            if new != d:
                shutil.copytree(d, new)
            (new / "cell.json").write_text(c.to_json(indent=2) + "\n")
            out = []
            for row in rows:
                row = {**row, "repeat": r, "cell": c.id}
                if flags is not None:
                    row["flags"] = flags
                row["command"] = re.sub(r"'[^']*'", "'" + c.to_json() + "'", row["command"], count=1)
                f = (1 + 0.01 * r) * scale
                for k in ("samples_per_s",):
                    if k in row:
                        row[k] *= f
                for k in ("total_s", "epoch_s"):  # a faster repeat takes less time (the rows stay consistent)
                    if row.get(k):
                        row[k] /= f
                out.append(row)
            write_rows(new / "rows.jsonl", out)
        if cell.repeat != 0:
            shutil.rmtree(d)


# ---------------------------------------------------------------------------- verify
@pytest.mark.parametrize("ref", [CPU, GPU, MULTI], ids=["cpu", "h100", "h200-x4"])
def test_verify_passes_on_the_references(ref):
    r = orch("verify", ref, "--baseline", ref)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not [x for x in lines(r.stdout) if x.startswith("FAIL")] and " 0 FAIL" in lines(r.stdout)[-1]
    assert "without a baseline" in lines(r.stdout)[-1] and " 0 without a baseline" in lines(r.stdout)[-1]


def test_verify_fails_naming_the_cell_when_accuracy_is_out_of_band(cpu):
    d = cell_dir(cpu, "numba-cpu_resident")

    def edit(rows):
        rows[-1]["test_acc"] = 0.912

    edit_rows(d, edit)
    r = orch("verify", cpu)
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [x for x in lines(r.stdout) if x.startswith("FAIL")]
    assert len(fails) == 1, r.stdout
    assert "mnist-cnn numba-cpu resident" in fails[0] and d.name in fails[0]
    assert "test_acc 0.912 outside baseline band 0.9807-0.9907" in fails[0]  # the 3 repeats' 0.9857 +- 0.005


def test_verify_checks_the_loss_curve(cpu):
    def edit(rows):
        rows[1]["train_loss"] *= 1.05

    edit_rows(cell_dir(cpu, "torch-cpu_seed"), edit)
    r = orch("verify", cpu)
    assert r.returncode == 1
    (fail,) = [x for x in lines(r.stdout) if x.startswith("FAIL")]
    assert "torch-cpu seed" in fail and "train_loss" in fail and "at epoch 2" in fail


@pytest.mark.parametrize(
    "what,edit,message",
    [
        (
            "command",
            lambda rows: rows[0].update(command=rows[0]["command"].replace('"epochs":10', '"epochs":4')),
            "different spec",
        ),
        ("command", lambda rows: rows[0].update(command="bench cell"), "command is not"),
        ("lock", lambda rows: rows[1].update(lock_hash=""), "row lacks lock_hash"),
        ("image", lambda rows: rows[2].update(image_id=None), "row lacks image_id"),
        ("schema", lambda rows: rows[0].update(schema=0), "'schema' is 0"),
        ("cell", lambda rows: rows[0].update(cell="other-0123"), "row names cell"),
        ("error", lambda rows: rows[-1].update(status="error", reason="boom"), "error: boom"),
    ],
)
def test_verify_checks_schema_and_provenance(cpu, what, edit, message):
    edit_rows(cell_dir(cpu, "torch-cpu_resident"), edit)
    r = orch("verify", cpu)
    assert r.returncode == 1, r.stdout
    (fail,) = [x for x in lines(r.stdout) if x.startswith("FAIL")]
    assert "torch-cpu resident" in fail and message in fail, fail


def test_verify_needs_a_git_sha_and_a_matching_cell_json(cpu):
    d = cell_dir(cpu, "torch-cpu_resident")
    sysinfo = json.loads((d / "system.json").read_text())
    (d / "system.json").write_text(json.dumps({**sysinfo, "kit_git_sha": "unknown"}))
    spec = json.loads((d / "cell.json").read_text())
    spec["seed"] = 1
    (d / "cell.json").write_text(json.dumps(spec))
    r = orch("verify", cpu)
    (fail,) = [x for x in lines(r.stdout) if x.startswith("FAIL")]
    assert "kit git sha is 'unknown'" in fail and "hashes to" in fail and "different spec" in fail


def test_no_cell_silently_missing(cpu):
    for d in all_cells(cpu, "torch-cpu_seed"):  # every repeat of a configuration the baseline expects
        shutil.rmtree(d)
    (cell_dir(cpu, "torch-cpu_resident") / "rows.jsonl").write_text("")  # cell.json, no rows
    d = cell_dir(cpu, "numba-cpu")
    (d / "rows.jsonl").rename(d / "rows.partial.jsonl")  # killed mid-run
    r = orch("verify", cpu, "--baseline", "cpu-2core-epyc")
    assert r.returncode == 1
    fails = [x for x in lines(r.stdout) if x.startswith("FAIL")]
    text = "\n".join(fails)
    assert "cell.json but no rows" in text
    assert "baseline cpu-2core-epyc expects this configuration" in text and "torch-cpu seed" in text
    # one line per failing cell: a cell that is there but broken is not also reported missing
    assert len(fails) == 2, text
    # the killed cell is interrupted, named, and no failure: its configuration's other repeats finished
    (stopped,) = [x for x in lines(r.stdout) if x.startswith("interrupted ")]
    assert d.name in stopped and "did not finish" in stopped and d.name not in text
    assert f"1 cell(s) interrupted (not failures): {d.name}; rerun the same command" in lines(r.stdout)[-1]


def test_skipped_cells_pass_with_a_reason_and_unknown_configs_have_no_baseline(cpu):
    edit_rows(cell_dir(cpu, "torch-cpu_seed"), lambda rows: [r.update(status="skipped", reason="no torch here") for r in rows])
    d = cell_dir(cpu, "numba-cpu")
    spec = json.loads((d / "cell.json").read_text())
    spec["params"]["lr"] = 0.02  # a configuration no baseline describes (its id changes with it)
    c = Cell.from_json(json.dumps(spec))
    new = c.dir(cpu)
    d.rename(new)
    (new / "cell.json").write_text(c.to_json(indent=2))
    edit_rows(new, lambda rows: [r.update(cell=c.id, command=f"python -m bench cell '{c.to_json()}' --out x") for r in rows])
    r = orch("verify", cpu, "--allow-unbaselined")
    assert r.returncode == 0, r.stdout
    out = r.stdout
    assert re.search(r"^skipped +mnist-cnn torch-cpu seed .*no torch here", out, re.M)
    assert re.search(r"^no baseline +mnist-cnn numba-cpu resident default \(.*lr=0.02", out, re.M)
    strict = orch("verify", cpu)  # by default a cell no baseline describes fails: a check of nothing never passes
    assert strict.returncode == 1 and re.search(
        r"^FAIL +mnist-cnn numba-cpu resident default .*no baseline for", strict.stdout, re.M
    )


def test_verify_checks_equivalence_where_recorded(tmp_path):
    gpu = Path(shutil.copytree(GPU, tmp_path / "H100-80GB-HBM3"))
    edit_rows(cell_dir(gpu, "numba-cuda"), lambda rows: rows[3].update(equiv_ok=False))
    edit_rows(
        cell_dir(gpu, "numpy+cupy"), lambda rows: [r.update(agrees_with_numpy=False) for r in rows if r.get("iteration") == 500]
    )
    r = orch("verify", gpu)
    fails = [x for x in lines(r.stdout) if x.startswith("FAIL")]
    assert r.returncode == 1 and len(fails) == 2, r.stdout
    assert any("numba-cuda" in x and "equiv_ok is false" in x for x in fails)
    assert any("numpy+cupy" in x and "agrees_with_numpy is false" in x for x in fails)


def test_make_baseline_roundtrip_and_refusal(cpu, tmp_path):
    bdir = tmp_path / "baselines"
    r = orch("verify", "--make-baseline", cpu, "--name", "mine", "--baselines-dir", bdir)
    assert r.returncode == 0, r.stderr
    made = json.loads((bdir / "mnist-cnn.json").read_text())
    (e,) = [e for e in made["sets"]["mine"]["entries"] if e["part"] == "numba-cpu"]
    assert e["acc_band"] == [0.9807, 0.9907] and e["config"]["params"]["epochs"] == 10 and len(e["curve"]) == 10
    assert "--make-baseline" in made["sets"]["mine"]["command"]
    assert orch("verify", cpu, "--baseline", "mine", "--baselines-dir", bdir).returncode == 0
    # the committed files were made the same way: regenerating gives the same entries
    committed = json.loads((REF / "baselines" / "mnist-cnn.json").read_text())["sets"]["cpu-2core-epyc"]["entries"]
    assert made["sets"]["mine"]["entries"] == committed
    # a dir that fails verify is no baseline, and nothing is written
    before = (bdir / "mnist-cnn.json").read_bytes()
    edit_rows(cell_dir(cpu, "numba-cpu"), lambda rows: rows[0].update(lock_hash=""))
    r = orch("verify", "--make-baseline", cpu, "--name", "mine", "--baselines-dir", bdir)
    assert r.returncode == 1 and lines(r.stderr)[-1].startswith("error: ") and "does not pass verify" in r.stderr
    assert (bdir / "mnist-cnn.json").read_bytes() == before


# the CPUs the 2-core CI VM has come with: (name, microarchitecture where the name hides it and it was recorded)
CI_CPUS = (
    ("AMD EPYC", None),
    ("AMD EPYC", "AuthenticAMD family 25 model 1, AVX2"),
    ("Intel(R) Xeon(R) Processor", None),
    ("Intel(R) Xeon(R) Processor @ 2.80GHz", None),
)


def _ci_smoke_of(study: str, runtime: str, cpu: tuple[str, str | None] = CI_CPUS[0]) -> list[dict]:
    entries = json.loads((REF / "baselines" / f"{study}.json").read_text())["sets"]["ci-smoke"]["entries"]
    return [
        e
        for e in entries
        if e["environment"]["runtime"] == runtime and (e["machine_class"]["cpu"], e["machine_class"].get("cpu_arch")) == cpu
    ]


def test_how_many_devices_is_part_of_a_configuration_which_ones_is_not(tmp_path):
    """DDP over 2 and over 4 GPUs of one spec are two configurations for compare and verify (the
    many-GPU reference's baseline holds one entry each, regenerated exactly); a spec naming one
    device is the same configuration as one naming none."""
    from host.compare import config_label, config_of, groups_of, load_set, match_key

    cells = load_set(MULTI, "verify", partial_ok=True).cells
    ddp = [c for c in cells if c.first.get("parallel") == "ddp" and c.first.get("variant") == "finetune"]
    groups = groups_of(ddp)
    assert sorted(len(g.cells) for g in groups.values()) == [3, 3]
    assert sorted(config_label(g.config).split(" (")[0] for g in groups.values()) == [
        "torch-cuda finetune synthetic-gpu b128 ddp x2",
        "torch-cuda finetune synthetic-gpu b128 ddp x4",
    ]
    one = next(c for c in cells if c.first.get("parallel") == "none")
    named = type(one)(one.dir, one.rows, one.system, spec={**one.spec, "devices": ["3"]})
    assert match_key(config_of(named)) == match_key(config_of(one))
    bdir = tmp_path / "baselines"
    r = orch("verify", "--make-baseline", MULTI, "--name", "H200-x4", "--acc-margin", "0.005", "--loss-rtol", "0.02",
             "--baselines-dir", bdir)  # fmt: skip
    assert r.returncode == 0, r.stderr
    made = json.loads((bdir / "profile.json").read_text())["sets"]["H200-x4"]["entries"]
    committed = json.loads((REF / "baselines" / "profile.json").read_text())["sets"]["H200-x4"]["entries"]
    assert made == committed and len(made) == 9
    assert sorted(e["config"].get("device_count", 1) for e in made) == [1, 1, 2, 2, 2, 2, 2, 4, 4]


@pytest.mark.parametrize("cpu", CI_CPUS)
def test_ci_smoke_baseline_holds_the_container_smoke_band(cpu):
    """The CI container smoke's baseline (tests/test_ci_container_rows.py's band, 2 epochs x 4,096
    samples), and the Slurm smoke's (native, one core a task): both with speed entries, for each
    CPU the CI VM comes with."""

    def _ci_smoke(study: str, runtime: str) -> list[dict]:
        return _ci_smoke_of(study, runtime, cpu)

    made = _ci_smoke("mnist-cnn", "container")
    parts = {(e["part"], e["config"]["params"]["pipeline"]) for e in made}
    assert parts == {("torch-cpu", "seed"), ("torch-cpu", "resident"), ("numba-cpu", "resident")}
    for e in made:
        assert e["acc_band"] == [0.25, 0.6]
        assert e["config"]["params"]["limit_train"] == 4096 and e["config"]["params"]["epochs"] == 2
    mlp = _ci_smoke("mlp-scratch", "container")
    assert [e["part"] for e in mlp] == ["numpy"] and mlp[0]["config"]["params"]["iterations"] == 100
    # the other three studies' smoke cells (.ci/docker-smoke.sh's profile smoke on synthetic data)
    for study, n in (("cifar-opt", 3), ("roofline", 3), ("profile", 2)):
        entries = _ci_smoke(study, "container")
        assert len(entries) == n and all(e["part"] == "torch-cpu" for e in entries), study
        assert all(e["config"]["params"]["dataset"].endswith("-synthetic") for e in entries), study
    for study in ("mnist-cnn", "mlp-scratch", "cifar-opt", "roofline", "profile"):
        for e in _ci_smoke(study, "container"):
            assert e["machine_class"]["cores"] == 2, e["label"]
            assert e["speed"] or "sweep" in e["label"], e["label"]
    # the Slurm smoke (.ci/slurm-smoke.sh): the same mnist-cnn and mlp-scratch configurations, natively on one core
    for study, n in (("mnist-cnn", 3), ("mlp-scratch", 1)):
        native = _ci_smoke(study, "native")
        assert len(native) == n and all(e["machine_class"]["cores"] == 1 and e["speed"] for e in native), study


# ---------------------------------------------------------------------------- compare
def test_compare_a_dir_with_itself_is_no_regression(tmp_path, cpu):
    out = tmp_path / "cmp"
    r = orch("compare", cpu, cpu, "--fail-on-regression", "5%", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    # the summary comes first: mnist 3 + mlp float32 and float64, 3 repeats each: intervals around 1.0
    first = lines(r.stdout)[0]
    assert first.startswith("5 configurations: 0 faster, 0 slower, 5 not significant; geometric mean B/A 1.000x"), first
    assert "SLOWER" not in r.stdout and "not significant" in r.stdout
    res = json.loads((out / "compare.json").read_text())
    assert {m["ratio"] for m in res["matched"]} == {1.0} and res["regressions"] == []
    assert res["summary"]["count"]["not_significant"] == 5 and res["summary"]["geomean"] == 1.0
    md = (out / "compare.md").read_text()
    assert md.startswith("# compare") and "5 configurations: 0 faster" in md


def _quiet(d: Path, scale: float = 1.0, flags: str = "") -> Path:
    """D: every configuration of the CPU reference as 3 repeats (quiet unless FLAGS), throughput x SCALE."""
    d = only_repeat0(Path(shutil.copytree(CPU, d)))
    add_repeats(d, 3, scale=scale, flags=flags)
    return d


def _quiet_pair(tmp_path, scale: float, flags: str = "") -> tuple[Path, Path]:
    """A and B: every configuration of the CPU reference as 3 quiet repeats; B's throughput x SCALE."""
    return _quiet(tmp_path / "a"), _quiet(tmp_path / "b", scale, flags)


def test_compare_flags_a_regression_with_repeats(tmp_path):
    a, b = _quiet_pair(tmp_path, 0.8)
    assert orch("verify", a).returncode == 0  # the synthetic repeats are well-formed cells
    r = orch("compare", a, b, "--fail-on-regression", "5%")
    assert r.returncode == 1, r.stdout + r.stderr
    err = lines(r.stderr)[-1]
    assert err.startswith("error: regression beyond 5% in 5 configurations: ") and len(err) <= 120, err
    assert err.endswith("and 4 more"), err  # all five slowed alike: one is named, the rest counted
    assert "SLOWER (regression): " in r.stdout and "numba-cpu resident default" in " ".join(r.stdout.split("SLOWER")[1].split())
    assert lines(r.stdout)[0].startswith("5 configurations: 0 faster, 5 slower, 0 not significant; geometric mean B/A 0.800x")
    row = next(x for x in lines(r.stdout) if x.startswith("mnist-cnn numba-cpu resident"))
    assert "0.800x" in row and row.rstrip().endswith("slower")
    # without --fail-on-regression the verdict is printed, the exit is 0
    assert orch("compare", a, b).returncode == 0
    # B 2 % slower: inside the threshold
    c = _quiet(tmp_path / "c", 0.98)
    r = orch("compare", a, c, "--fail-on-regression", "0.05")
    assert r.returncode == 0 and "SLOWER" not in r.stdout
    row = next(x for x in lines(r.stdout) if x.startswith("mnist-cnn numba-cpu resident"))
    assert "0.980x" in row and row.rstrip().endswith("not significant")


def test_compare_summary_sorted_rows_width_and_json(tmp_path):
    """pyperf/asv style: the summary line first (counts, geometric mean with its bootstrap
    interval), the rows sorted by change, no line over 120 columns; --json carries every number."""
    a, b = _quiet_pair(tmp_path, 1.0)
    for i, d in enumerate(sorted(x for x in b.glob("*/*") if (x / "cell.json").exists())):
        f = (0.7, 1.0, 1.3, 1.0, 1.0)[Cell.load(d / "cell.json").repeat * 0 + i % 5]  # one factor per configuration
        edit_rows(d, lambda rows, f=f: [r.update({k: r[k] * f for k in ("samples_per_s",) if k in r}) for r in rows])
        edit_rows(d, lambda rows, f=f: [r.update({k: r[k] / f for k in ("total_s", "epoch_s") if r.get(k)}) for r in rows])
    r = orch("compare", a, b)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert all(len(x) <= 120 for x in out), max(out, key=len)
    rows = [x for x in out if x.startswith(("mnist-cnn ", "mlp-scratch "))]
    ratios = [float(re.search(r"(\d+\.\d+)x \[", x).group(1)) for x in rows]
    assert len(rows) == 5 and ratios == sorted(ratios), rows
    j = json.loads(orch("compare", a, b, "--json").stdout)
    s = j["summary"]
    got = [m["ratio"] for m in j["matched"]]
    assert got == sorted(got) and s["n"] == 5 and sum(s["count"].values()) == 5
    gm = float(np.exp(np.mean(np.log(got))))
    assert abs(s["geomean"] - gm) < 1e-9 and s["geomean_lo"] <= gm <= s["geomean_hi"]
    assert "range" in s["geomean_method"] and s["geomean_interval"] == "range"  # 5 ratios: below 6, no 95% CI
    assert (s["geomean_lo"], s["geomean_hi"]) == (pytest.approx(min(got)), pytest.approx(max(got)))
    c = s["count"]
    assert out[0].startswith(
        f"5 configurations: {c['faster']} faster, {c['slower']} slower, {c['not_significant']} not significant"
    )
    assert f"geometric mean B/A {gm:.3f}x [range {s['geomean_lo']:.3f}-{s['geomean_hi']:.3f}: 5 ratios, too few" in " ".join(
        out[:2]
    )
    assert "95% CI" not in out[0]


def test_a_flagged_pair_is_never_a_regression_on_its_own(tmp_path):
    """B 20 % slower, but every B cell carries a noise flag: shown (⚑, what it would be), not
    called slower, not counted as a regression, and --fail-on-regression does not fail on it."""
    a, b = _quiet_pair(tmp_path, 0.8, flags="noisy(cv=25%)")
    r = orch("compare", a, b, "--fail-on-regression", "5%")
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines(r.stdout)[0].startswith(
        "5 configurations: 0 faster, 0 slower, 0 not significant, 5 flagged ⚑ not judged (5 would be slower)"
    )
    row = next(x for x in lines(r.stdout) if x.startswith("mnist-cnn numba-cpu resident"))
    assert "0.800x" in row and "⚑ slower? not judged" in row
    assert "not failing on 5 flagged configuration(s) that look slower" in r.stderr
    j = json.loads(orch("compare", a, b, "--json").stdout)
    assert j["regressions"] == [] and {m["verdict"] for m in j["matched"]} == {"flagged"}
    assert {m["would_be"] for m in j["matched"]} == {"slower"} and len(j["flagged_slower"]) == 5


def test_compare_counts_what_is_only_on_one_side_and_verbose_lists_it(tmp_path, cpu):
    for d in all_cells(cpu, "torch-cpu_seed"):
        shutil.rmtree(d)
    r = orch("compare", CPU, cpu)
    assert r.returncode == 0
    assert "only in A: 1 configuration (--verbose lists them)" in r.stdout and "torch-cpu seed" not in r.stdout
    r = orch("compare", CPU, cpu, "--verbose")
    assert "only in A (1):" in r.stdout and "- mnist-cnn torch-cpu seed default" in r.stdout


# ---------------------------------------------------------------------------- bad input
def _newer_schema(d: Path) -> Path:
    edit_rows(cell_dir(d, "numba-cpu"), lambda rows: rows[0].update(schema=99))
    return d


def _partial(d: Path) -> Path:
    c = cell_dir(d, "numba-cpu")
    (c / "rows.jsonl").rename(c / "rows.partial.jsonl")
    return d


def _other_study(d: Path) -> Path:
    shutil.rmtree(d / "mnist-cnn")
    return d


@pytest.mark.parametrize(
    "make,message,code,verify_code,verify_says",
    [  # exit 2: the path typed is not there; 1: it is, and what it holds cannot be compared or verified
        (lambda d: d.parent / "nope", "does not exist", 2, 2, "error"),
        (lambda d: (shutil.rmtree(d), d.mkdir())[1] or d, "no results under", 1, 1, "error"),
        (_newer_schema, "schema 99 is newer than this kit", 1, 1, "error"),
        (_partial, "did not finish", 1, 0, "interrupted"),  # compare refuses it; verify names it, no failure
        (_other_study, "nothing in common", 1, 0, ""),
    ],
    ids=["missing", "empty", "newer-schema", "partial", "other-study"],
)
def test_bad_input_one_line_nothing_overwritten(tmp_path, cpu, make, message, code, verify_code, verify_says):
    a = Path(shutil.copytree(CPU, tmp_path / "a"))
    shutil.rmtree(a / "mlp-scratch")  # A: mnist-cnn only
    bad = make(cpu)
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.json").write_text("keep")
    r = orch("compare", a, bad, "--out", out, "--fail-on-regression", "5%")
    assert r.returncode == code, r.stdout + r.stderr
    err = lines(r.stderr)
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], r.stderr
    assert (out / "compare.json").read_text() == "keep" and not (out / "compare.md").exists()
    r = orch("verify", bad)
    assert r.returncode == verify_code, r.stdout + r.stderr
    if verify_says == "error":
        err = lines(r.stderr)
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], r.stderr
    elif verify_says == "interrupted":
        assert not [x for x in lines(r.stdout) if x.startswith("FAIL")]
        assert len([x for x in lines(r.stdout) if x.startswith("interrupted ")]) == 1


def test_bad_options_one_line(tmp_path, cpu):
    for args, message in [
        (["compare", cpu, cpu, "--fail-on-regression", "5"], "ambiguous"),
        (["compare", cpu, cpu, "--out", cpu / "platforms.json"], "is a file"),
        (["verify", cpu, "--baseline", "no-such-set"], "no baseline set 'no-such-set'"),
    ]:
        r = orch(*args)
        assert r.returncode == 2 and lines(r.stderr)[-1].startswith("error: ") and message in r.stderr, (args, r.stderr)


def test_compare_says_when_the_two_sets_ran_in_other_environments():
    """A ratio between a native run and a container run (or other library versions) compares
    the environments too: compare says so, once, under its table."""
    from host.compare import _lists

    side = {"hosts": ["vm / EPYC"], "environments": []}
    res = {"only_a": [], "only_b": [], "not_compared": [], "unjudged": [], "regressions": [], "definition": ""}
    same = {
        **res,
        "matched": [
            {"a": {**side, "environments": ["native-torch2.14.1-1"]}, "b": {**side, "environments": ["native-torch2.14.1-1"]}}
        ],
    }
    other = {
        **res,
        "matched": [
            {"a": {**side, "environments": ["native-torch2.14.1-1"]}, "b": {**side, "environments": ["container-torch2.10.0-2"]}}
        ],
    }
    assert not any("other environments" in line for line in _lists(same, "- "))
    (line,) = [x for x in _lists(other, "- ") if "other environments" in x]
    assert "native-torch2.14.1-1" in line and "container-torch2.10.0-2" in line
