"""A result dir is untrusted input: markup in any of its strings never becomes markup in
REPORT.md or REPORT.html, every markdown table keeps its columns, and a reason is one line
(when the cell writes it and when the report shows it).

The hostile dir is made from committed results (results/reference/): every string field of
rows.jsonl, cell.json, system.json, profile.json and platforms.json gets markup appended, a
cell dir's name carries markup, one cell fails with a multi-line reason full of markup and
`|`, one has a corrupt line, one belongs to a study whose name is markup. Kept as they are:
`study`, `status` and `phase` (they pick which code reads a row: a row with markup there is
simply not shown, or is a corrupt or unknown-study cell, which the dir also holds).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench.core.rows import read_rows
from bench.core.text import md, md_code, one_line, plot_text, safe_name

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
REF = ROOT / "results" / "reference"
MARKUP = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    '<iframe src="javascript:alert(1)"></iframe>',
    "![y](javascript:alert(2))",
    "<javascript:alert(3)>",
    "a|b\n| c | d |\n\ne`f`&amp;",
)
PAYLOAD = " ".join(MARKUP)
KEEP = {"study", "status", "phase"}
REASON = (
    "Caught RuntimeError in DataLoader worker process 0.\n"
    "Original Traceback (most recent call last):\n"
    '  File "<script>alert(1)</script>", line 7, in fetch\n'
    "    data = [self.dataset[idx] for idx in possibly_batched_index]\n"
    "            ^^^^^^^^^^^^^^^^^\n"
    "| a | b |\n"
    "╰──────────────────────────────╯\n"
    "RuntimeError: <img src=x onerror=alert(1)> | [x](javascript:alert(1)) | last line\n\n"
)
# (source dir, study, cells): a few committed cells of every study the report renders
SOURCES = [
    ("cpu-2core-epyc", "mnist-cnn", None),
    ("cpu-2core-epyc", "mlp-scratch", None),
    ("cpu-2core-epyc-cifar-opt-default", "cifar-opt", ("torch-cpu_resnet18_int8-",)),
    ("H100-80GB-HBM3-cifar-opt", "cifar-opt", ("torch-cuda_mobilenet_v2_optuna-21f6aca9b96a",)),
    (
        "H100-80GB-HBM3-roofline",
        "roofline",
        (
            "torch-cuda_resnet18_fp32_loader_b128-",
            "torch-cuda_resnet18_fp32_synthetic-gpu_b128-",
            "torch-cuda_resnet18_fp32_sweep-",
        ),
    ),
    (
        "H100-80GB-HBM3-profile",
        "profile",
        (
            "torch-cuda_finetune_loader_b64-",
            "torch-cuda_finetune_synthetic-gpu_b128_ddp-",
            "torch-cuda_finetune_synthetic-gpu_b128_dp-",
        ),
    ),
]
CELL_FILES = ("cell.json", "rows.jsonl", "system.json", "profile.json", "telemetry.csv", "optuna-journal.log")


def poison(v, key: str = ""):
    """V with PAYLOAD appended to every string (dict values, list items), keys in KEEP left."""
    if isinstance(v, dict):
        return {k: poison(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [poison(x, key) for x in v]
    if isinstance(v, str) and key not in KEEP:
        return f"{v} {PAYLOAD}"
    return v


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1), encoding="utf-8")


def write_rows(cell: Path, rows: list[dict]) -> None:
    (cell / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def copy_cells(src: Path, dest: Path, prefixes: tuple[str, ...] | None) -> list[Path]:
    out = []
    for d in sorted(src.iterdir()):
        if not d.is_dir() or (prefixes and not d.name.startswith(prefixes)):
            continue
        to = dest / d.name
        to.mkdir(parents=True)
        for f in CELL_FILES:
            if (d / f).is_file():
                shutil.copyfile(d / f, to / f)
        out.append(to)
    return out


def hostile_dir(root: Path) -> Path:
    """ROOT/hostile: committed cells with markup in every string field (see the module doc)."""
    res = root / "hostile"
    cells: list[Path] = []
    for src, study, prefixes in SOURCES:
        cells += copy_cells(REF / src / study, res / study, prefixes)
    assert len(cells) >= 20, cells
    for cell in cells:
        rows = [poison(r) for r in read_rows(cell / "rows.jsonl")]
        write_rows(cell, rows)
        for name in ("cell.json", "system.json", "profile.json"):
            if (cell / name).is_file():
                obj = poison(json.loads((cell / name).read_text(encoding="utf-8")))
                if name == "system.json":  # the unclean-tree banner shows the sha
                    obj["kit_source"] = {**(obj.get("kit_source") or {}), "dirty": True}
                if name == "profile.json" and isinstance(obj.get("breakdown"), dict):
                    obj["breakdown"][f"mean_{MARKUP[1]}_ms"] = 1.0  # a key that becomes a column header
                write_json(cell / name, obj)
    # a cell dir whose name is markup (no '/' in it), and one that failed with a long reason
    mnist = sorted((res / "mnist-cnn").iterdir())
    mnist[0].rename(mnist[0].with_name(f"{mnist[0].name} {MARKUP[1]}"))
    failed = mnist[1]
    rows = read_rows(failed / "rows.jsonl")
    write_rows(failed, [{**r, "status": "incomplete"} for r in rows[:2]] + [{**rows[0], "status": "error", "reason": REASON}])
    mlp = sorted((res / "mlp-scratch").iterdir())[0]
    rows = read_rows(mlp / "rows.jsonl")
    write_rows(mlp, rows + [{**rows[0], "backend": "cupy", "phase": "plain", "status": "skipped", "reason": REASON}])
    # a corrupt line (its status is markup), and a study that is markup
    bad = res / "mnist-cnn" / "corrupt"
    bad.mkdir()
    (bad / "rows.jsonl").write_text(json.dumps({"study": "mnist-cnn", "status": MARKUP[0], "cell": MARKUP[1]}) + "\n")
    other = res / MARKUP[1] / "x"
    other.mkdir(parents=True)
    write_rows(other, [{"study": PAYLOAD, "status": "ok", "cell": PAYLOAD}])
    write_json(
        res / "platforms.json",
        poison(
            {
                "cpu": {"status": "ran", "reason": "", "runtime": "native"},
                "cuda": {"status": "failed", "reason": REASON, "runtime": "docker"},
                PAYLOAD: {"status": "skipped", "reason": REASON},
            }
        ),
    )
    return res


def report(dirs: list[Path], out: Path) -> tuple[str, str]:
    r = subprocess.run(
        [sys.executable, str(ROOT / "orchestrate.py"), "report", *map(str, dirs), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return (out / "REPORT.md").read_text(encoding="utf-8"), (out / "REPORT.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[str, str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    md_text, html = report([hostile_dir(root)], root / "report")
    return md_text, html, root / "report"


# ---- what the checks look for -----------------------------------------------------------
def tables(md_text: str) -> list[tuple[list[str], str | None]]:
    """Every markdown table: (its lines, the line after it or None at the end); a table is a
    run of lines starting with '|'."""
    out: list[tuple[list[str], str | None]] = []
    rows: list[str] = []
    for line in [*md_text.split("\n"), None]:
        if line is not None and line.startswith("|"):
            rows.append(line)
        elif rows:
            out.append((rows, line))
            rows = []
    return out


def columns(line: str) -> int:
    """Cells of a table line as markdown-it splits it: a '|' escaped by a backslash is no border."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def assert_tables_keep_their_columns(md_text: str) -> None:
    found = tables(md_text)
    assert found
    for t, after in found:
        assert len(t) >= 2 and re.fullmatch(r"\|(---\|)+", t[1]), t[:2]
        assert {columns(line) for line in t} == {columns(t[0])}, "\n".join(t)
        assert after in (None, ""), (t[-1], after)  # no row goes on on the next line


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    handle_startendtag = handle_starttag


