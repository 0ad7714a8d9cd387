"""``toolbridge serve`` and ``toolbridge token``: sidecar mode from the command line.

``serve`` hosts a bridge's registered tools for sandboxes started elsewhere (a container, a
remote VM) until interrupted; ``--recover`` also resumes the durable-function runs of daemons
that died. ``token`` mints, lists and revokes the tokens those sandboxes present; it works on
the journal directly (a file, or PostgreSQL), so it can run while ``serve`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import signal
import sys
import warnings
from collections.abc import Coroutine
from typing import Any

from toolbridge import Bridge
from toolbridge._cli.target import CLIError, add_journal_option, journal_location, load_bridge
from toolbridge._server.sidecar import SidecarToken, open_token_store, ttl_seconds
from toolbridge._tls import ClearTextWarning, TLSConfig, TLSError, check_clear_text


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to the ``toolbridge`` parser."""
    serve = commands.add_parser(
        "serve",
        help="serve a bridge's registered tools to sandboxes started elsewhere",
        description=(
            "Serve the tools registered on MODULE:ATTR (a toolbridge.Bridge, or a function "
            "returning one) until interrupted. Sandboxes need TOOLBRIDGE_ADDRESS (printed on "
            "start) and a TOOLBRIDGE_TOKEN from `toolbridge token mint`."
        ),
    )
    serve.add_argument("target", metavar="MODULE:ATTR")
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH", help="serve on this Unix socket")
    where.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="serve on TCP; off loopback it needs --tls-cert/--tls-key (or --insecure)",
    )
    add_tls_options(serve, insecure=True)
    add_journal_option(serve)
    serve.add_argument(
        "--recover",
        action="store_true",
        help="resume the runs of the bridge's durable functions whose daemon died (lease expired)",
    )
    serve.add_argument(
        "--grace",
        type=float,
        metavar="SECONDS",
        help="on SIGTERM or SIGINT, seconds that calls in flight get to finish (the bridge's shutdown_grace)",
    )
    serve.set_defaults(handler=_serve)

    token = commands.add_parser(
        "token",
        help="mint, list or revoke sidecar tokens",
        description="Tokens for sandboxes served by `toolbridge serve`, kept in the bridge's journal.",
    )
    actions = token.add_subparsers(dest="action", required=True, metavar="ACTION")
    mint = actions.add_parser("mint", help="mint a token and print it")
    mint.add_argument("target", metavar="MODULE:ATTR")
    add_journal_option(mint)
    mint.add_argument("--run", required=True, metavar="RUN_ID", help="the run its calls belong to")
    mint.add_argument(
        "--tool", action="append", default=[], metavar="NAME", help="a tool it may call (repeat)"
    )
    mint.add_argument("--all-tools", action="store_true", help="every tool registered on the bridge")
    mint.add_argument("--max-calls", type=int, default=100, metavar="N", help="call budget (100)")
    mint.add_argument("--ttl", default="1h", metavar="DURATION", help="lifetime: 90s, 15m, 2h, 7d (1h)")
    mint.add_argument("--json", action="store_true", help="print the token and its grant as JSON")
    mint.set_defaults(handler=_mint)
    listing = actions.add_parser("list", help="list tokens (never their secrets)")
    listing.add_argument("target", metavar="MODULE:ATTR", nargs="?", help="not needed with --journal")
    add_journal_option(listing)
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=_list)
    revoke = actions.add_parser("revoke", help="revoke a token: its next call fails")
    revoke.add_argument("target", metavar="MODULE:ATTR", nargs="?", help="not needed with --journal")
    add_journal_option(revoke)
    revoke.add_argument("token_id", metavar="TOKEN_ID")
    revoke.set_defaults(handler=_revoke)


def add_tls_options(parser: argparse.ArgumentParser, *, insecure: bool = False) -> None:
    """``--tls-cert``, ``--tls-key``, ``--tls-client-ca`` (and ``--insecure``) on a TCP face."""
    parser.add_argument("--tls-cert", metavar="FILE", help="serve TLS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    parser.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="require client certificates issued by this CA (mutual TLS)",
    )
    if insecure:
        parser.add_argument(
            "--insecure",
            action="store_true",
            help="serve a non-loopback address without TLS (tokens travel in clear text)",
        )


def tls_config(args: argparse.Namespace) -> TLSConfig | None:
    """The TLS files the flags name, or ``None``; a half-given setting is a CLI error."""
    try:
        return TLSConfig.from_options(args.tls_cert, args.tls_key, args.tls_client_ca)
    except TLSError as exc:
        raise CLIError(str(exc)) from None


