"""``toolbridge runs`` and ``toolbridge trace RUN_ID``: read the journal as a user would."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import shlex
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from toolbridge._cli.target import CLIError, add_journal_option, journal_location
from toolbridge._journal.base import Journal, open_journal
from toolbridge._journal.trace import TraceNode, build_tree, run_to_dict
from toolbridge._records import RunSummary, StepRecord

PREVIEW = 60
"""Characters of an input, output or error shown in the terminal view (--json shows all)."""

_STATUS_STYLE = {"completed": "green", "failed": "red", "running": "yellow"}


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``runs`` and ``trace`` to the ``toolbridge`` parser."""
    runs = commands.add_parser("runs", help="list the runs in a journal, newest first")
    runs.add_argument("--limit", type=int, default=50, help="how many runs to list (default 50)")
    _common(runs)
    runs.set_defaults(handler=_runs)
    trace = commands.add_parser("trace", help="show one run's steps as a tree")
    trace.add_argument("run_id", metavar="RUN_ID")
    _common(trace)
    trace.set_defaults(handler=_trace)


def _common(parser: argparse.ArgumentParser) -> None:
    add_journal_option(parser, fallback="toolbridge.db")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _read(
    args: argparse.Namespace, run_id: str | None, limit: int
) -> tuple[list[RunSummary], list[StepRecord]]:
    location = journal_location(args, fallback="toolbridge.db")
    assert location is not None
    if "://" not in location and not Path(location).exists():
        raise CLIError(f"no journal at {location} (pass --journal PATH or a postgresql:// URL)")
    try:
        journal = open_journal(location)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return asyncio.run(_read_journal(journal, run_id, limit))


async def _read_journal(
    journal: Journal, run_id: str | None, limit: int
) -> tuple[list[RunSummary], list[StepRecord]]:
    await journal.open()
    try:
        if run_id is None:
            return await journal.list_runs(limit), []
        run = await journal.get_run(run_id)
        if run is None:
            raise CLIError(f"no run {run_id!r} in this journal")
        return [run], await journal.load_steps(run_id)
    finally:
        await journal.close()


def _holder(run: RunSummary) -> tuple[str, str]:
    """Who holds the run and until when, as ``toolbridge runs`` shows them."""
    if run.owner is None:
        return "", ""
    if run.lease_expires_at is None:
        return run.owner, "released"
    if run.lease_expires_at <= time.time():
        return run.owner, f"expired {_time(run.lease_expires_at)}"
    return run.owner, f"until {_time(run.lease_expires_at)}"


def _runs(args: argparse.Namespace) -> int:
    runs, _ = _read(args, None, args.limit)
    if args.json:
        print(json.dumps([run_to_dict(run) for run in runs], indent=2))
        return 0
    table = Table("run", "status", "started", "duration", "steps", "entries", "owner", "lease", box=None)
    for run in runs:
        table.add_row(
            run.run_id,
            Text(run.status, style=_STATUS_STYLE[run.status]),
            _time(run.started_at),
            _duration(None if run.finished_at is None else run.finished_at - run.started_at),
            str(run.steps),
            str(run.entries),
            *_holder(run),
        )
    _console().print(table)
    return 0


def _trace(args: argparse.Namespace) -> int:
    (run,), steps = _read(args, args.run_id, 1)
    roots = build_tree(steps)
    if args.json:
        print(json.dumps({**run_to_dict(run), "tree": [node.to_dict() for node in roots]}, indent=2))
        return 0
    duration = None if run.finished_at is None else run.finished_at - run.started_at
    label = Text.assemble(
        ("run ", "bold"),
        (run.run_id, "bold"),
        "  ",
        (run.status, _STATUS_STYLE[run.status]),
        f"  {_duration(duration)}  {run.steps} steps  started {_time(run.started_at)}",
        f"  entered {run.entries}x" if run.entries > 1 else "",
        "  owner {} ({})".format(*_holder(run)) if run.owner else "",
    )
    tree = Tree(label)
    for node in roots:
        _add(tree, node)
    if run.error:
        tree.add(Text(f"error: {_cut(run.error)}", style="red"))
    _console().print(tree)
    return 0


