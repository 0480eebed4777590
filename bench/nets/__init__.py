"""Network definitions shared by every backend (shapes, parameter layout, init, FLOPs)."""
