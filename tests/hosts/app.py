"""The host application the hosts tests serve with ``toolbridge serve hosts_app:bridge``.

Its tools write a side-effect ledger (``HOSTS_LEDGER``, one JSON line per execution, appended
before the tool returns): what ran, under which step, on which daemon. ``hold`` also waits
to be released (``HOSTS_FIFOS``: it says it started on the ``started`` FIFO and reads its
``release-<label>`` FIFO), so a test can cut the network while it runs. The journal comes
from ``--journal`` / ``TOOLBRIDGE_JOURNAL``. Copied to the test's directory as a module.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from toolbridge import Bridge, ToolContext, tool

LEDGER = os.environ["HOSTS_LEDGER"]
FIFOS = os.environ.get("HOSTS_FIFOS", "")
DAEMON = os.environ.get("HOSTS_DAEMON", "")


def note(what: str, ctx: ToolContext) -> None:
    line = {
        "what": what,
        "run": ctx.run_id,
        "key": ctx.step_key,
        "attempt": ctx.attempt,
        "daemon": DAEMON,
        "at": time.time(),
    }
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def _hold(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    label = args["label"]
    note(f"hold {label}", ctx)
    with open(os.path.join(FIFOS, "started"), "w") as started:
        started.write(label + "\n")
    with open(os.path.join(FIFOS, f"release-{label}")) as release:
        release.read()
    return {"held": label}


def _record(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    note(f"record {args['n']}", ctx)
    return {"n": args["n"], "daemon": DAEMON}


def _charge(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    note(f"charge {args['n']}", ctx)
    return {"charged": args["n"]}


LABEL = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

bridge = Bridge(
    run_lease=float(os.environ.get("HOSTS_LEASE", "30")),
    durability="full" if os.environ.get("HOSTS_DURABILITY") == "full" else "normal",
    tools={
        "hold": tool.step(run=_hold, input=LABEL, description="waits until the test releases it"),
        "record": tool.step(run=_record, input=NUMBER, description="notes a number"),
        "charge": tool.step(run=_charge, input=NUMBER, at_most_once=True, description="at most once"),
    },
)