# what markdown-it renders from the kit's markdown, plus the kit's page and its <details>
SAFE_TAGS = {"html", "head", "meta", "title", "style", "body", "details", "summary", "hr", "br"}
SAFE_TAGS |= {"h1", "h2", "h3", "h4", "h5", "h6", "p", "blockquote", "ul", "ol", "li", "em", "strong", "code", "pre"}
SAFE_TAGS |= {"table", "thead", "tbody", "tr", "th", "td", "img", "a", "nav", "div"}  # nav: the contents; div: the answers


def assert_no_live_markup(md_text: str, html: str) -> None:
    # REPORT.md: no tag but the kit's own <details>/<summary> and its answers' <div> lines, no link to javascript:
    assert not re.search(r"<\s*(script|img|iframe|svg|object|embed)", md_text, re.I)
    assert {t.lower() for t in re.findall(r"</?\s*([a-zA-Z][\w-]*)", md_text)} <= {"details", "summary", "div"}
    divs = [line for line in md_text.splitlines() if re.search(r"</?\s*div", line, re.I)]
    assert all(line in ('<div class="headline">', '<div class="claims">', "</div>") for line in divs), divs
    assert not re.search(r"<[^>]*onerror", md_text, re.I)
    assert not re.search(r"(?<!\\)\]\(\s*javascript:", md_text, re.I)
    # REPORT.html: no executable tag, attribute or URL; the CSP forbids scripts besides
    p = Tags()
    p.feed(html)
    names = {t for t, _ in p.tags}
    assert names <= SAFE_TAGS, names - SAFE_TAGS
    for tag, attrs in p.tags:
        assert not any(k.lower().startswith("on") for k in attrs), (tag, attrs)
        for k in ("href", "src", "action", "formaction", "xlink:href"):
            v = re.sub(r"\s", "", attrs.get(k, "")).lower()
            assert not v.startswith(("javascript:", "vbscript:", "data:text")), (tag, attrs)
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,"), attrs["src"][:80]
    csp = [a["content"] for t, a in p.tags if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy"]
    assert len(csp) == 1 and "default-src 'none'" in csp[0] and "script-src" not in csp[0], csp
    assert html.index("Content-Security-Policy") < html.index("<body>")


# ---- the tests ----------------------------------------------------------------------------
def test_markup_in_every_string_of_a_result_dir_is_shown_as_text_never_run(hostile):
    md_text, html, out = hostile
    assert_no_live_markup(md_text, html)
    # the values did reach the report, escaped: shown as the text they are
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md_text and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "[x\\](javascript:alert(1))" in md_text and "[x](javascript:alert(1))" in html
    for section in ("## mnist-cnn", "## mlp-scratch", "## cifar-opt", "## roofline", "## profile", "### Not run"):
        assert any(line.startswith(section) for line in md_text.split("\n")), section
    assert "(not a study of this checkout)" in md_text and "Unclean source tree" in md_text
    box = next(line for line in md_text.split("\n") if "**Unclean source tree**" in line)
    assert f"under `{out.parent / 'hostile'}` ran" in box, box  # the box names the result dir it is about
    assert "## Lines that could not be read" in md_text
    # every figure the report links is a file it wrote under OUT (no name taken from a dir)
    figures = re.findall(r"!\[(?:\\.|[^\\\]\n])*\]\(([^)\s]*)\)", md_text)  # an escaped ']' ends no alt text
    assert len(figures) >= 6
    for name in figures:
        assert re.fullmatch(r"[A-Za-z0-9._-]+\.png", name) and (out / name).is_file(), name
    assert (out / "REPORT.html").stat().st_size > 10_000


def test_every_table_keeps_its_columns_and_a_reason_is_one_line(hostile):
    md_text, html, _ = hostile
    assert_tables_keep_their_columns(md_text)
    shown = one_line(REASON)
    assert shown.startswith("RuntimeError:") and shown.endswith("last line")
    reason_rows = [line for line in md_text.split("\n") if "last line" in line]
    assert reason_rows and all(md(shown) in line for line in reason_rows), reason_rows
    assert "Original Traceback" not in md_text and "╰" not in md_text


def test_a_reason_with_newlines_and_pipes_keeps_every_table_whole(tmp_path):
    """Committed results, one cell failed with a multi-line reason full of '|', a platform note
    the same, and '|' and newlines in a device name: every table keeps its column count."""
    res = tmp_path / "res"
    for study in ("mnist-cnn", "mlp-scratch"):
        copy_cells(REF / "cpu-2core-epyc" / study, res / study, None)
    reason = "step 3 failed:\n| col | col |\n|---|---|\nValueError: a | b || c\n"
    failed = sorted((res / "mnist-cnn").iterdir())[0]
    rows = read_rows(failed / "rows.jsonl")
    write_rows(failed, [{**rows[0], "status": "error", "reason": reason}])
    for cell in sorted((res / "mnist-cnn").iterdir())[1:3]:
        write_rows(cell, [{**r, "device": "EPYC | 2 cores\n| x | y |", "host": "a|b"} for r in read_rows(cell / "rows.jsonl")])
    write_json(res / "platforms.json", {"cuda": {"status": "failed", "reason": reason}})
    md_text, html = report([res], tmp_path / "report")
    assert_tables_keep_their_columns(md_text)
    assert "ValueError: a \\| b \\|\\| c" in md_text and "<td>ValueError: a | b || c</td>" in html
    assert_no_live_markup(md_text, html)


def test_a_failing_cell_writes_its_reason_as_one_line(tmp_path):
    """bench/run/cell.py: a multi-line exception (a worker's traceback in rich's frames) is
    written as its last meaningful line."""
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(TESTS)!r})
        import toy_study
        from bench.core.registry import get_study
        from bench.core.request import Paths
        from bench.run.cell import run_cell

        def step(self, i):
            raise RuntimeError({REASON!r})

        toy_study.ToyRun.step = step
        cell = get_study("toy").cell("py", name="toy-py")
        try:
            run_cell(cell, Paths(Path({str(tmp_path)!r})))
        except RuntimeError:
            print(cell.dir(Path({str(tmp_path)!r})))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "KIT_DATA_DIR"}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    rows = read_rows(Path(r.stdout.strip().splitlines()[-1]) / "rows.jsonl")
    assert rows[-1]["status"] == "error"
    assert rows[-1]["reason"] == "RuntimeError: <img src=x onerror=alert(1)> | [x](javascript:alert(1)) | last line"


