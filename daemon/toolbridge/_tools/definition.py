"""A tool's frozen definition, :class:`Tool`: what it takes, how a call of it runs and what it returns.

Built by the declarations (:mod:`toolbridge._tools.tool`: ``tool.step``, ``tool.group``,
``tool.shim``, a plain callable) and checked there; the arguments of a call are bound against
it by :mod:`toolbridge._tools.binding`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from toolbridge._schema.nulls import NullOmission
from toolbridge._schema.schema import Schema
from toolbridge._schema.signature import FunctionSignature
from toolbridge._tools import binding
from toolbridge._tools.binding import BoundCall, marks_secrets, null_omission
from toolbridge._tools.context import ToolContext
from toolbridge._tools.invoke import Hook, call_maybe_async, is_async_callable
from toolbridge._tools.lifecycle import ErrorHook

if TYPE_CHECKING:
    from toolbridge._tools.shim import ShimSpec

__all__ = ["TOOL_NAME", "Confirmation", "HumanPrompt", "Tool", "ToolKind", "check_tool_name"]

TOOL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

ToolKind = Literal["function", "step", "group"]
Confirmation = Callable[[Any, ToolContext], Any]
"""``requires_confirmation(args, ctx) -> bool`` (sync or async): whether a call needs a person."""


def check_tool_name(name: object) -> str:
    """Return ``name`` if it is a valid tool name.

    Raises:
        ValueError: naming the rule, for anything else.
    """
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        raise ValueError(
            f"invalid tool name {name!r}: a tool name starts with a letter, followed by "
            "letters, digits, '_' or '-', at most 64 characters in all"
        )
    return name


@dataclass(frozen=True)
class HumanPrompt:
    """What a built-in human-in-the-loop tool asks (see :mod:`builtin`): its result is the
    person's decision (``"approval"``) or answer (``"input"``), and it has no handler."""

    kind: Literal["approval", "input"]
    answer_schema: Schema | None = None


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A tool's frozen definition. Build one with ``tool.step``, ``tool.group`` or a callable."""

    kind: ToolKind
    handler: Callable[..., Any]
    description: str = ""
    input_schema: Schema | None = None
    output_schema: Schema | None = None
    strict: bool = True
    at_most_once: bool = False
    attempts: int | None = None
    on_start: Hook | None = None
    on_finish: Hook | None = None
    requires_confirmation: bool | Confirmation = False
    name: str | None = None
    human: HumanPrompt | None = None
    on_error: ErrorHook | None = None
    annotations: Mapping[str, Any] | None = None
    signature: FunctionSignature | None = field(default=None, repr=False)
    handler_takes_context: bool = True
    shim: ShimSpec | None = None  # a program on the command's PATH (``tool.shim``)
    timeout: float | None = None  # seconds one attempt may take; ``ToolOptions.tool_timeout`` if None

    def schema(self) -> dict[str, Any]:
        """``{name, description, input_schema, requires_confirmation}`` (a callable: ``True``)."""
        schema = self.input_schema.json_schema if self.input_schema is not None else {"type": "object"}
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": schema,
            "requires_confirmation": self.requires_confirmation is not False,
        }

    def bind(self, positional: list[Any], named: dict[str, Any], named_json: bytes) -> BoundCall:
        """Validate arguments from the sandbox.

        A ``null`` given for an optional argument that does not accept null means "not
        given" (OpenAI's strict mode sends one for every argument it leaves out); everything
        else is validated against the tool's own schema, ``strict`` or not.

        Raises:
            SchemaValidationError: naming each offending field.
        """
        return binding.bind(self, self._nulls, positional, named, named_json)

    def rebind(self, changed_input: Any) -> BoundCall:
        """Validate an input rewritten by ``on_start``."""
        return binding.rebind(self, self._nulls, changed_input)

    @functools.cached_property
    def input_may_hold_secrets(self) -> bool:
        """Whether the input schema marks anything secret (asked once per tool, not per call)."""
        return marks_secrets(self.signature.schema if self.signature is not None else self.input_schema)

    @functools.cached_property
    def output_may_hold_secrets(self) -> bool:
        """Whether the output schema marks anything secret."""
        return marks_secrets(self.output_schema)

    @functools.cached_property
    def _nulls(self) -> NullOmission | None:
        """Where a call may hold a null meaning "not given" (see :mod:`_nulls`); None if nowhere."""
        return null_omission(self.signature.schema if self.signature is not None else self.input_schema)

    @overload
    async def invoke(self, input: Any = None, ctx: ToolContext | None = None) -> Any: ...

    @overload
    async def invoke(self, input: ToolContext, ctx: Any) -> Any: ...  # AGNT5's order

    async def invoke(self, input: Any = None, ctx: Any = None) -> Any:
        """Run the tool here and now, outside any bridge: validation, hooks and all.

        For tests and for code that wants a tool's answer directly. Nothing is journaled
        and nothing is retried: ``toolbridge call`` and ``bridge.call_tool`` are the durable
        paths. AGNT5's order, ``invoke(ctx, input)``, is accepted too.

        Args:
            input: The arguments as the model or the sandbox would send them: a dict of
                named arguments (a list of positional ones for a plain function).
            ctx: The :class:`ToolContext` the handler gets; by default a test context
                (``toolbridge.testing.tool_context()``), whose ``ctx.step`` runs steps
                inline and whose ``ctx.state`` starts empty.

        Returns:
            The result as JSON data, validated against ``output``.

        Raises:
            ToolError: ``ValidationError`` for arguments that do not validate, the error
                a hook or the handler raised (another exception becomes ``InternalError``,
                chained), ``ApprovalRequired`` for a tool that needs a person's approval.
        """
        from toolbridge._tools.direct import invoke_directly  # (it needs this module)

        if isinstance(input, ToolContext) and not isinstance(ctx, ToolContext):
            input, ctx = ctx, input
        return await invoke_directly(self, input, ctx)

    def run_handler(self, call: BoundCall, context: ToolContext | None) -> Awaitable[Any]:
        """One run of the handler, to await. Sync handlers run in a worker thread.

        An async handler's own coroutine, with nothing around it (awaiting it is the call).
        ``context`` may be None for a handler that takes none (a plain callable, or a
        ``run=`` of one parameter): the lean call path builds none for it.
        """
        args = call.args
        if self.kind != "function" and self.handler_takes_context:
            args = [*args, context]
        if self._handler_is_async:
            return self.handler(*args, **call.kwargs)  # type: ignore[no-any-return]
        return call_maybe_async(self.handler, *args, **call.kwargs)

    @functools.cached_property
    def _handler_is_async(self) -> bool:
        # Asked once per tool, not twice per call (inspect's checks are not free on the hot path).
        return is_async_callable(self.handler)

    def result_to_jsonable(self, value: Any) -> Any:
        """Validate a result against ``output`` and return it as plain JSON data.

        Raises:
            SchemaValidationError: when the result does not match ``output``.
        """
        if self.output_schema is None:
            return value
        validated = self.output_schema.validate_python(value, strict=False)
        return self.output_schema.to_jsonable(validated)
