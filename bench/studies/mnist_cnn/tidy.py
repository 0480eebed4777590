"""mnist-cnn's Table I from the tidy table (host/tidy.py's long-format rows), in one groupby:
what the README's pandas example does, checked against the report's own Table I (its figures:
readout.py's) by tests/test_tidy.py. Host side: pandas, imported by whoever passes the frame."""

from __future__ import annotations

# Table I of mnist-cnn from the tidy table in one groupby (table1 below; tests/test_tidy.py checks
# it against the report's own Table I): output column -> (tidy column, aggregation)
TABLE1_AGG = {
    "avg_epoch_s": ("epoch_s", "mean"),
    "total_train_s": ("epoch_s", "sum"),
    "avg_samples_per_s": ("samples_per_s", "mean"),
    "median_samples_per_s": ("samples_per_s", "median"),
    "min_samples_per_s": ("samples_per_s", "min"),
    "max_samples_per_s": ("samples_per_s", "max"),
    "final_test_acc_pct": ("test_acc_pct", "last"),
    "max_test_acc_pct": ("test_acc_pct", "max"),
    "avg_rss_mb": ("rss_mean_mb", "mean"),
    "compile_s": ("compile_s", "first"),
    "epochs": ("epoch", "count"),
}
TABLE1_KEYS = ["host", "device", "backend", "pipeline", "variant", "repeat"]


def table1(df):
    """mnist-cnn's Table I from the tidy table: one groupby over its ok epoch rows."""
    ep = df[(df["study"] == "mnist-cnn") & (df["status"] == "ok") & df["epoch"].notna()]
    # by epoch number, so "last" is the highest epoch's (readout.final_acc), not the last row written
    ep = ep.sort_values("epoch", kind="stable")
    out = ep.groupby(TABLE1_KEYS, dropna=False, sort=False).agg(**TABLE1_AGG)
    vram = ep.groupby(TABLE1_KEYS, dropna=False, sort=False)["vram_peak_mb"].max().fillna(0.0)
    return out.assign(max_vram_mb=vram).reset_index()
