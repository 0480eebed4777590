"""Seed 000's Table I beside ours for the same setups, and its first objective as a speedup
table (GPU over CPU per framework, Numba over PyTorch per device), the seed's own speedups
computed from its Table I next to ours.

    seed_section(cells) -> markdown lines   (the hook: report.section appends them)

"The same setup" (SETUPS): the seed's Numba rows are our numba-* variant `seed` (dense-layer
backprop only; numba-cuda with the dense backprop on the CPU and the copies that implies),
its PyTorch rows our torch-* `seed` pipeline (per-sample transforms through a DataLoader).
Ours: per repeat (a fresh process) one value per figure, then the median over repeats;
speedups are ratios of median throughputs of one host's cells, paired by repeat, with a 95%
bootstrap interval (bench.core.stats), as the report's other ratios. The seed's speedups
have no interval: it ran once and reported averages.
"""

from __future__ import annotations

from bench.core import stats
from bench.core.resultset import ResultCell
from bench.core.tables import md_row
from bench.studies.mnist_cnn import readout as R

# Seed 000, Table I "Performance summary results" (10 epochs, batch 512, SGD 0.01 m0.9),
# transcribed from the seed text as printed.
SEED_HARDWARE = (
    'Intel Core Ultra 7 155H (22 CPUs), 16 GB RAM; NVIDIA "GTX 4060" 8 GB (so the seed; an RTX 4060 '
    "laptop GPU); Apple M4 Pro, 16-core GPU; macOS 15.4.1 / Windows 11"
)
SEED_COLUMNS = tuple(k for k, _, _ in R.TABLE1)  # its seven columns, keyed as ours (readout.TABLE1)
SEED_TABLE1: dict[str, tuple[float, ...]] = {
    "CPU (Numba)": (2.0928, 20.928, 30501, 96.33, 97.42, 1334.572, 0),
    "GPU CUDA (Numba)": (0.9268, 9.268, 71758, 96.68, 97.56, 1156.894, 0),
    "CPU PyTorch": (11.2687, 112.687, 5340, 97.57, 98.5, 1611.935, 0),
    "CUDA PyTorch": (8.7219, 87.219, 6948, 97.21, 98.5, 1363.258, 16.87),
    "MPS PyTorch": (9.0544, 90.544, 6645, 97.31, 98.5, 1188.246, 0),
}
# seed platform -> our configuration (backend, pipeline, variant) of the same setup
SETUPS = {
    "CPU (Numba)": ("numba-cpu", "resident", "seed"),
    "GPU CUDA (Numba)": ("numba-cuda", "resident", "seed"),
    "CPU PyTorch": ("torch-cpu", "seed", "default"),
    "CUDA PyTorch": ("torch-cuda", "seed", "default"),
    "MPS PyTorch": ("torch-mps", "seed", "default"),
}
# the seed's first objective (and its second: Numba vs PyTorch on one device): (name, faster?, slower?)
SPEEDUPS = (
    ("Numba: GPU over CPU", "GPU CUDA (Numba)", "CPU (Numba)"),
    ("PyTorch: CUDA over CPU", "CUDA PyTorch", "CPU PyTorch"),
    ("PyTorch: MPS over CPU", "MPS PyTorch", "CPU PyTorch"),
    ("CPU: Numba over PyTorch", "CPU (Numba)", "CPU PyTorch"),
    ("CUDA: Numba over PyTorch", "GPU CUDA (Numba)", "CUDA PyTorch"),
)
# the same questions for the kit's own setups (every layer trained, resident data)
KIT_SPEEDUPS = (
    ("Numba: GPU over CPU", ("numba-cuda", "resident", "default"), ("numba-cpu", "resident", "default")),
    ("PyTorch: CUDA over CPU", ("torch-cuda", "resident", "default"), ("torch-cpu", "resident", "default")),
    ("PyTorch tuned: CUDA over CPU", ("torch-cuda", "resident", "tuned"), ("torch-cpu", "resident", "default")),
    ("PyTorch: MPS over CPU", ("torch-mps", "resident", "default"), ("torch-cpu", "resident", "default")),
    ("CPU: Numba over PyTorch", ("numba-cpu", "resident", "default"), ("torch-cpu", "resident", "default")),
    ("CUDA: Numba over PyTorch", ("numba-cuda", "resident", "default"), ("torch-cuda", "resident", "default")),
    ("CUDA: Numba over PyTorch tuned", ("numba-cuda", "resident", "default"), ("torch-cuda", "resident", "tuned")),
)