async def serve_until_stopped(bridge: Bridge, stopped: asyncio.Event | None = None) -> None:
    """Serve until SIGINT or SIGTERM (or until ``stopped`` is set)."""
    stopped = stopped or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    try:
        async with bridge:
            names = ", ".join(sorted(bridge.tools)) or "(none)"
            print(f"toolbridge: serving {len(bridge.tools)} tools ({names})", file=sys.stderr)
            print(f"TOOLBRIDGE_ADDRESS={bridge.address}", flush=True)
            await stopped.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _serve(args: argparse.Namespace) -> int:
    bridge = load_bridge(args.target, journal=args.journal)
    if args.journal is not None and bridge.journal_location != args.journal:
        raise CLIError(
            f"{args.target} builds its bridge with journal={bridge.journal_location!r}; leave "
            "journal= out of Bridge(...) (it then reads TOOLBRIDGE_JOURNAL) to choose it with --journal"
        )
    if args.recover:
        bridge.enable_recovery()
    tls = tls_config(args)
    if tls is not None and args.listen is None:
        raise CLIError("--tls-cert is for a TCP address: add --listen HOST:PORT")
    if args.socket is not None or args.listen is not None:
        try:
            bridge.serve_on(
                socket=args.socket,
                listen=args.listen,
                tls_cert=None if tls is None else tls.cert,
                tls_key=None if tls is None else tls.key,
                tls_client_ca=None if tls is None else tls.client_ca,
                insecure=args.insecure,
            )
        except TLSError as exc:
            raise CLIError(str(exc)) from None
    if args.grace is not None:
        try:
            bridge.shutdown_grace = args.grace
        except ValueError as exc:
            raise CLIError(str(exc)) from None
    if args.listen is not None and tls is None:
        warning = check_clear_text(args.listen, insecure=True, face="toolbridge serve")
        if warning is not None:
            print(f"toolbridge: warning: {warning}", file=sys.stderr)
            warnings.filterwarnings("ignore", category=ClearTextWarning)  # said once, here
    if tls is not None:
        try:
            tls.load()  # a wrong file is one line now, not a traceback from inside the bridge
        except TLSError as exc:
            raise CLIError(str(exc)) from None
    _run(serve_until_stopped(bridge))
    return 0


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run the daemon on uvloop when it is installed (``toolbridge[fast]``), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


def _tokens_journal(args: argparse.Namespace) -> str:
    """The journal holding the tokens: ``--journal`` (or TOOLBRIDGE_JOURNAL) alone is enough to
    list or revoke them; only minting needs the bridge, to check the tools it grants."""
    if args.target is None:
        location = journal_location(args)
        if location is None:
            raise CLIError("name the journal with --journal PATH|URL (or the bridge, MODULE:ATTR)")
        return location
    return _journal_path(load_bridge(args.target, journal=args.journal), args)


def _journal_path(bridge: Bridge, args: argparse.Namespace) -> str:
    location = args.journal or bridge.journal_location
    if location is None:
        raise CLIError("this bridge has no journal file (journal=None), so it cannot keep sidecar tokens")
    return location


def _when(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, tz=datetime.UTC).isoformat(timespec="seconds")


def _as_json(token: SidecarToken) -> dict[str, Any]:
    data = {
        "id": token.id,
        "run_id": token.run_id,
        "tools": list(token.tools),
        "max_calls": token.max_calls,
        "calls": token.calls,
        "created_at": token.created_at,
        "expires_at": token.expires_at,
        "revoked_at": token.revoked_at,
        "active": token.active(),
    }
    if token.token is not None:
        data["token"] = token.token
    return data


def _mint(args: argparse.Namespace) -> int:
    bridge = load_bridge(args.target, journal=args.journal)
    tools = sorted(bridge.tools) if args.all_tools else list(args.tool)
    if not tools:
        raise CLIError("name the tools the token may call with --tool NAME (or --all-tools)")
    unknown = sorted(set(tools) - set(bridge.tools))
    if unknown:
        raise CLIError(f"{args.target} has no registered tool named {', '.join(map(repr, unknown))}")
    try:
        ttl = ttl_seconds(args.ttl)
    except ValueError as exc:
        raise CLIError(str(exc)) from None

    async def mint() -> SidecarToken:
        async with open_token_store(_journal_path(bridge, args)) as store:
            return await store.mint(run_id=args.run, tools=tools, max_calls=args.max_calls, ttl=ttl)

    try:
        token = asyncio.run(mint())
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if args.json:
        print(json.dumps(_as_json(token)))
    else:
        print(token.token)
        print(
            f"toolbridge: token {token.id} for run {token.run_id!r}: {', '.join(token.tools)}; "
            f"{token.max_calls} calls; expires {_when(token.expires_at)}",
            file=sys.stderr,
        )
    return 0


def _list(args: argparse.Namespace) -> int:
    location = _tokens_journal(args)

    async def listing() -> list[SidecarToken]:
        async with open_token_store(location) as store:
            return await store.list()

    tokens = asyncio.run(listing())
    if args.json:
        print(json.dumps([_as_json(token) for token in tokens]))
        return 0
    for token in tokens:
        state = "revoked" if token.revoked_at is not None else "active" if token.active() else "expired"
        print(
            f"{token.id}  {state:<8} run={token.run_id}  calls={token.calls}/{token.max_calls}  "
            f"expires={_when(token.expires_at)}  tools={','.join(token.tools)}"
        )
    return 0


def _revoke(args: argparse.Namespace) -> int:
    location = _tokens_journal(args)

    async def revoke() -> bool:
        async with open_token_store(location) as store:
            return await store.revoke(args.token_id)

    if not asyncio.run(revoke()):
        raise CLIError(f"no active token {args.token_id!r} to revoke (unknown or already revoked)")
    print(f"toolbridge: revoked token {args.token_id}", file=sys.stderr)
    return 0
