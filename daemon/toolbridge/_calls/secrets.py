"""A call's secrets: never journaled, traced or shown in clear, yet usable by the sandbox.

Arguments the tool's input schema marks secret (``SecretStr``, ``writeOnly``, ``format:
"password"``) are journaled as keyed hashes: the step key (a hash of the recorded input)
stays the same for the same secret, so a replay finds its call, and nothing in the journal
can be tested against guesses without the host's key.

A result's secrets (a ``SecretStr`` the tool returned, or a part its output schema marks
secret) are journaled sealed (AES-GCM under the host's key, see ``toolbridge._secrets``)
and sent to the sandbox in clear: the tool's author chose to let the sandbox see them. A
replay opens the seal and answers the completed call as the first time, without running the
tool again. Sealing was chosen over running such a step again on replay: a tool that mints
a credential or charges a card must not be run twice, and its idempotency key only helps
when the service behind it honours one.
"""

from __future__ import annotations

import json
from typing import Any

from toolbridge._json import canonical, dumps
from toolbridge._schema.secrets import Path, replace_at, schema_secret_paths, secret_paths_of_python
from toolbridge._secrets import SecretBox
from toolbridge._tools.binding import BoundCall
from toolbridge._tools.tool import Tool

__all__ = [
    "MASK",
    "SEALED",
    "SECRET",
    "journaled_arguments",
    "journaled_result",
    "masked",
    "opened_result",
    "requested_input",
]

SECRET = "$toolbridge.secret"
"""The key of ``{SECRET: keyed hash}``, an argument's secret as the journal records it."""
SEALED = "$toolbridge.sealed"
"""The key of ``{SEALED: sealed text}``, a result's secret as the journal records it."""
MASK = "**********"
"""What a person is shown in place of a secret (pydantic's own mask for ``SecretStr``)."""
MASKED = dumps(MASK)


def journaled_arguments(
    tool: Tool, positional: list[Any], named: dict[str, Any], box: SecretBox
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments with each secret replaced by its keyed hash."""

    def hashed(_: Path, leaf: Any) -> dict[str, str]:
        return {SECRET: box.digest(canonical(leaf))}

    if tool.kind == "function":
        schema = tool.signature.schema.json_schema if tool.signature is not None else None
        if schema is None:
            return positional, named
        names = list(schema.get("properties", {}))
        as_named = {**dict(zip(names, positional, strict=False)), **named}
        paths = schema_secret_paths(schema, as_named)
        redacted = replace_at(as_named, paths, hashed)
        return [redacted[name] for name in names[: len(positional)]], {k: redacted[k] for k in named}
    schema = tool.input_schema.json_schema if tool.input_schema is not None else None
    raw: Any = positional[0] if positional else named
    redacted = replace_at(raw, schema_secret_paths(schema, raw), hashed)
    return ([redacted], {}) if positional else ([], redacted)


def requested_input(tool: Tool, bound: BoundCall, box: SecretBox) -> Any:
    """A call's input as a request for a person keeps it: JSON, each secret replaced by its
    keyed hash, so that :func:`masked` shows it to nobody and the request's fingerprint still
    tells one secret from another (``bound.input`` has pydantic's mask where a ``SecretStr``
    was: the validated value still holds it open)."""
    if tool.kind == "function":  # bound.input: the arguments as received
        given = bound.input
        if not isinstance(given, dict):
            return journaled_arguments(tool, list(given), {}, box)[0]
        keyed, keyed_named = journaled_arguments(tool, list(given["args"]), dict(given["kwargs"]), box)
        return {"args": keyed, "kwargs": keyed_named}
    plain = bound.input
    schema = tool.input_schema.json_schema if tool.input_schema is not None else None
    clear, paths = _secrets_of(bound.args[0] if bound.args else None, plain, schema)

    def hashed(path: Path, leaf: Any) -> dict[str, str]:
        return {SECRET: box.digest(canonical(clear.get(path, leaf)))}

    return replace_at(plain, paths, hashed)


def masked(value: Any) -> Any:
    """``value`` with each keyed hash of a secret (see :func:`requested_input`) shown as
    :data:`MASK`."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(SECRET), str):
            return MASK
        return {key: masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    return value


def journaled_result(tool: Tool, value: Any, box: SecretBox) -> str:
    """The result as the journal records it: JSON text, each secret sealed.

    Raises:
        SchemaValidationError: when the result does not match the tool's ``output``.
    """
    schema = tool.output_schema
    validated = schema.validate_python(value, strict=False) if schema is not None else value
    jsonable = schema.to_jsonable(validated) if schema is not None else validated
    text = dumps(jsonable)
    if not tool.output_may_hold_secrets and MASKED not in text:
        return text  # the usual call: nothing secret, nothing more to do
    plain = json.loads(text)
    clear, paths = _secrets_of(validated, plain, _json_schema(tool))
    if not paths:
        return text

    def sealed(path: Path, leaf: Any) -> dict[str, str]:
        return {SEALED: box.seal(canonical(clear.get(path, leaf)))}

    return dumps(replace_at(plain, paths, sealed))


def opened_result(text: str | None, box: SecretBox) -> str | None:
    """The result as the sandbox receives it: each sealed secret opened.

    Raises:
        ValueError: when a seal does not open with this host's key.
    """
    if text is None or SEALED not in text:
        return text
    return dumps(_open(json.loads(text), box))


def _open(value: Any, box: SecretBox) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(SEALED), str):
            return json.loads(box.open(value[SEALED]))
        return {key: _open(item, box) for key, item in value.items()}
    if isinstance(value, list):
        return [_open(item, box) for item in value]
    return value


def _secrets_of(value: Any, plain: Any, schema: dict[str, Any] | None) -> tuple[dict[Path, str], list[Path]]:
    """The secrets of a validated ``value`` whose JSON is ``plain``: the clear text of each
    ``SecretStr`` by path (its JSON holds only pydantic's mask), and the paths of every secret,
    those ``schema`` marks included."""
    clear = dict(secret_paths_of_python(value))
    return clear, [*clear, *(path for path in schema_secret_paths(schema, plain) if path not in clear)]


def _json_schema(tool: Tool) -> dict[str, Any] | None:
    return tool.output_schema.json_schema if tool.output_schema is not None else None
