"""Running cells: `cell.py` is the one child entry point, `schedule.py` the one scheduler."""