def test_one_line_keeps_the_last_meaningful_line():
    worker = (
        "Caught ValueError in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n"
        '  File "/x/worker.py", line 349, in _worker_loop\n    data = fetcher.fetch(index)\n'
        "           ^^^^^^^^^^^^^^^^^^^^\nValueError: image 17 is truncated\n"
    )
    assert one_line(f"RuntimeError: {worker}") == "ValueError: image 17 is truncated"
    rich = (
        "\x1b[31m╭─────────────── Traceback (most recent call last) ───────────────╮\x1b[0m\n"
        "│ /x/trainer.py:88 in step                                        │\n"
        "│ ❱ 88 │   loss.backward()                                          │\n"
        "╰─────────────────────────────────────────────────────────────────╯\n"
        "\x1b[1mOutOfMemoryError:\x1b[0m CUDA out of memory.\n"
        "━━━━━━━━━━━━━━━━━━━━━━━━━━━━━\n   \n"
    )
    assert one_line(rich) == "OutOfMemoryError: CUDA out of memory."
    assert one_line("│ only inside a frame │\n╰────╯") == "only inside a frame"
    assert one_line("ValueError: one line") == "ValueError: one line"
    assert one_line("a\tb\r\nc  \x00 d\u2028") == "c d"
    assert one_line("") == "" and one_line(None) == "" and one_line("\n ╰──╯ \n^^^\n") == ""
    long = one_line("x" * 2000)
    assert len(long) == 500 and long.endswith("…") and len(one_line("y" * 80, 20)) == 20
    assert "\n" not in one_line("a\n" * 1000)


