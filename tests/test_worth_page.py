"""The worth section at 1400 px (issue 57 item 3), checked in a headless browser: every worth table
fits the window with its break-even beside the time ratio, its text at least 10 px, and each worth
figure shown at its own size (no smaller), at least 450 px wide."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

MEASURE = """
(function(){
  var out = [];
  Array.from(document.querySelectorAll('div.worth table')).forEach(function(t){
    var ths = Array.from(t.querySelectorAll('th'));
    var be = ths.filter(function(c){ return /first above/.test(c.textContent); })[0];
    var fonts = Array.from(t.querySelectorAll('th,td')).map(function(c){ return parseFloat(getComputedStyle(c).fontSize); });
    out.push({kind: 'table', last: ths[ths.length - 1].getBoundingClientRect().right,
              be: be ? be.getBoundingClientRect().right : null, font: Math.min.apply(null, fonts)});
  });
  Array.from(document.querySelectorAll('img')).filter(function(i){ return /to finish against the work/.test(i.alt); }).forEach(function(i){
    out.push({kind: 'img', shown: i.getBoundingClientRect().width, natural: i.naturalWidth});
  });
  var pre = document.createElement('pre'); pre.id = 'measured';
  pre.textContent = JSON.stringify({width: innerWidth, items: out});
  document.body.appendChild(pre);
})();
"""


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium here (Debian: apt-get install chromium)")
def test_the_worth_section_fits_1400_px_with_legible_text_and_figures(tmp_path):
    dirs = [REF / "H200", REF / "cpu-2core-epyc"]
    if not all(d.is_dir() for d in dirs):
        pytest.skip("the committed references are not in this checkout")
    out = tmp_path / "report"
    r = subprocess.run(
        [sys.executable, "orchestrate.py", "report", *map(str, dirs), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    html = (out / "REPORT.html").read_text()
    # the page forbids scripts (its CSP): a copy without it measures the layout
    probe = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace(
        "</body>", f"<script>{MEASURE}</script></body>"
    )
    page = out / "measure.html"
    page.write_text(probe)
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180,
    ).stdout  # fmt: skip
    got = json.loads(re.search(r'<pre id="measured">(.*?)</pre>', dom, flags=re.S).group(1))
    assert got["width"] == 1400
    tables = [x for x in got["items"] if x["kind"] == "table"]
    imgs = [x for x in got["items"] if x["kind"] == "img"]
    assert tables and imgs
    for t in tables:
        assert t["be"] is not None and t["be"] <= 1400 and t["last"] <= 1400, t
        assert t["font"] >= 10, t
    for i in imgs:
        assert i["natural"] >= 450 and i["shown"] >= i["natural"] - 1, i
