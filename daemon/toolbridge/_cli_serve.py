"""CLI subcommands (to be filled in)."""

from __future__ import annotations

import argparse
from typing import Any


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to the ``toolbridge`` parser."""
