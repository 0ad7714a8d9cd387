"""The ``toolbridge`` command line.

Each group of subcommands lives in its own module and registers itself here:
``runs``/``trace`` (:mod:`_cli_trace`), ``call``/``definitions`` (:mod:`_cli_tools`),
``serve``/``token`` (:mod:`_cli_serve`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from toolbridge._bridge import Bridge
from toolbridge._errors import ToolbridgeError


class CLIError(Exception):
    """A problem with what was typed; printed without a traceback, exit status 2."""


def load_bridge(target: str) -> Bridge:
    """Import ``MODULE:ATTR`` and return the :class:`Bridge` it names.

    The current directory is importable, as it is for ``python -m``.

    Raises:
        CLIError: when the target cannot be imported or is not a Bridge.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise CLIError(f"expected MODULE:ATTR (for example app.tools:bridge), got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CLIError(f"cannot import {module_name!r}: {exc}") from exc
    value = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CLIError(f"{module_name!r} has no attribute {attribute!r}") from None
    if callable(value) and not isinstance(value, Bridge):
        value = value()  # a factory that builds the bridge
    if not isinstance(value, Bridge):
        raise CLIError(f"{target} is a {type(value).__name__}, not a toolbridge.Bridge")
    return value


def build_parser() -> argparse.ArgumentParser:
    from toolbridge import _cli_serve, _cli_tools, _cli_trace

    parser = argparse.ArgumentParser(
        prog="toolbridge",
        description="Serve host tools to sandboxed code, and inspect the journal of their calls.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (_cli_trace, _cli_tools, _cli_serve):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except CLIError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 2
    except ToolbridgeError as exc:
        print(f"toolbridge: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
