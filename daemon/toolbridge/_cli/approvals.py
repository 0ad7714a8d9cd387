"""``toolbridge approvals``: see and decide, from a shell, the requests calls wait on.

::

    toolbridge approvals list --journal app.db
    toolbridge approvals show apr_1f2e --journal app.db
    toolbridge approvals approve apr_1f2e --journal app.db --reason "checked the order"
    toolbridge approvals reject apr_1f2e --journal app.db --reason "not this customer"
    toolbridge approvals answer apr_9a8b "the savings account" --journal app.db

Works on the journal file while a host serves it, or while none does: a waiting host sees the
decision within a fraction of a second; a run stopped with ``RunWaiting`` resumes when it is
entered again. Decisions are recorded as made by ``--as`` (the OS user by default) via ``cli``.
A second decision on one request fails (exit status 1) saying how it was decided.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import getpass
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from toolbridge import ApprovalRequest
from toolbridge._calls.decisions import Approvals
from toolbridge._calls.hub import ApprovalHub
from toolbridge._cli.target import CLIError
from toolbridge._journal.base import open_journal

__all__ = ["register"]

T = TypeVar("T")


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``approvals`` and its subcommands to the ``toolbridge`` parser."""
    group = commands.add_parser("approvals", help="list and decide the requests calls wait on")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the pending requests (with --all, every request)")
    listing.add_argument("--run", metavar="RUN_ID", help="only this run's requests")
    listing.add_argument("--all", action="store_true", help="decided and expired requests too")
    _common(listing)
    listing.set_defaults(handler=_list)
    show = actions.add_parser("show", help="one request in full: the call, the arguments, the decision")
    show.add_argument("request_id", metavar="ID")
    _common(show)
    show.set_defaults(handler=_show)
    for name, text in (("approve", "approve a call: it runs"), ("reject", "reject a request")):
        decide = actions.add_parser(name, help=text)
        decide.add_argument("request_id", metavar="ID")
        decide.add_argument("--reason", required=name == "reject", help="why (shown to the sandbox)")
        _decider(decide)
        decide.set_defaults(handler=_approve if name == "approve" else _reject)
    answer = actions.add_parser("answer", help="answer a question asked with ask_user")
    answer.add_argument("request_id", metavar="ID")
    answer.add_argument("answer", metavar="ANSWER", help="text, or JSON for an answer that is not a string")
    _decider(answer)
    answer.set_defaults(handler=_answer)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--journal", type=Path, default=Path("toolbridge.db"), help="the journal file (default toolbridge.db)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def _decider(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as", dest="who", default=None, metavar="NAME", help="who decides (default: the OS user)"
    )
    _common(parser)


def _with_approvals(path: Path, action: Callable[[Approvals], Awaitable[T]]) -> T:
    if not path.exists():
        raise CLIError(f"no journal at {path} (pass --journal PATH)")

    async def go() -> T:
        journal = open_journal(path)
        await journal.open()
        try:
            return await action(Approvals(ApprovalHub(journal), channel="cli"))
        finally:
            await journal.close()

    return asyncio.run(go())


def _list(args: argparse.Namespace) -> int:
    requests = _with_approvals(
        args.journal, lambda approvals: approvals.list(args.run, state=None if args.all else "pending")
    )
    if args.json:
        print(json.dumps([req.to_dict() for req in requests], indent=2))
        return 0
    if not requests:
        print("no pending requests" if not args.all else "no requests")
        return 0
    table = Table("request", "kind", "state", "run", "asks", "asked", "expires", box=None)
    for req in requests:
        table.add_row(
            req.id, req.kind, req.state, req.run_id, req.summary, _time(req.created_at), _time(req.expires_at)
        )
    Console(width=200).print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    req = _with_approvals(args.journal, lambda approvals: approvals.get(args.request_id))
    _print(req, as_json=args.json)
    return 0


def _print(req: ApprovalRequest, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(req.to_dict(), indent=2))
        return
    lines = [
        f"request   {req.id}  ({req.kind}, {req.state})",
        f"asks      {req.summary}",
        f"run       {req.run_id}  step {req.step_key}",
        f"tool      {req.tool}",
        f"arguments {json.dumps(req.arguments, ensure_ascii=False)}",
        f"asked     {_time(req.created_at)}; expires {_time(req.expires_at)}",
    ]
    if req.answer_schema is not None:
        lines.append(f"answer    must match {json.dumps(req.answer_schema)}")
    if req.state != "pending":
        how = "answered" if req.kind == "input" and req.state == "approved" else req.state
        lines.append(
            f"decided   {how} by {req.decided_by or '-'} via {req.channel} at {_time(req.decided_at)}"
        )
        if req.reason:
            lines.append(f"reason    {req.reason}")
        if req.answer is not None:
            lines.append(f"answer    {json.dumps(req.answer, ensure_ascii=False)}")
    print("\n".join(lines))


def _who(args: argparse.Namespace) -> str:
    return str(args.who or getpass.getuser())


def _approve(args: argparse.Namespace) -> int:
    req = _with_approvals(
        args.journal, lambda a: a.approve(args.request_id, by=_who(args), reason=args.reason)
    )
    _print(req, as_json=args.json)
    return 0


def _reject(args: argparse.Namespace) -> int:
    req = _with_approvals(
        args.journal, lambda a: a.reject(args.request_id, by=_who(args), reason=args.reason)
    )
    _print(req, as_json=args.json)
    return 0


def _answer(args: argparse.Namespace) -> int:
    async def answer(approvals: Approvals) -> ApprovalRequest:
        req = await approvals.get(args.request_id)
        value: Any = args.answer
        if (req.answer_schema or {}).get("type") != "string":
            try:
                value = json.loads(args.answer)
            except json.JSONDecodeError:
                value = args.answer  # plain text; the schema says whether it will do
        return await approvals.answer(args.request_id, value, by=_who(args))

    _print(_with_approvals(args.journal, answer), as_json=args.json)
    return 0


def _time(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")
