"""``toolbridge ui --journal PATH [--port N]``: the local web view of a journal's runs.

Serves on 127.0.0.1 only, until interrupted; the journal can be written by a running bridge
meanwhile (the view follows it). It prints a login URL carrying a one-time token, as Jupyter
does: opening it logs one browser in, and nothing else can see a page or decide a request.
Needs starlette and uvicorn (``toolbridge[ui]``, or the
``mcp`` extra, which brings them).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from toolbridge._cli.serve import add_tls_options, tls_config
from toolbridge._cli.target import CLIError
from toolbridge._tls import TLSError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``ui`` to the ``toolbridge`` parser."""
    ui = commands.add_parser(
        "ui",
        help="serve a web view of a journal's runs on 127.0.0.1",
        description=(
            "Serve the runs of a journal in the browser, on 127.0.0.1 only: the list of runs and "
            "each run as a waterfall of its steps, attempts, hooks and waits, live while they go on."
        ),
    )
    ui.add_argument(
        "--journal", default="toolbridge.db", metavar="PATH", help="the journal file (default toolbridge.db)"
    )
    ui.add_argument(
        "--port", type=int, default=8766, metavar="N", help="the port (default 8766; 0: any free one)"
    )
    add_tls_options(ui)
    ui.set_defaults(handler=_ui)


def _ui(args: argparse.Namespace) -> int:
    try:
        from toolbridge._ui.journal import open_reader
        from toolbridge._ui.server import serve_journal
    except ImportError as exc:
        raise CLIError(
            f"the web view needs starlette and uvicorn: pip install 'toolbridge[ui]' ({exc})"
        ) from None
    if not 0 <= args.port <= 65535:
        raise CLIError("--port must be from 0 to 65535")
    tls = tls_config(args)
    if tls is not None:
        try:
            tls.load()
        except TLSError as exc:
            raise CLIError(str(exc)) from None
    journal = open_reader(args.journal)

    async def serve() -> None:
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopped.set)
        await journal.open()
        try:
            async with serve_journal(journal, port=args.port, tls=tls) as url:
                print(
                    f"toolbridge: the runs of {args.journal}: open {url} to log in "
                    "(the link works once; keep it to yourself)",
                    file=sys.stderr,
                )
                print(f"TOOLBRIDGE_UI_URL={url}", flush=True)
                await stopped.wait()
        finally:
            await journal.close()

    try:
        asyncio.run(serve())
    except OSError as exc:
        raise CLIError(f"cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    return 0
