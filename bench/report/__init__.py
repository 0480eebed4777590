"""Host-side report: merge result dirs from any hosts into tables, plots and REPORT.md."""