def _summary(step: StepRecord) -> tuple[str, str]:
    """What went in and what came out, in a line's worth of text."""
    data = json.loads(step.input_json) if step.input_json is not None else None
    output = json.loads(step.output_json) if step.output_json is not None else None
    if step.kind == "command":
        shown_in = "$ " + shlex.join(data["argv"]) if isinstance(data, dict) and "argv" in data else ""
        shown_out = f"exit {output['exit_code']}" if isinstance(output, dict) else ""
        if isinstance(output, dict) and output.get("stopped"):
            shown_out += f" (stopped: {output['stopped']})"
        return shown_in, shown_out
    if isinstance(data, dict) and "code" in data:  # a runner snippet: its first line says enough
        shown_in = data["code"].strip().splitlines()[0] if data["code"].strip() else ""
    else:
        shown_in = "" if step.input_json is None else step.input_json
    return shown_in, "" if step.output_json is None else step.output_json


def _add(parent: Tree, node: TraceNode) -> None:
    step = node.step
    line = Text.assemble(
        (step.name, "bold"),
        f"  {step.kind}  ",
        (step.status, _STATUS_STYLE.get(step.status, "")),
        f"  {_duration(node.duration)}",
    )
    if step.attempts > 1:
        line.append(f"  {step.attempts} attempts")
    if step.stale:
        line.append("  not asked for again", style="magenta")
    shown_in, shown_out = _summary(step)
    if shown_in:
        line.append(f"  {_cut(shown_in)}", style="cyan")
    if step.status == "completed" and shown_out:
        line.append(f" → {_cut(shown_out)}", style="dim")
    if step.error is not None:
        detail = f"{step.error.get('type', '')}: {step.error.get('message', '')}"
        line.append(f" → {_cut(detail)}", style="red")
    branch = parent.add(line)
    # Attempts add to the step's own line when there were several, or when one holds the
    # detail of an unexpected failure (which the step's error deliberately leaves out).
    if step.attempts > 1 or any(
        "exception" in (a.get("error") or {}) or "hook" in a for a in step.attempt_log
    ):
        for attempt in step.attempt_log:
            _add_attempt(branch, attempt)
    for child in node.children:
        _add(branch, child)


def _add_attempt(parent: Tree, attempt: dict[str, Any]) -> None:
    if "attempt" not in attempt:  # a lifecycle hook's record (see _hooks.py)
        parent.add(_hook_line(attempt))
        return
    finished = attempt.get("finished_at")
    took = None if finished is None else finished - attempt["started_at"]
    line = Text(f"attempt {attempt['attempt']}  {_duration(took)}", style="dim")
    error = attempt.get("error")
    if error:
        detail = error.get("exception") or f"{error.get('type')}: {error.get('message')}"
        line.append(f"  {_cut(detail)}", style="red")
        if error.get("error_id"):
            line.append(f"  ({error['error_id']})", style="dim")
    parent.add(line)


def _hook_line(entry: dict[str, Any]) -> Text:
    hook = entry.get("hook", "hook")
    error = entry.get("error")
    if isinstance(error, dict):
        detail = error.get("exception") or f"{error.get('type')}: {error.get('message')}"
        return Text(f"{hook}: {_cut(detail)}", style="red")
    if "input" in entry:
        return Text(f"{hook}: changed the input to {_cut(json.dumps(entry['input']))}", style="yellow")
    if "tool_result" in entry:
        return Text(
            f"{hook}: replaced the tool's result {_cut(json.dumps(entry['tool_result']))}", style="yellow"
        )
    return Text(f"{hook}: kept it as it was", style="dim")


def _console() -> Console:
    console = Console()
    # Piped output is not wrapped at 80 columns: a trace line is worth keeping whole.
    return console if console.is_terminal else Console(width=200)


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "…"
    if seconds < 1:
        return f"{seconds * 1000:.1f}ms"
    return f"{seconds:.2f}s"


def _time(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")
