"""Host side of the kit (never shipped in an image): the docker runner, capability
detection, the orchestrator's plumbing and the report merge. Imports no torch, numba or
scikit-learn: requirements/host.txt is enough for all of it."""
