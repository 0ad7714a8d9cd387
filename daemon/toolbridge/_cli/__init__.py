"""The ``toolbridge`` command line: a program on the public API."""

from toolbridge._cli.main import main

__all__ = ["main"]