def seed_speedup(faster: str, slower: str) -> tuple[float, float]:
    """(ratio of the seed's average epoch times, ratio of its average throughputs): slower over faster."""
    a, b = SEED_TABLE1[faster], SEED_TABLE1[slower]
    return b[0] / a[0], a[2] / b[2]


# ------------------------------------------------------------------ our cells
def _key(c: ResultCell) -> tuple[str, str, str]:
    r = c.first
    return (str(r.get("backend")), str(r.get("pipeline")), str(r.get("variant")))


def _params(c: ResultCell) -> dict:
    return dict(c.spec.get("params") or {})


def _session(c: ResultCell) -> str:
    """Cells whose ratio means something: one run (its label: two hosts may share a host
    name), one dataset, epochs, batch size and limit."""
    p = _params(c)
    setup = ", ".join(f"{k}={p[k]}" for k in ("dataset", "epochs", "batch_size", "limit_train") if k in p)
    return f"{c.run_label} on {c.first.get('host')} ({setup or c.first.get('dataset')})"


def _ok(cells: list[ResultCell]) -> list[ResultCell]:
    return [c for c in cells if c.status == "ok" and R.epochs(c)]


def _setup_text(c: ResultCell) -> str:
    p = _params(c)
    ep = R.epochs(c)
    trains = ep[0].get("trains") or ("dense layers only" if _key(c)[2] == "seed" else "all layers")
    bits = [trains]
    bits += [f"{k}={p[k]}" for k in ("init", "input_scale", "sgd") if k in p]
    if not ep[0].get("dataset_real_mnist"):
        bits.append("NOT MNIST")
    return ", ".join(bits)


def ours(cells: list[ResultCell]) -> list[dict]:
    """One row per (session, device, configuration, setup) of the SETUPS configurations: medians over repeats."""
    groups: dict[tuple, list[ResultCell]] = {}
    for c in _ok(cells):
        if _key(c) in SETUPS.values():
            groups.setdefault((_session(c), c.device, _key(c), _setup_text(c)), []).append(c)
    rows = []
    for (sess, device, key, setup), group in groups.items():
        # per repeat its figures (readout.figures: Table I's seven and the median throughput), then
        # the median over repeats, the peak VRAM's max (readout.over_repeats)
        per = [R.figures(c) for c in group]
        med = R.over_repeats(per)
        tput = stats.summarize([v for p in per if (v := p["median_samples_per_s"]) is not None])
        rows.append(
            {
                **med,
                "run": group[0].run_label,
                "platform": next(k for k, v in SETUPS.items() if v == key),
                "config": " ".join(key),
                "session": sess,
                "device": device,
                "setup": setup,
                "repeats": len(per),
                "tput_ci": tput.interval(),
            }
        )
    order = list(SETUPS)
    return sorted(rows, key=lambda r: (r["session"], order.index(r["platform"])))


def _by_repeat(cells: list[ResultCell]) -> dict[tuple[str, tuple, str], dict[int, float]]:
    """(session, configuration, what ran) -> repeat -> median throughput over its epochs."""
    by: dict[tuple[str, tuple, str], dict[int, float]] = {}
    for c in _ok(cells):
        k = (_session(c), _key(c), _setup_text(c))
        if (v := R.median_samples_per_s(R.epochs(c))) is not None:
            by.setdefault(k, {})[c.repeat] = v
    return by


