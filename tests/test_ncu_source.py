"""lab/ncu_source.py: the per-line reading of ncu's source page (CSV), on a file in its shape."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from lab.ncu_source import kernels, main

ROOT = Path(__file__).resolve().parent.parent

HEADER = '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"'
PAGE = "\n".join(
    [
        "==PROF== Connected to process 1",
        '"File Path","/x/v6_sparse.py"',
        '"Function Name","a::b::k6_conv_bwd[abi:v54,cw51](Array<float, 4>)"',
        HEADER,
        '"10","g = g2s[k]","-","-","30","1,000"',
        '"","","0x7f00","  LDS R1, [R2]","30","1000"',
        '"11","cuda.syncthreads()","-","-","70","10"',
        '"File Path","/x/net.py"',
        '"Function Name","net::k4_conv_fwd[abi:v1]"',
        HEADER,
        '"5","sample(n)","-","-","9","90"',
    ]
)


def test_each_launch_sums_its_source_lines_and_skips_the_instruction_rows():
    ks = kernels(PAGE)
    assert [k["name"] for k in ks] == ["k6_conv_bwd", "k4_conv_fwd"]
    lines = {x["line"]: x for x in ks[0]["lines"]}
    assert set(lines) == {10, 11}  # the instruction row under line 10 is not a line of its own
    assert lines[10]["instructions"] == 1000 and lines[11]["stall_samples"] == 70
    assert lines[11]["source"] == "cuda.syncthreads()"


def test_the_summary_ranks_lines_by_stall_samples_and_reads_gzip(tmp_path, capsys):
    f = tmp_path / "src.csv.gz"
    f.write_bytes(gzip.compress(PAGE.encode()))
    assert main([str(f), "--top", "1", "--json", str(tmp_path / "o.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("k6_conv_bwd (v6_sparse.py): 100 stall samples")
    assert "70.0% samples" in out[1] and "line   11" in out[1]
    assert (tmp_path / "o.json").is_file()


def test_a_file_that_is_no_source_page_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("ncu: no kernels were profiled\n")
    for path in (bad, tmp_path / "missing.csv"):
        r = subprocess.run([sys.executable, "-m", "lab.ncu_source", str(path)], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "ncu_source:" in r.stderr, r.stderr
