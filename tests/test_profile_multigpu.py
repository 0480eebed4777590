"""profile's many-GPU section (bench/studies/profile/multigpu.py) on cells built here and on the
committed 4x H200 reference: one row per configuration over its repeats, scaling efficiency with
its interval paired by repeat, DDP against DataParallel with what a run lacks said so, the
collapse's cause stated only where lab/dp_collapse.json's numbers show it, the scaling figure in
the palette's colours; lab/ JSON that cannot be trusted is one line and skipped; telemetry
figures and operator tables one per configuration (its median repeat). No torch needed."""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path

import pytest

from bench.core import palette
from bench.core.resultset import ResultCell, collect
from bench.core.text import short
from bench.studies.profile import labfiles, multigpu, report

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference" / "H200-x4"
VERDICTS = re.compile(r"\b(holds|does not hold|undecided|faster|slower|no clear winner)\b", re.I)


def _cells(tmp: Path, name: str, ips: list[float], *, parallel: str = "none", gpus: int = 1, bench: bool = True,
           variant: str = "finetune", run: str = "run", profile: dict | None = None) -> list[ResultCell]:  # fmt: skip
    """One configuration, a cell per repeat (IPS[i]: repeat i's img/s, every epoch), in run dir TMP/RUN;
    GPU i of a cell: own memory 1000 + 500 i MB (torch; NVML reads 90,000 in use), utilisation 50 + i %,
    0.1 x (i + 1) J/img."""
    out = []
    devices = [str(i) for i in range(gpus)] if gpus > 1 else []
    params = {"parallel": parallel, "cudnn_benchmark": bench, "batch_size": 128, "pipeline": "synthetic-gpu"}
    for r, v in enumerate(ips):
        d = tmp / run / "profile" / f"{name}-r{r}"
        d.mkdir(parents=True, exist_ok=True)
        per_gpu = {f"gpu{i}_{k}": f(i) for i in range(gpus) for k, f in (
            ("mem_used_mb_max", lambda i: 90000.0), ("util_pct_mean", lambda i: 50.0 + i),
            ("j_per_img", lambda i: 0.1 * (i + 1)))}  # fmt: skip
        # the cell's own memory is torch's per GPU; NVML's device-wide reading (every process) is never read
        per_gpu |= {f"gpu{i}_alloc_peak_mb_torch": 1000.0 + 500 * i for i in range(gpus)}
        base = {"study": "profile", "backend": "torch-cuda", "variant": variant, "repeat": r, "status": "ok",
                "device": "NVIDIA H200", "host": "vm", "phase": "epoch", "parallel": parallel, "world_size": gpus,
                "cudnn_benchmark": bench, "pipeline": "synthetic-gpu", "batch_size": 128, "global_batch": 128 * gpus,
                "model": "densenet121", "image_size": 224, "steps": 30, "samples": 30 * 128 * gpus,
                "epoch_s": 30 * 128 * gpus / v, "samples_per_s": v, **per_gpu}  # fmt: skip
        rows = [{**base, "epoch": e} for e in (1, 2, 3)]
        if profile:
            (d / "profile.json").write_text(json.dumps({"breakdown": profile}))
            rows.append({**base, "phase": "profile"})
        spec = {"study": "profile", "backend": "torch-cuda", "variant": variant, "repeat": r, "params": params,
                "devices": devices}  # fmt: skip
        out.append(ResultCell(d, rows, system={"telemetry": {"gpus": list(range(gpus))}}, spec=spec))
    return out


def _table(lines: list[str], header_start: str) -> list[list[str]]:
    """The markdown table whose header starts with HEADER_START: its body rows, cells stripped."""
    text = "\n".join(lines)
    block = text[text.index("| " + header_start) :].split("\n\n")[0].splitlines()
    return [[x.strip() for x in ln.strip().strip("|").split("|")] for ln in block[2:]]


ONE, DDP2, DDP4 = [1000.0, 1010.0, 990.0], [1900.0, 1950.0, 1800.0], [3600.0, 3700.0, 3900.0]


