#!/usr/bin/env python3
"""cnn-bench host CLI: `python orchestrate.py --help` lists the commands.

The entry point only: the commands live in host/cli.py (the same app as the `cnn-bench`
console command).
"""

from host.cli import app, start

__all__ = ["app", "start"]

if __name__ == "__main__":
    start()
