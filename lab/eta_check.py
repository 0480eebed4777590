"""Replay a run's ETA trace (KIT_ETA_TRACE=FILE, bench/run/eta.py) and say how far the ETA it
showed was from the time that was really left.

    KIT_ETA_TRACE=/tmp/eta.jsonl python orchestrate.py all
    python -m lab.eta_check /tmp/eta.jsonl

Each `plan` event starts one matrix's ETA; its events are replayed through bench.run.eta.Eta on
the trace's own clock, and after every event the predicted time left is set beside the real one
(the matrix's last event minus now). Printed per matrix: its length, the first ETA, and over the
events after a tenth of its time had passed the median relative error and the share within 30 %
of the time left plus a second (the promise docs/MEASUREMENTS.md states, as tests/test_eta.py holds it), with the
worst miss.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from bench.core.study import Estimate
from bench.run.eta import Eta


def segments(lines: list[dict]) -> list[list[dict]]:
    """The trace cut at each `plan` event (one per matrix)."""
    out: list[list[dict]] = []
    for ev in lines:
        if ev.get("ev") == "plan":
            out.append([])
        if out:
            out[-1].append(ev)
    return out


def replay(seg: list[dict]) -> list[tuple[float, float, float]]:
    """(seconds since the start, predicted left, real left) after each event of SEG."""
    plan, events = seg[0], seg[1:]
    if not events:
        return []
    clock = [0.0]
    eta = Eta(
        [(c["key"], Estimate(c["steps"], c["open_s"], c["step_s"]), c["study"], c["group"]) for c in plan["cells"]],
        clock=lambda: clock[0],
        serial=bool(plan.get("serial", True)),
    )
    end = float(events[-1]["t"])
    out = [(0.0, eta.snapshot()[2], end)]
    for ev in events:
        clock[0] = float(ev["t"])
        kind, key = ev["ev"], ev.get("key")
        if kind == "opened":
            eta.opened(key, int(ev["steps"]))
        elif kind == "stepped":
            eta.stepped(key)
        elif kind == "ended":
            eta.ended(key)
        out.append((clock[0], eta.snapshot()[2], end - clock[0]))
    return out


def summary(points: list[tuple[float, float, float]]) -> dict:
    end = points[-1][0] if points else 0.0
    late = [(t, p, r) for t, p, r in points if end and t >= 0.1 * end and r > 0]
    errs = [abs(p - r) / r for _, p, r in late]
    misses = [(t, p, r) for t, p, r in late if abs(p - r) > 0.3 * r + 1.0]
    return {
        "length_s": end,
        "first_eta_s": points[0][1] if points else None,
        "events_after_a_tenth": len(late),
        "median": statistics.median(errs) if errs else None,
        "within_30pct": 1 - len(misses) / len(late) if late else None,
        "worst_miss": max(misses, key=lambda m: abs(m[1] - m[2])) if misses else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    a = ap.parse_args(argv)
    try:
        lines = [json.loads(x) for x in a.trace.read_text().splitlines() if x.strip()]
    except (OSError, ValueError) as err:
        print(f"error: {a.trace}: {err}", file=sys.stderr)
        return 2
    for i, seg in enumerate(segments(lines)):
        s = summary(replay(seg))
        if s["median"] is None:
            print(f"matrix {i + 1}: {s['length_s']:.0f} s, too short to judge")
            continue
        print(
            f"matrix {i + 1}: {s['length_s']:.0f} s ({len(seg[0]['cells'])} cells), first ETA {s['first_eta_s']:.0f} s; "
            f"after a tenth of its time ({s['events_after_a_tenth']} events): error median {s['median']:.0%}, "
            f"within 30 % + 1 s at {s['within_30pct']:.0%} of them"
            + (" (worst: at {:.0f} s it said {:.0f} s left, {:.0f} s were)".format(*s["worst_miss"]) if s["worst_miss"] else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