@pytest.fixture
def built(tmp_path):
    cells = _cells(tmp_path, "one", ONE, profile={"mean_kernel_count": 2000.0, "mean_step_ms": 100.0, "idle_share": 0.3})
    cells += _cells(tmp_path, "ddp2", DDP2, parallel="ddp", gpus=2)
    cells += _cells(tmp_path, "ddp4", DDP4, parallel="ddp", gpus=4)
    cells += _cells(tmp_path, "dp-on", [40.0], parallel="dp", gpus=2,
                    profile={"mean_kernel_count": 10000.0, "mean_step_ms": 5000.0, "idle_share": 0.9})  # fmt: skip
    cells += _cells(tmp_path, "dp-off", [600.0, 620.0, 610.0], parallel="dp", gpus=2, bench=False,
                    profile={"mean_kernel_count": 4000.0, "mean_step_ms": 400.0, "idle_share": 0.6})  # fmt: skip
    cells += _cells(tmp_path, "bf-one", [2000.0, 2100.0, 2200.0], variant="finetune+bf16-cl")
    cells += _cells(tmp_path, "bf-ddp2", [3000.0, 4000.0, 4200.0], parallel="ddp", gpus=2, variant="finetune+bf16-cl")
    return tmp_path, cells


def test_one_row_per_configuration_and_efficiency_paired_by_repeat(built):
    """Efficiency = median(N-GPU) / (N x median(one GPU)), its interval the range of the per-repeat
    ratios (3 repeats); one repeat: no interval; per GPU in order; a missing DataParallel setting 'not run'."""
    tmp, cells = built
    (tmp / "out").mkdir()
    lines = multigpu.section(cells, tmp / "out")
    rows = _table(lines, "configuration | parallel | GPUs")
    assert len(rows) == 7  # one per configuration, not one per cell (15)
    by = {(r[0], r[2]): r for r in rows}
    r2 = by[("GPU finetune, synthetic-gpu, b128, ddp x2", "2")]
    per = [a / (2 * b) for a, b in zip(DDP2, ONE, strict=True)]
    assert r2[6] == f"{statistics.median(DDP2) / (2 * statistics.median(ONE)):.3f}"
    assert r2[7] == f"{min(per):.3f}–{max(per):.3f} (range of 3)"
    assert r2[8] == "1,000 · 1,500" and r2[9] == "50 · 51" and r2[10] == "0.100 · 0.200"
    r4 = by[("GPU finetune, synthetic-gpu, b128, ddp x4", "4")]
    assert r4[6] == f"{statistics.median(DDP4) / (4 * statistics.median(ONE)):.3f}" and r4[3] == "3"
    on = by[("GPU finetune, synthetic-gpu, b128, dp x2", "2")]
    assert on[1] == "DataParallel, cudnn.benchmark on" and on[3] == "1" and on[7] == "n=1, no interval"
    assert by[("GPU finetune, synthetic-gpu, b128", "1")][7] == "(the base)"
    vs = _table(lines, "DDP configuration")
    bf_off = [r for r in vs if r[0].startswith("GPU finetune+bf16-cl") and r[1].endswith("benchmark off")]
    assert [r[3] for r in bf_off] == ["not run here"]
    fp_off = next(r for r in vs if r[0].endswith("ddp x2") and "bf16" not in r[0] and r[1].endswith("off"))
    assert fp_off[5] == f"{short(statistics.median(DDP2) / 610.0)}x" and fp_off[4] == "3 / 3"
    assert not any(VERDICTS.search(x) for r in rows + vs for x in r)


def test_the_dp_cells_kernels_per_step_against_the_one_gpu_cells(built):
    tmp, cells = built
    (tmp / "out").mkdir()
    rows = _table(multigpu.section(cells, tmp / "out"), "configuration | parallel | repeats | images a step")
    got = {r[1]: r for r in rows}
    assert set(got) == {"one GPU", "DataParallel, cudnn.benchmark on", "DataParallel, cudnn.benchmark off"}
    assert got["DataParallel, cudnn.benchmark on"][6:8] == ["10,000", "5.00x"]
    assert got["DataParallel, cudnn.benchmark off"][6:8] == ["4,000", "2.00x"] and got["one GPU"][3] == "128"


def test_the_scaling_figure_draws_each_variant_in_the_palettes_colours(built):
    from PIL import Image

    tmp, cells = built
    (tmp / "out").mkdir()
    lines = multigpu.section(cells, tmp / "out")
    assert "![scaling over GPUs: run](profile_scaling_0.png)" in lines
    with Image.open(tmp / "out" / "profile_scaling_0.png") as im:
        colours = {c for _, c in im.convert("RGB").getcolors(1 << 20)}
    want = palette.colors([("finetune", "nvidia"), ("finetune+bf16-cl", "nvidia")])
    for hexcode in want.values():
        assert tuple(int(hexcode[i : i + 2], 16) for i in (1, 3, 5)) in colours


