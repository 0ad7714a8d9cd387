"""Run a snippet with ``tools`` defined, top-level ``await`` and ``return``.

``python -m inngest_tools._runner snippet.py`` runs the file's code as the body of an async
function, keeping its line numbers, and writes the JSON of what it returns to the path in
``TOOLBRIDGE_RESULT_PATH``.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import gc
import json
import os
import sys
import threading
from typing import Any, NoReturn

from inngest_tools import ToolError, definitions, tools


def _compile(source: str, filename: str) -> Any:
    module = ast.parse(source, filename=filename)
    body = module.body or [ast.Pass()]
    fields: dict[str, Any] = {}
    if sys.version_info >= (3, 12):
        fields["type_params"] = []
    function = ast.AsyncFunctionDef(
        name="__snippet__",
        args=ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        ),
        body=body,
        decorator_list=[],
        returns=None,
        type_comment=None,
        **fields,
    )
    wrapper = ast.Module(body=[function], type_ignores=[])
    ast.fix_missing_locations(ast.copy_location(function, body[0]))
    ast.fix_missing_locations(wrapper)
    return compile(wrapper, filename, "exec")


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m inngest_tools._runner SNIPPET", file=sys.stderr)
        return 2
    filename = sys.argv[1]
    with open(filename, encoding="utf-8") as handle:
        source = handle.read()
    namespace: dict[str, Any] = {
        "__name__": "__snippet__",
        "tools": tools,
        "ToolError": ToolError,
        "definitions": definitions,
    }
    exec(_compile(source, filename), namespace)
    value = asyncio.run(namespace["__snippet__"]())
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        print(f"the snippet returned a value that is not JSON: {exc}", file=sys.stderr)
        return 3
    result_path = os.environ.get("TOOLBRIDGE_RESULT_PATH")
    if result_path:
        with open(result_path, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        print(text)
    return 0


def leave(code: int) -> NoReturn:
    """Exit with ``code`` as the interpreter would, without tearing its modules down.

    Python's own exit waits for non-daemon threads, runs the ``atexit`` functions, flushes
    stdio, and then finalizes every module: with gRPC loaded that last part took 15-20 ms
    of a snippet's 30, for a process about to be gone. Objects still in reference cycles are
    collected first, so files the snippet left open are flushed and closed as they would be.
    """
    # What the interpreter's own exit does first: the threading module's exit callbacks
    # (concurrent.futures' executors shut down), then every non-daemon thread joined.
    threading._shutdown()  # type: ignore[attr-defined]
    gc.collect()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as Python exits when flushing stdio fails
    os._exit(code)


if __name__ == "__main__":
    leave(main())
