"""Loading the bridge a command names (``MODULE:ATTR``), and the CLI's own error."""

from __future__ import annotations

import importlib
import os
import sys

from toolbridge import Bridge


class CLIError(Exception):
    """A problem with what was typed; printed without a traceback, exit status 2."""


def load_bridge(target: str) -> Bridge:
    """Import ``MODULE:ATTR`` and return the :class:`Bridge` it names.

    The current directory is importable, as it is for ``python -m``.

    Raises:
        CLIError: when the target cannot be imported or is not a Bridge.
    """
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise CLIError(f"expected MODULE:ATTR (for example app.tools:bridge), got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CLIError(f"cannot import {module_name!r}: {exc}") from exc
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
