"""`orchestrate.py compare --against-history DIR`: a run held to the distribution of its
configuration's past runs on the same machine class (the run history, host/history.py).

Per configuration and part of DIR: side A is the history's past runs of that configuration,
part and machine class (the throughput series; runs of DIR itself, by run id, left out), one
value per past run (its median over repeats: runs are the sample, as repeats are in `compare`);
side B is DIR's repeats. Then exactly `compare`'s ratio, interval and verdict (host/compare.py:
median(B) / median(A), 95 % bootstrap interval from 6 values a side, the range below; slower
when the whole interval lies below 1 - threshold), and its output. A configuration of DIR with no
past run on its machine class is listed as not compared, with why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.errors import KitError
from host import history, speed
from host.compare import config_label, groups_of, judge, load_set, throughput, unit_of


def compare_history(run_dir: Path, store: Path = history.DEFAULT_STORE, threshold: float = 0.05) -> dict:
    from bench.core import stats

    cells = load_set(run_dir, "run").cells
    all_series = history.series(store, changes=False)
    matched, not_compared = [], []
    for key, g in groups_of([c for c in cells if c.status == "ok"]).items():
        label = f"{g.config['study']} {config_label(g.config)}"
        try:
            mc = speed.key(speed.machine_class(g.cells[0]))
        except KitError as err:
            not_compared.append({"config": label, "why": str(err)})
            continue
        mine = {f"{c.cell_id}|{c.first.get('run_id')}" for c in g.cells}  # history's uid: the rows' cell id
        runs = history.batches_of(store, mine)  # DIR's own runs, if it was added already
        per: dict[str, dict[int, float]] = {}
        for c in g.cells:
            for part, v in throughput(c).items():
                per.setdefault(part, {})[c.repeat] = v
        for part, b in per.items():
            s = next(
                (
                    x
                    for x in all_series
                    if x.config_key == key and x.part == part and x.metric == "throughput" and x.class_key == mc
                ),
                None,
            )
            past = [p for p in (s.points if s else []) if p.run not in runs]
            name = label + (f" [{part}]" if part != g.config.get("backend") else "")
            if not past:
                not_compared.append({"config": name, "why": "no past run of it on this machine class in the history"})
                continue
            a = {i: p.median for i, p in enumerate(past)}
            r = stats.ratio({1000 + i: v for i, v in b.items()}, a)
            flags = ";".join(f"r{c.repeat}:{c.flags}" for c in g.cells if c.flags)
            plain = judge(r.lo, r.hi, threshold)
            side_a: dict[str, Any] = {
                "median": stats.summarize(list(a.values())).median,
                "n": len(a),
                "hosts": [s.machine if s else ""],
                "flags": "",
            }
            side_a |= {"environments": sorted({p.env for p in past}), "per_repeat": {f"run{i}": v for i, v in a.items()}}
            side_a |= {"lo": None, "hi": None, "acc": None}
            sb = stats.summarize(list(b.values()))
            side_b: dict[str, Any] = {
                "median": sb.median,
                "lo": sb.lo,
                "hi": sb.hi,
                "n": sb.n,
                "hosts": g.hosts,
                "flags": flags,
                "acc": None,
            }
            side_b |= {
                "environments": sorted({speed.env_label(speed.environment(c)) for c in g.cells}),
                "per_repeat": {f"r{k}": v for k, v in sorted(b.items())},
            }
            matched.append(
                {
                    "study": g.config["study"],
                    "config": name,
                    "part": part,
                    "unit": unit_of(str(g.config["study"])),
                    "a": side_a,
                    "b": side_b,
                    "ratio": r.median,
                    "ratio_lo": r.lo,
                    "ratio_hi": r.hi,
                    "ratio_interval": r.kind,
                    "verdict": "flagged" if flags and plain in ("faster", "slower") else plain,
                    "would_be": plain,
                    "flagged": bool(flags),
                    "notes": [f"A: {len(past)} past run(s) from {past[0].date[:10]} to {past[-1].date[:10]}"],
                    "config_spec": g.config,
                }
            )
    if not matched:
        why = not_compared[0]["why"] if not_compared else "no finished cell"
        raise KitError(f"nothing in {run_dir} has past runs on its machine class in the history ({why})")
    from host.compare import summary

    matched.sort(key=lambda m: (m["ratio"], m["config"]))
    return {
        "a": f"history {history.db_path(store)}",
        "b": str(run_dir),
        "threshold": threshold,
        "definition": (
            "ratio = median throughput of B (this run's repeats) / median of A (the past runs' medians of the same "
            "configuration on the same machine class, one value per run); interval and verdict as `compare`"
        ),
        "summary": summary(matched),
        "matched": matched,
        "not_compared": not_compared,
        "only_a": [],
        "only_b": [],
        "regressions": [m["config"] for m in matched if m["verdict"] == "slower"],
        "flagged_slower": [m["config"] for m in matched if m["verdict"] == "flagged" and m["would_be"] == "slower"],
        "unjudged": [m["config"] for m in matched if m["ratio_lo"] is None],
    }


__all__ = ["compare_history"]
