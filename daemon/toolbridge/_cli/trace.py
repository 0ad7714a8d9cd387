"""``toolbridge runs`` and ``toolbridge trace RUN_ID``: read the journal as a user would.

The trace shows what the web view shows, in text (both read :mod:`toolbridge._ui.view`):
attempts with their errors and output-validation reasons, hooks, the windows of a wait,
waiting and stale steps. ``--follow`` redraws it while the run goes on, until it ends.
"""

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
from rich.live import Live
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from toolbridge._cli.target import CLIError, add_journal_option, journal_location
from toolbridge._errors import ToolbridgeError
from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._journal.base import Journal, open_journal
from toolbridge._journal.trace import TraceNode, build_tree, run_to_dict
from toolbridge._records import RunSummary, StepRecord
from toolbridge._telemetry.otlp import export_run
from toolbridge._telemetry.tracing import content_enabled
from toolbridge._ui.view import as_shown, entry_view, step_marker

FOLLOW_EVERY = 0.5
"""Seconds between two looks at the journal while ``--follow`` waits for a run to change."""

PREVIEW = 60
"""Characters of an input, output or error shown in the terminal view (--json shows all)."""

REASON = 240
"""Characters of an output-validation reason shown: the reason is the point of the line."""

_STATUS_STYLE = {
    "completed": "green",
    "failed": "red",
    "running": "yellow",
    "waiting": "magenta",
    "interrupted": "red",
}


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``runs`` and ``trace`` to the ``toolbridge`` parser."""
    runs = commands.add_parser("runs", help="list the runs in a journal, newest first")
    runs.add_argument("--limit", type=int, default=50, help="how many runs to list (default 50)")
    _common(runs)
    runs.set_defaults(handler=_runs)
    trace = commands.add_parser("trace", help="show one run's steps as a tree")
    trace.add_argument("run_id", metavar="RUN_ID")
    trace.add_argument(
        "--follow", action="store_true", help="redraw the trace while the run goes on, until it ends"
    )
    trace.add_argument(
        "--export",
        metavar="otlp[=URL]",
        type=_export_target,
        help="send the finished run as OpenTelemetry spans over OTLP/HTTP instead of showing it "
        "(URL: the collector's traces endpoint; default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "
        "http://localhost:4318/v1/traces; needs toolbridge[otlp])",
    )
    _common(trace)
    trace.set_defaults(handler=_trace)


def _common(parser: argparse.ArgumentParser) -> None:
    add_journal_option(parser, fallback="toolbridge.db")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


Read = tuple[list[RunSummary], list[StepRecord], list[ApprovalRequest]]


def _journal(args: argparse.Namespace) -> Journal:
    """The journal ``--journal`` (or ``TOOLBRIDGE_JOURNAL``, or toolbridge.db) names."""
    location = journal_location(args, fallback="toolbridge.db")
    assert location is not None
    if "://" not in location and not Path(location).exists():
        raise CLIError(f"no journal at {location} (pass --journal PATH or a postgresql:// URL)")
    try:
        return open_journal(location)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _read(args: argparse.Namespace, run_id: str | None, limit: int) -> Read:
    return asyncio.run(_read_journal(_journal(args), run_id, limit))


async def _read_journal(journal: Journal, run_id: str | None, limit: int) -> Read:
    path = "this journal"
    await journal.open()
    try:
        if run_id is None:
            return [as_shown(run) for run in await journal.list_runs(limit)], [], []
        run = await journal.get_run(run_id)
        if run is None:
            raise CLIError(f"no run {run_id!r} in {path}")
        requests = await journal.approvals.list(run_id=run_id)
        return [as_shown(run)], await journal.load_steps(run_id), requests
    finally:
        await journal.close()


def _runs(args: argparse.Namespace) -> int:
    runs, _, _ = _read(args, None, args.limit)
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


def _export_target(value: str) -> str:
    """``otlp`` or ``otlp=URL`` -> the URL (``""`` for the exporter's default)."""
    kind, _, url = value.partition("=")
    if kind != "otlp" or ("=" in value and not url.startswith(("http://", "https://"))):
        raise argparse.ArgumentTypeError(f"{value!r}: use otlp or otlp=http://HOST:PORT/v1/traces")
    return url


def _trace(args: argparse.Namespace) -> int:
    if args.follow:
        if args.json:
            raise CLIError("--follow redraws the tree; it does not combine with --json")
        return asyncio.run(_follow(_journal(args), args.run_id))
    (run,), steps, requests = _read(args, args.run_id, 1)
    if args.export is not None:
        return _export(run, steps, args.export)
    roots = build_tree(steps, requests)
    if args.json:
        print(json.dumps({**run_to_dict(run), "tree": [node.to_dict() for node in roots]}, indent=2))
        return 0
    _console().print(_tree(run, roots))
    return 0


def _holder(run: RunSummary) -> tuple[str, str]:
    """Who holds the run and until when, as ``toolbridge runs`` shows them."""
    if run.owner is None:
        return "", ""
    if run.lease_expires_at is None:
        return run.owner, "released"
    if run.lease_expires_at <= time.time():
        return run.owner, f"expired {_time(run.lease_expires_at)}"
    return run.owner, f"until {_time(run.lease_expires_at)}"


async def _follow(journal: Journal, run_id: str) -> int:
    """Redraw the trace whenever the run changes, until it is no longer running.

    On a terminal the tree is redrawn in place; piped, each changed tree is printed after
    the last, so a reader sees every state the run went through.
    """
    console = _console()
    path = "this journal"
    await journal.open()
    try:
        with (
            Live(console=console, auto_refresh=False, transient=False)
            if console.is_terminal
            else _Printer(console) as out
        ):
            shown: object = None
            while True:
                run = await journal.get_run(run_id)
                if run is None:
                    raise CLIError(f"no run {run_id!r} in {path}")
                run = as_shown(run)
                steps = await journal.load_steps(run_id)
                requests = await journal.approvals.list(run_id=run_id)
                state = (
                    run,
                    [(s.key, s.status, s.attempts, len(s.attempt_log), s.stale) for s in steps],
                    [(r.id, r.state) for r in requests],
                )
                if state != shown:
                    shown = state
                    out.update(_tree(run, build_tree(steps, requests)), refresh=True)
                if run.status != "running":
                    return 0 if run.status == "completed" else 1
                await asyncio.sleep(FOLLOW_EVERY)
    finally:
        await journal.close()


class _Printer:
    """``Live``'s ``update`` for output that is not a terminal: print each tree in turn."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def __enter__(self) -> _Printer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, renderable: Tree, *, refresh: bool = False) -> None:
        self._console.print(renderable)
        self._console.file.flush()


def _tree(run: RunSummary, roots: list[TraceNode]) -> Tree:
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
    finished = run.status != "running"
    for node in roots:
        _add(tree, node, finished)
    if run.error:
        tree.add(Text(f"error: {_cut(run.error)}", style="red"))
    return tree


def _export(run: RunSummary, steps: list[StepRecord], url: str) -> int:
    try:
        report = export_run(run, steps, endpoint=url or None, content=content_enabled())
    except ToolbridgeError as exc:
        raise CLIError(str(exc)) from None
    print(f"exported run {run.run_id}: {report.spans} spans, trace id {report.trace_id}")
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


def _add(parent: Tree, node: TraceNode, finished: bool) -> None:
    step = node.step
    line = Text.assemble(
        (step.name, "bold"),
        f"  {step.kind}  ",
        (step.status, _STATUS_STYLE.get(step.status, "")),
        f"  {_duration(node.duration)}",
    )
    if step.attempts > 1:
        line.append(f"  {step.attempts} attempts")
    marker = step_marker(step, run_finished=finished)
    if marker:
        line.append(f"  {marker}", style="magenta" if step.stale else "yellow")
    shown_in, shown_out = _summary(step)
    if shown_in:
        line.append(f"  {_cut(shown_in)}", style="cyan")
    if step.status == "completed" and shown_out:
        line.append(f" → {_cut(shown_out)}", style="dim")
    if step.error is not None:
        detail = f"{step.error.get('type', '')}: {step.error.get('message', '')}"
        line.append(f" → {_cut(detail)}", style="red")
    branch = parent.add(line)
    # Entries add to the step's own line when there is more to say than one plain attempt:
    # retries, hooks, wait windows, the detail of an unexpected failure or of a result that
    # failed its output schema (which the step's error deliberately leaves out).
    entries = [entry_view(entry) for entry in step.attempt_log]
    if len(entries) > 1 or any(entry["kind"] != "attempt" or entry["tone"] != "plain" for entry in entries):
        for entry in entries:
            branch.add(_entry_line(entry))
    for req in node.approvals:
        branch.add(_request_line(req))
    for child in node.children:
        _add(branch, child, finished)


_TONE_STYLE = {"error": "red", "change": "yellow", "wait": "blue", "plain": "dim"}


def _entry_line(entry: dict[str, Any]) -> Text:
    took = (
        "" if entry["kind"] in ("state", "confirmation") else f"  {_duration(entry['duration'])}"
    )  # (instants)
    line = Text(f"{_cut(entry['label'], REASON)}{took}", style=_TONE_STYLE[entry["tone"]])
    if entry.get("output_error"):
        line.append(f"  output failed validation: {_cut(entry['output_error'], REASON)}", style="red")
    elif entry.get("error"):
        line.append(f"  {_cut(entry['error'])}", style="red")
    if entry.get("error_id"):
        line.append(f"  ({entry['error_id']})", style="dim")
    return line


def _request_line(req: ApprovalRequest) -> Text:
    """A request under its call: ``approval apr_…  approved by alice via cli at …: reason``."""
    style = {"approved": "green", "pending": "magenta"}.get(req.state, "red")
    line = Text(f"{req.kind} {req.id}  ", style="dim")
    if req.state == "pending":
        line.append(f"pending since {_time(req.created_at)}", style=style)
    else:
        by = f" by {req.decided_by}" if req.decided_by else ""
        how = "answered" if req.kind == "input" and req.state == "approved" else req.state
        line.append(f"{how}{by} via {req.channel} at {_time(req.decided_at or 0)}", style=style)
    if req.reason:
        line.append(f": {_cut(req.reason)}")
    return line


def _console() -> Console:
    console = Console()
    # Piped output is not wrapped at 80 columns: a trace line is worth keeping whole.
    return console if console.is_terminal else Console(width=200)


def _cut(text: str, limit: int = PREVIEW) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "…"
    if seconds < 1:
        return f"{seconds * 1000:.1f}ms"
    return f"{seconds:.2f}s"


def _time(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")
