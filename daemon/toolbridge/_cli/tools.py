"""``toolbridge call`` and ``toolbridge definitions``: a bridge's registered tools from a shell.

::

    toolbridge call app.tools:bridge getCustomer --input '{"id": "cus_1"}'
    toolbridge definitions app.tools:bridge --format openai

``call`` runs one tool as a durable step (``Bridge.call_tool``) and prints its JSON result;
on a ``ToolError`` it prints the error to stderr and exits with status 1. ``definitions``
prints the tools' definitions as JSON, and on stderr what the format could not express.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import uuid
import warnings
from typing import Any

from toolbridge import Bridge
from toolbridge._cli.target import CLIError, add_journal_option, load_bridge
from toolbridge._definitions.build import FORMATS, DefinitionWarning, tool_definitions
from toolbridge._errors import ToolError
from toolbridge._json import JSONFormatError, loads_strict

__all__ = ["register"]

TARGET_HELP = "the Bridge to load, as MODULE:ATTR (for example app.tools:bridge)"


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to the ``toolbridge`` parser."""
    call = commands.add_parser(
        "call",
        help="run one registered tool as a durable step and print its JSON result",
        description=(
            "Run one tool registered on a Bridge as a durable step, recorded in the bridge's "
            "journal, and print its result as JSON. A ToolError goes to stderr, with exit status 1."
        ),
    )
    call.add_argument("target", metavar="MODULE:ATTR", help=TARGET_HELP)
    call.add_argument("tool", metavar="TOOL", help="the registered tool's name")
    call.add_argument(
        "--input",
        default="{}",
        metavar="JSON",
        help="the arguments: a JSON object (named) or array (positional); '-' reads them from "
        "stdin (default: {})",
    )
    add_journal_option(call)
    call.add_argument(
        "--run-id", metavar="ID", help="the run to record the call in; the same id again replays it"
    )
    call.set_defaults(handler=_call)

    definitions = commands.add_parser(
        "definitions",
        help="print the registered tools' definitions for a model API, as JSON",
        description="Print the definitions of the tools registered on a Bridge, in a model API's format.",
    )
    definitions.add_argument("target", metavar="MODULE:ATTR", help=TARGET_HELP)
    definitions.add_argument("--format", choices=FORMATS, default="anthropic", help="(default: anthropic)")
    add_journal_option(definitions)
    definitions.set_defaults(handler=_definitions)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _arguments(text: str) -> dict[str, Any] | list[Any]:
    if text == "-":
        text = sys.stdin.read()
    try:
        value = loads_strict(text)
    except JSONFormatError as exc:
        raise CLIError(f"--input is not valid JSON: {exc}") from None
    if not isinstance(value, dict | list):
        raise CLIError("--input must be a JSON object (named arguments) or array (positional ones)")
    return value


def _call(args: argparse.Namespace) -> int:
    bridge = load_bridge(args.target, journal=args.journal)
    if args.tool not in bridge.tools:
        known = ", ".join(sorted(bridge.tools)) or "none"
        raise CLIError(f"{args.target} has no tool named {args.tool!r} (its tools: {known})")
    arguments = _arguments(args.input)
    if args.journal is not None and bridge.journal_location != args.journal:
        bridge = Bridge(journal=args.journal, tools=bridge.tools)  # a bridge with its own journal=
    run_id = args.run_id or uuid.uuid4().hex
    try:
        location = bridge.journal_location
        where = f" --journal {shlex.quote(os.path.abspath(location))}" if location else ""
        result = asyncio.run(_call_tool(bridge, args.tool, arguments, run_id, where))
    except ToolError as exc:
        print(f"toolbridge: {args.tool} failed: {exc.type}: {exc.message}", file=sys.stderr)
        if bridge.journal_location is not None:  # journal=None keeps no record
            print(f"toolbridge: the call is recorded in run {run_id}", file=sys.stderr)
        return 1
    _print_json(result)
    return 0


async def _call_tool(
    bridge: Bridge, name: str, arguments: dict[str, Any] | list[Any], run_id: str, where: str
) -> Any:
    async with bridge:
        hint = asyncio.create_task(_say_when_waiting(bridge, run_id, where))
        try:
            return await bridge.call_tool(name, arguments, run_id=run_id)
        finally:
            hint.cancel()


async def _say_when_waiting(bridge: Bridge, run_id: str, journal: str) -> None:
    """Tell the person at the terminal how to decide a call that waits for them."""
    told: set[str] = set()
    while True:
        await asyncio.sleep(0.2)
        for req in await bridge.approvals.list(run_id):
            if req.id not in told:
                told.add(req.id)
                verb = "answer" if req.kind == "input" else "approve"
                how = f"toolbridge approvals {verb} {req.id}{journal}"
                print(f"toolbridge: {req.summary} waits for a person: {how}", file=sys.stderr, flush=True)


def _definitions(args: argparse.Namespace) -> int:
    bridge = load_bridge(args.target, journal=args.journal)
    with warnings.catch_warnings():
        # Said on stderr below, one line each, rather than as a Python warning.
        warnings.simplefilter("ignore", DefinitionWarning)
        try:
            definitions = tool_definitions(bridge.tools, format=args.format)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    _print_json(definitions)
    for dropped in definitions.dropped:
        print(f"toolbridge: not in the {args.format} definitions: {dropped}", file=sys.stderr)
    return 0