def test_the_reference_section_reads_every_configuration_and_states_the_measured_cause(tmp_path):
    cells, _, problems = collect([REF])
    assert not problems and len(cells) == 23
    lines = report.section(cells, tmp_path)
    text = "\n".join(lines)
    sect = text[text.index("#### Two GPUs") : text.index("#### Step-time breakdown")]
    rows = _table(lines, "configuration | parallel | GPUs")
    assert len(rows) == 9 and sorted(int(r[2]) for r in rows) == [1, 1, 2, 2, 2, 2, 2, 4, 4]
    fp2 = next(r for r in rows if r[0] == "GPU finetune, synthetic-gpu, b128, ddp x2")
    assert fp2[6] == "0.929" and fp2[7] == "0.900–0.973 (range of 3)"
    assert "kit / bare 0.984 [0.966–1.031, range of 3] over 3 repeats" in sect
    doc = json.loads((REF / "lab" / "dp_collapse.json").read_text())
    p = {(x["place"], x["cudnn_benchmark"]): x for x in doc["places"]}
    main, fresh, worker = p[("main", True)], p[("fresh", True)], p[("worker", True)]
    assert round(statistics.median(main["step_ms"]), 1) == 90.0 and round(statistics.median(worker["step_ms"]), 1) == 92.5
    assert round(statistics.median(fresh["step_ms"])) == 2597 and (fresh["events_per_step"], main["events_per_step"]) == (
        5537,
        2247,
    )
    cause = next(x for x in lines if x.startswith("**Cause.**"))
    for figure in ("90.0 ms", "2,597 ms", "5,537", "2,247", "92.5 ms"):
        assert figure in cause
    assert "not run here" in sect  # DataParallel with benchmark off at bf16-cl was not run
    assert (tmp_path / "profile_scaling_0.png").is_file()
    # telemetry and operator figures: one per configuration, from its median repeat
    assert len(list(tmp_path.glob("profile_telemetry_*.png"))) == 9
    ops = re.findall(r"^##### (.*: top \d+ operators by self device time.*)$", text, flags=re.M)
    assert len(ops) == len(set(ops)) == 5
    assert any("(repeat 2, the median of 3 by throughput)" in o for o in ops)


def test_the_representative_repeat_is_the_median_by_throughput(tmp_path):
    cells = _cells(tmp_path, "one", [10.0, 30.0, 20.0]) + _cells(tmp_path, "two", [5.0, 7.0], parallel="ddp", gpus=2)
    reps = {name: (c.repeat, which) for name, c, which in report.representatives(cells)}
    assert reps["GPU finetune, synthetic-gpu, b128"] == (2, "repeat 2, the median of 3 by throughput")
    assert reps["GPU finetune, synthetic-gpu, b128, ddp x2"][0] == 0  # the lower of two


# ---- lab/ JSON: untrusted


def _with_lab(built, name: str, content: bytes | None = None, link: Path | None = None) -> list[str]:
    tmp, cells = built
    (tmp / "run" / "lab").mkdir(exist_ok=True)
    target = tmp / "run" / "lab" / name
    if link is not None:
        os.symlink(link, target)
    elif content is not None:
        target.write_bytes(content)
    (tmp / "out").mkdir(exist_ok=True)
    return multigpu.section(cells, tmp / "out")


GOOD = (REF / "lab" / "dp_collapse.json").read_bytes() if REF.is_dir() else b"{}"


def _edit(fn) -> bytes:
    doc = json.loads(GOOD)
    fn(doc)
    return json.dumps(doc).encode()


