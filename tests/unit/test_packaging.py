"""Both Python packages are marked typed (PEP 561), and their wheels carry the marker.

Hatch puts every file under a wheel's package directory into the wheel unless the target
excludes it, so the marker ships when it sits in the package and nothing excludes it. (Checked
by hand too: ``pip wheel --no-deps . ./clients/python`` lists ``toolbridge/py.typed`` and
``inngest_tools/py.typed``.)
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("project", "package"),
    [(ROOT, "daemon/toolbridge"), (ROOT / "clients/python", "inngest_tools")],
)
def test_the_package_is_marked_typed_and_its_wheel_keeps_the_marker(project: Path, package: str) -> None:
    assert (project / package / "py.typed").is_file()
    config = tomllib.loads((project / "pyproject.toml").read_text())
    wheel = config["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert package in wheel["packages"]
    assert not any("py.typed" in pattern or pattern.endswith("*") for pattern in wheel.get("exclude", []))
