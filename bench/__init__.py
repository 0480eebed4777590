"""cnn-bench: the package that runs inside every image and natively (`python -m bench`)."""

__version__ = "0.1.0"
