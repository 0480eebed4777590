"""One module per study: its config, matrix, protocol, and report tables."""
STUDIES = {"mnist-cnn": "bench.studies.mnist_cnn"}