def speedups(cells: list[ResultCell]) -> list[dict]:
    """Every SPEEDUPS / KIT_SPEEDUPS ratio our cells allow, per session (and per setting where a
    configuration ran with several: init, input_scale, sgd), with its interval (the verdicts are
    the claims engine's: claims.py)."""
    from bench.core import seqstats

    by = _by_repeat(cells)
    roots: dict[str, set] = {}
    for c in _ok(cells):
        roots.setdefault(_session(c), set()).add(c.dir.parent.parent.resolve())
    # the claims' own figure for the same pair (a sequential run's: its confidence sequence), so one
    # report prints one figure for it (this table said 2.73x where the claim said 2.77x)
    seq = {s: len(r) == 1 and seqstats.sequential_root(next(iter(r))) for s, r in roots.items()}
    out = []
    pairs: list[tuple[str, str, tuple, tuple, tuple[float, float] | None]]
    pairs = [("seed 000's setups", n, SETUPS[a], SETUPS[b], seed_speedup(a, b)) for n, a, b in SPEEDUPS]
    pairs += [("kit's setups", n, a, b, None) for n, a, b in KIT_SPEEDUPS]
    index: dict[tuple[str, tuple], list[tuple[str, dict[int, float]]]] = {}  # (session, configuration) -> (what ran, values)
    for (sess, key, what), v in by.items():
        index.setdefault((sess, key), []).append((what, v))
    for sess in sorted({s for s, _, _ in by}):
        for setups, name, a, b, seed in pairs:
            for wa, va in index.get((sess, a), []):
                for wb, vb in index.get((sess, b), []):
                    r = seqstats.pair_figure(va, vb, seq.get(sess, False))
                    out.append(
                        {
                            "setups": setups,
                            "name": name,
                            "numerator": " ".join(a) + f" ({wa})",
                            "denominator": " ".join(b) + f" ({wb})",
                            "session": sess,
                            "ratio": r.median,
                            "ci": r.interval("{:.2f}"),
                            "seed": seed,
                        }
                    )
    return out


# ------------------------------------------------------------------ markdown
def _f(v, fmt: str) -> str:
    return "–" if v is None else fmt.format(v)


def seed_section(cells: list[ResultCell]) -> list[str]:
    """Markdown: the seed's Table I beside ours (same setups), then the speedup table."""
    return table1_beside(cells) + speedups_beside(cells)


