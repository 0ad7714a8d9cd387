"""Loading the bridge a command names (``MODULE:ATTR``), the ``--journal`` option, the CLI's error."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from toolbridge import Bridge


class CLIError(Exception):
    """A problem with what was typed; printed without a traceback, exit status 2."""


JOURNAL_HELP = "the journal: a SQLite file or a postgresql:// URL (default: $TOOLBRIDGE_JOURNAL{fallback})"


def add_journal_option(parser: argparse.ArgumentParser, *, fallback: str | None = None) -> None:
    """Give a command ``--journal PATH|URL``; without it, ``TOOLBRIDGE_JOURNAL`` (or ``fallback``)."""
    shown = f", else {fallback}" if fallback else ", else the bridge's own"
    parser.add_argument("--journal", metavar="PATH|URL", help=JOURNAL_HELP.format(fallback=shown))


def journal_location(args: argparse.Namespace, *, fallback: str | None = None) -> str | None:
    """Where ``--journal`` points, else ``TOOLBRIDGE_JOURNAL``, else ``fallback``."""
    given: str | None = args.journal or os.environ.get("TOOLBRIDGE_JOURNAL") or fallback
    return given


def load_bridge(target: str, *, journal: str | None = None) -> Bridge:
    """Import ``MODULE:ATTR`` and return the :class:`Bridge` it names.

    The current directory is importable, as it is for ``python -m``. With ``journal``, a
    bridge built without ``journal=`` (which reads ``TOOLBRIDGE_JOURNAL``) records there.

    Raises:
        CLIError: when the target cannot be imported or is not a Bridge.
    """
    if journal is not None:
        os.environ["TOOLBRIDGE_JOURNAL"] = journal
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise CLIError(f"expected MODULE:ATTR (for example app.tools:bridge), got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CLIError(f"cannot import {module_name!r}: {exc}") from exc
    except ValueError as exc:  # a Bridge() it builds refused its options (no journal, ...)
        raise CLIError(f"{module_name!r} could not build its bridge: {exc}") from exc
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
