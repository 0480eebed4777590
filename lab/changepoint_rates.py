"""How often does the history's change-point detector (host/changepoints.py: E-Divisive means,
signal-processing-algorithms) cry wolf, and how often does it see a real step?

    python -m lab.changepoint_rates [--series 500] [--length 30] [--step-at 15] [--noise 0.02,0.05]

For each noise level (relative sd of log-normal noise around a constant: the run-to-run spread
of one configuration's per-run medians), SERIES synthetic series without a change (a false alarm:
any change point) and SERIES with a planted 10 % slowdown after point STEP_AT (detected: a
change point within 2 points of it). Seeded: the same arguments print the same table. Measured
on the 2-core CI VM in about a minute; the figures are in host/changepoints.py and docs/METHODS.md.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from host import changepoints


def rates(series: int, length: int, step_at: int, noise: float, step: float = 0.10, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    false_alarms = detected = 0
    for _ in range(series):
        flat = 1000.0 * np.exp(rng.normal(0.0, noise, length))
        false_alarms += bool(changepoints.find(list(flat)))
        stepped = 1000.0 * np.exp(rng.normal(0.0, noise, length))
        stepped[step_at:] *= 1.0 - step
        found = changepoints.find(list(stepped))
        detected += any(abs(i - step_at) <= 2 for i in found)
    return {
        "noise_sd": noise,
        "series": series,
        "length": length,
        "false_alarm_rate": false_alarms / series,
        "detection_rate": detected / series,
        "step": step,
        "pvalue": changepoints.PVALUE,
        "permutations": changepoints.PERMUTATIONS,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=500)
    ap.add_argument("--length", type=int, default=30)
    ap.add_argument("--step-at", type=int, default=15)
    ap.add_argument("--noise", default="0.02,0.05", help="relative sd of the noise, comma-separated")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    why = changepoints.available()
    if why:
        raise SystemExit(f"error: {why}")
    out = [rates(a.series, a.length, a.step_at, float(n)) for n in a.noise.split(",")]
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{'noise sd':>8}  {'false alarms (no change)':>24}  {'10% step detected':>18}   ({a.series} series of {a.length} each)"
    )
    for r in out:
        print(f"{r['noise_sd']:>8.0%}  {r['false_alarm_rate']:>24.1%}  {r['detection_rate']:>18.1%}")


if __name__ == "__main__":
    main()
