"""The profile study's backends: torch-cpu and torch-cuda (the same code; the cell names the device)."""
