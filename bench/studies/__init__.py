"""One package per study (found by bench.core.registry; adding one edits no other file)."""
