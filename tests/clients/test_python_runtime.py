"""The Python sandbox runtime: built once, its bytecode compiled, the client copied, not linked."""

from __future__ import annotations

from pathlib import Path

import inngest_tools
from toolbridge._sandbox.runtime.python import build_runtime


def test_the_runtime_holds_a_copy_of_the_client_and_its_compiled_bytecode(tmp_path: Path) -> None:
    runtime = build_runtime(cache_dir=tmp_path / "cache")
    (site,) = (runtime.root / "lib").glob("python*/site-packages")
    client = Path(inngest_tools.__file__).parent
    copied = site / "inngest_tools" / "_client.py"
    assert copied.read_bytes() == (client / "_client.py").read_bytes()
    # A copy: a checkout's file edited in place must not change a runtime built before.
    assert not copied.samefile(client / "_client.py")
    # The sandbox cannot write bytecode: it is there already, for the client and its dependencies.
    assert list((site / "inngest_tools" / "__pycache__").glob("_client.*.pyc"))
    assert list(site.glob("grpc/__pycache__/__init__.*.pyc"))
    assert build_runtime(cache_dir=tmp_path / "cache").root == runtime.root  # built once
