"""The ``toolbridge`` command line.

Each group of subcommands lives in its own module and registers itself here:
``runs``/``trace`` (:mod:`trace`), ``call``/``definitions`` (:mod:`tools`),
``serve``/``token`` (:mod:`serve`), ``approvals`` (:mod:`approvals`), ``mcp`` (:mod:`mcp`),
``ui`` (:mod:`ui`), ``doctor`` (:mod:`doctor`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from toolbridge import ToolbridgeError
from toolbridge._cli import approvals as _cli_approvals
from toolbridge._cli import doctor as _cli_doctor
from toolbridge._cli import mcp as _cli_mcp
from toolbridge._cli import serve as _cli_serve
from toolbridge._cli import tools as _cli_tools
from toolbridge._cli import trace as _cli_trace
from toolbridge._cli import ui as _cli_ui
from toolbridge._cli.target import CLIError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolbridge",
        description="Serve host tools to sandboxed code, and inspect the journal of their calls.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (_cli_trace, _cli_tools, _cli_serve, _cli_approvals, _cli_doctor, _cli_mcp, _cli_ui):
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
