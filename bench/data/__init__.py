"""Dataset readers, fetch with checksums, and the embedded default."""