def table1_beside(cells: list[ResultCell]) -> list[str]:
    """The seed's Table I, each of its rows followed by ours for the same setup, and the memory note."""
    md = [
        "### Seed 000's Table I beside ours (same setups)",
        "",
        f"Seed 000 (10 epochs, batch 512; {SEED_HARDWARE}) as printed, and ours for the same setup: "
        "its Numba rows are our numba-* variant `seed` (backprop through the dense layers only; numba-cuda "
        "with that backprop on the CPU and the host<->device copies it implies, every step), its PyTorch "
        "rows our torch-* `seed` pipeline (per-sample transforms through a DataLoader). Ours: medians over "
        "repeats (fresh processes). Avg Throughput = mean over epochs of samples / epoch time, as the seed's "
        "(no interval: a mean of epochs that share one process); Median Throughput = median over epochs, "
        "and its interval is over repeats of that median (a 95% bootstrap CI from 6 repeats, the range of "
        "the repeats below, marked so): the interval belongs to the value beside it. Total train time is over the epochs run (see Epochs).",
        "",
        "| Platform | Source | Device | What ran | Epochs | Repeats | Avg Epoch Time (s) | Total Train Time (s) "
        "| Avg Throughput (samples/s) | Median Throughput (samples/s) | its interval | Final Test Acc (%) "
        "| Max Test Acc (%) | Avg Proc RAM (MB) | Max GPU VRAM (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    mine = ours(cells)
    for name, v in SEED_TABLE1.items():
        md.append(_seed_row(name, dict(zip(SEED_COLUMNS, v))))
        md += [_our_row(r) for r in mine if r["platform"] == name]
    if not mine:
        md += [
            "",
            "_None of our cells ran one of these setups (run `--profile full --only variant=seed`, "
            "and `--only pipeline=seed` for the PyTorch rows)._",
        ]
    return md + [
        "",
        "Seed 000 measured RAM with psutil and VRAM with torch.cuda.memory_allocated (PyTorch CUDA only); "
        "ours: RSS sampled during training, VRAM as each backend reports it (numba-cuda: its own buffers).",
    ]


def _seed_row(name: str, s: dict[str, float]) -> str:
    """One row of the seed's Table I as printed (one run on its hardware)."""
    return md_row(
        [
            name,
            "seed 000",
            "its hardware",
            "dense layers only" if "Numba" in name else "all layers",
            "10",
            "1",
            f"{s['avg_epoch_s']:.4f}",
            f"{s['total_train_s']:.3f}",
            f"{s['avg_samples_per_s']:,.0f}",
            "–",
            "–",
            f"{s['final_test_acc_pct']:.2f}",
            f"{s['max_test_acc_pct']:.2f}",
            f"{s['avg_rss_mb']:,.1f}",
            f"{s['max_vram_mb']:g}",
        ]
    )


def _our_row(r: dict) -> str:
    """One of our configurations (a row of ours()) in Table I's columns."""
    return md_row(
        [
            r["platform"],
            f"ours: {r['config']} ({r['run']})",
            r["device"],
            r["setup"],
            f"{r['epochs']:g}",
            str(r["repeats"]),
            f"{r['avg_epoch_s']:.4f}",
            f"{r['total_train_s']:.3f}",
            f"{r['avg_samples_per_s']:,.0f}",
            f"{r['median_samples_per_s']:,.0f}",
            r["tput_ci"],
            f"{r['final_test_acc_pct']:.2f}",
            f"{r['max_test_acc_pct']:.2f}",
            f"{r['avg_rss_mb']:,.1f}",
            _f(r["max_vram_mb"], "{:,.1f}"),
        ]
    )


def speedups_beside(cells: list[ResultCell]) -> list[str]:
    """Seed 000's first objective: its speedups from Table I beside ours, and the seed's own where
    we have no pair of cells for one."""
    md = [
        "",
        "### Speedups: seed 000's first objective",
        "",
        "GPU over CPU for each framework, and Numba over PyTorch on one device. Seed 000's from its Table I "
        "(average epoch times; its average throughputs in brackets; one run, no interval); ours: ratio of "
        "median throughputs of one host's cells, paired by repeat, with a 95% bootstrap interval (from 6 repeats; "
        "below, the range of the per-repeat ratios, marked so).",
        "",
        "| Comparison | Setups | Seed 000 | Ours | interval | Numerator / denominator | Host (setup) |",
        "|---|---|---|---|---|---|---|",
    ]
    shown = set()
    for r in speedups(cells):
        seed = f"{r['seed'][0]:.2f}x ({r['seed'][1]:.2f}x)" if r["seed"] else "–"
        shown.add((r["setups"], r["name"]))
        row = [
            r["name"],
            r["setups"],
            seed,
            f"{r['ratio']:.2f}x",
            r["ci"],
            f"{r['numerator']} / {r['denominator']}",
            r["session"],
        ]
        md.append(md_row(row))
    for name, a, b in SPEEDUPS:
        if ("seed 000's setups", name) not in shown:
            t, q = seed_speedup(a, b)
            pair = " / ".join(" ".join(SETUPS[x]) for x in (a, b))
            md.append(md_row([name, "seed 000's setups", f"{t:.2f}x ({q:.2f}x)", "not run here", "–", pair, "–"]))
    md.append("")
    return md
