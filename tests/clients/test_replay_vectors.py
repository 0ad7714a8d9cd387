"""The shared replay vectors (tests/vectors/replay.json), run against the Python client and the daemon.

A client answers a re-run command's call from its records only when it spells the call's input
exactly as the daemon does (``_call_input``, hashed into the step key); the Node client runs
the same file (clients/node/test/replay.test.js).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inngest_tools._replay import call_input
from inngest_tools._transport import encode_arguments
from toolbridge._calls.call import _call_input
from toolbridge._json import loads_strict

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "replay.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("vector", VECTORS["inputs"], ids=[v["name"] for v in VECTORS["inputs"]])
def test_the_client_spells_a_call_input_as_the_daemon_does(vector: dict[str, Any]) -> None:
    positional, named = encode_arguments(tuple(vector["args"]), vector["kwargs"])
    daemon = _call_input(loads_strict(positional) if positional else [], loads_strict(named) if named else {})
    assert daemon == vector["input"]
    assert call_input(positional, named) == vector["input"]


def test_an_int_and_the_equal_float_are_different_inputs() -> None:
    assert call_input(*encode_arguments((1,), {})) != call_input(*encode_arguments((1.0,), {}))
    assert call_input(*encode_arguments((True,), {})) != call_input(*encode_arguments((1,), {}))


def test_a_lone_surrogate_has_no_input_the_daemon_would_take() -> None:
    assert call_input(*encode_arguments(("\ud800",), {})) is None
