"""Timers, memory samplers and telemetry."""
