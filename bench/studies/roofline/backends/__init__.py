"""roofline's backends: torch on each device (available, create)."""