BAD = {
    "not JSON": b"{not json",
    "NaN": GOOD.replace(b"89.99442300000737", b"NaN"),
    "a string for a number": _edit(lambda d: d["places"][0].update(first_step_ms="22466")),
    "a bool for a count": _edit(lambda d: d["places"][0].update(events_per_step=True)),
    "a negative step": _edit(lambda d: d["places"][1].update(step_ms=[-1.0, 2.0])),
    "a place twice": _edit(lambda d: d["places"].__setitem__(1, {**d["places"][0]})),
    "an unknown place": _edit(lambda d: d["places"][0].update(place="elsewhere")),
    "a device name of 10,000 characters": _edit(lambda d: d["meta"].update(device_name="x" * 10_000)),
    "no steps": _edit(lambda d: d["places"][0].update(step_ms=[])),
    "an array": b"[1, 2]",
    "over the size bound": b'{"pad": "' + b"x" * (labfiles.MAX_BYTES + 10) + b'"}',
}


@pytest.mark.parametrize("what", list(BAD))
def test_a_dp_collapse_json_that_cannot_be_trusted_is_one_line_and_skipped(built, what):
    lines = _with_lab(built, "dp_collapse.json", BAD[what])
    said = [x for x in lines if "dp_collapse.json` of run" in x]
    assert len(said) == 1 and said[0].startswith("`lab/dp_collapse.json` of run run not read: "), said
    assert "\n" not in said[0] and len(said[0]) < 400
    assert not any(x.startswith(("**Cause.**", "(b)")) for x in lines)
    assert any(x.startswith("| configuration | parallel | GPUs") for x in lines)  # the rest of the section stands


def test_a_symlinked_lab_file_is_never_read(built, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "dp_collapse.json"
    outside.write_bytes(GOOD)
    lines = _with_lab(built, "dp_collapse.json", link=outside)
    assert any("not read: a symlink or not a regular file" in x for x in lines)
    assert not any(x.startswith("**Cause.**") for x in lines)


def test_markup_in_a_lab_file_is_shown_as_text(built):
    doc = _edit(lambda d: d["meta"].update(device_name="<script>x</script> | [a](javascript:b)", torch="`2`"))
    lines = _with_lab(built, "dp_collapse.json", doc)
    (intro,) = [x for x in lines if x.startswith("(b) ")]
    assert "<script>" not in intro and "&lt;script&gt;" in intro and "\\](javascript" in intro and "\\|" in intro
    assert not re.search(r"(?<!\\)\]\(javascript", intro)  # the link's bracket escaped: no link


def test_the_cause_is_stated_only_where_the_numbers_show_it(built):
    def same_as_main(d: dict) -> None:  # a fresh thread as fast as the main one: no repeated search
        main = next(p for p in d["places"] if p["place"] == "main" and p["cudnn_benchmark"])
        fresh = next(p for p in d["places"] if p["place"] == "fresh" and p["cudnn_benchmark"])
        fresh.update(step_ms=main["step_ms"], events_per_step=main["events_per_step"])

    lines = _with_lab(built, "dp_collapse.json", _edit(same_as_main))
    assert not any(x.startswith("**Cause.**") for x in lines)
    assert any(x.startswith("These numbers do not show a per-thread search repeated every step") for x in lines)
    lines = _with_lab(built, "dp_collapse.json", GOOD)
    assert any(x.startswith("**Cause.** cuDNN's benchmarked algorithm choices are cached per thread") for x in lines)


@pytest.mark.parametrize(
    "content",
    [b'{"world": 2, "kit": {"0": 1.0}, "bare": {"1": 1.0}}', b'{"world": 2, "kit": {"x": 1.0}, "bare": {"x": 1.0}}',
     b'{"world": 2, "kit": {"0": -1.0}, "bare": {"0": 1.0}}', b'{"world": "2", "kit": {"0": 1.0}, "bare": {"0": 1.0}}'],
)  # fmt: skip
def test_a_kit_vs_bare_json_that_cannot_be_trusted_is_one_line(built, content):
    lines = _with_lab(built, "kit_vs_bare_ddp.json", content)
    said = [x for x in lines if "kit_vs_bare_ddp.json` of run" in x]
    assert len(said) == 1 and "not read: " in said[0] and not any("kit / bare" in x for x in lines)


def test_kit_over_bare_is_computed_again_from_its_repeats(built):
    doc = b'{"world": 2, "kit": {"0": 100.0, "1": 110.0, "2": 90.0}, "bare": {"0": 100.0, "1": 100.0, "2": 100.0}, "ratio": 9}'
    lines = _with_lab(built, "kit_vs_bare_ddp.json", doc)
    assert any("kit / bare 1.000 [0.900–1.100, range of 3] over 3 repeats" in x for x in lines)
