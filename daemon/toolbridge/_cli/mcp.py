"""``toolbridge mcp MODULE:ATTR``: a bridge's registered tools for MCP clients.

::

    toolbridge mcp app.tools:bridge                          # stdio (Claude Desktop, IDEs)
    toolbridge mcp app.tools:bridge --http 127.0.0.1:8765    # Streamable HTTP at /mcp

Over HTTP every request needs ``Authorization: Bearer <token>``: the token it prints
(``TOOLBRIDGE_MCP_TOKEN=``, made anew each start) or a sidecar token; ``--no-auth`` serves
without one, on a loopback address only.

Needs the ``toolbridge[mcp]`` extra. Over stdio, stdout is the protocol: the SDK points fd 1
at stderr while it serves, so a tool's stray print cannot corrupt it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from toolbridge._bridge import Bridge
from toolbridge._cli.serve import add_tls_options, tls_config
from toolbridge._cli.target import CLIError, load_bridge
from toolbridge._tls import TLSConfig, TLSError, check_clear_text

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add ``mcp`` to the ``toolbridge`` parser."""
    mcp = commands.add_parser(
        "mcp",
        help="serve a bridge's registered tools to MCP clients (stdio, or Streamable HTTP)",
        description=(
            "Serve the tools registered on MODULE:ATTR over the Model Context Protocol: on stdio "
            "by default, or over Streamable HTTP (stateless, JSON responses) at /mcp with --http. "
            "Every call is a durable step in the bridge's journal; a call whose request "
            '_meta carries "toolbridge/run_id" is a step of that run, so a retry with the same '
            "run id gets the recorded answer."
        ),
    )
    mcp.add_argument("target", metavar="MODULE:ATTR")
    mcp.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve Streamable HTTP here instead of stdio; every request needs "
        "Authorization: Bearer <token>: the TOOLBRIDGE_MCP_TOKEN it prints, or a sidecar token "
        "from `toolbridge token mint`",
    )
    mcp.add_argument(
        "--no-auth",
        action="store_true",
        help="with --http on a loopback address: serve requests without a bearer token too "
        "(any local process, sandboxes under the process launcher included, can then call "
        "every tool and decide requests)",
    )
    mcp.add_argument(
        "--progress-every",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="seconds between progress notifications while a call runs (default 1)",
    )
    add_tls_options(mcp, insecure=True)
    mcp.set_defaults(handler=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    try:
        from toolbridge._mcp.server import mcp_server
    except ImportError as exc:
        raise CLIError(f"the MCP face needs the mcp extra: pip install 'toolbridge[mcp]' ({exc})") from None
    bridge = load_bridge(args.target)
    if args.progress_every <= 0:
        raise CLIError("--progress-every must be a positive number of seconds")
    server = mcp_server(bridge, progress_interval=args.progress_every)
    tls = tls_config(args)
    if tls is not None and args.http is None:
        raise CLIError("--tls-cert is for --http HOST:PORT")
    if args.http is None:
        if args.no_auth:
            raise CLIError("--no-auth is for --http (stdio has no bearer token)")
        asyncio.run(_stdio(bridge, server))
        return 0
    from toolbridge._mcp.http import bind, is_loopback, new_token, parse_host_port

    try:
        host, port = parse_host_port(args.http)
    except ValueError as exc:
        raise CLIError(f"--http: {exc}") from None
    if args.no_auth and not is_loopback(host):
        raise CLIError(f"--no-auth: {args.http} is not a loopback address; off loopback a token is required")
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise CLIError(f"--http: cannot listen on {args.http}: {exc.strerror or exc}") from None
    try:
        if tls is not None:
            tls.load()
            warning = None
        else:
            warning = check_clear_text(args.http, insecure=args.insecure, face="toolbridge mcp --http")
    except TLSError as exc:
        sock.close()
        raise CLIError(str(exc)) from None
    if warning is not None:
        print(f"toolbridge: warning: {warning}", file=sys.stderr)
    if not is_loopback(host):
        print(
            f"toolbridge: {args.http} is not a loopback address: every request needs a bearer token",
            file=sys.stderr,
        )
    asyncio.run(_http(bridge, server, sock, host, None if args.no_auth else new_token(), tls))
    return 0


async def _stdio(bridge: Bridge, server: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with bridge, stdio_server() as (read, write):
        print(f"toolbridge: MCP on stdio: {len(bridge.tools)} tools", file=sys.stderr)
        await server.run(read, write, server.create_initialization_options())


async def _http(
    bridge: Bridge, server: Any, sock: Any, host: str, token: str | None, tls: TLSConfig | None
) -> None:
    import uvicorn

    from toolbridge._mcp.http import MCP_PATH, mcp_http_app

    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    async with bridge:
        app = mcp_http_app(server, bridge, host=host, token=token)
        options = {} if tls is None else tls.uvicorn_options()
        config = uvicorn.Config(app, log_level="warning", lifespan="on", **options)  # type: ignore[arg-type]
        web = uvicorn.Server(config)
        url = f"{'http' if tls is None else 'https'}://{shown}:{bound_port}{MCP_PATH}"
        print(f"toolbridge: MCP on {url}: {len(bridge.tools)} tools", file=sys.stderr)
        print(f"TOOLBRIDGE_MCP_URL={url}", flush=True)
        if token is None:
            print("toolbridge: --no-auth: any local process can call these tools", file=sys.stderr)
        # Only to whoever started the server: never in an environment a sandbox is given.
        print(f"TOOLBRIDGE_MCP_TOKEN={token or ''}", flush=True)
        await web.serve(sockets=[sock])
