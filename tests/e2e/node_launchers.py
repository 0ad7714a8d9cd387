"""Both launchers for the Node end-to-end tests: each test runs under the process launcher and
under bubblewrap (skipped with the reason where bubblewrap cannot run, unless
``TOOLBRIDGE_REQUIRE_BWRAP=1``, as ``make test`` sets, makes that a failure)."""

from __future__ import annotations

import os
import shutil

import pytest

_NO_BWRAP = shutil.which("bwrap") is None and os.environ.get("TOOLBRIDGE_REQUIRE_BWRAP") != "1"

LAUNCHERS = [
    pytest.param("process", id="process"),
    pytest.param(
        "bwrap", id="bwrap", marks=pytest.mark.skipif(_NO_BWRAP, reason="bubblewrap is not installed")
    ),
]
