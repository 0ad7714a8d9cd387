"""``toolbridge ui``: placeholder while it is written."""

from __future__ import annotations

import argparse
from typing import Any


def register(commands: argparse._SubParsersAction[Any]) -> None:
    return None