def test_markdown_escaping_helpers():
    assert md("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert md("[x](javascript:alert(1))") == "[x\\](javascript:alert(1))"
    assert md("a|b\nc`d`&e\\") == "a\\|b c\\`d\\`&amp;e\\\\"
    assert md("1.2x [1.0-1.4]") == "1.2x [1.0-1.4]"  # the kit's own brackets stay
    assert md(None) == "" and md(3) == "3"
    assert md_code("/tmp/res") == "`/tmp/res`" and md_code("/tmp/`x`<y>") == "/tmp/\\`x\\`&lt;y&gt;"
    assert plot_text("$\\frac$ a\nb") == "\\$\\frac\\$ a b"
    assert safe_name("torch-cpu_seed_default-89a4ae6b4f42") == "torch-cpu_seed_default-89a4ae6b4f42"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", safe_name("x <img src=x onerror=alert(1)>"))
    assert safe_name("a b") != safe_name("a_b") and not safe_name("..").startswith(".")


def test_a_hostile_command_cannot_leave_its_block_in_the_bundles_commands():
    """COMMANDS.md shows each cell's recorded command in a bash block: a command holding a
    newline and a fence stays inside it, as one line."""
    from host.export import fenced

    block = fenced("python -m bench cell x\n```\n<script>alert(1)</script>\n```bash\nrm -rf ~")
    assert len(block) == 3 and block[0] == "````bash" and block[2] == "````"
    assert "\n" not in block[1] and "````" not in block[1]
