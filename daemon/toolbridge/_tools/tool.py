"""Tool declarations: frozen definitions, built and checked when a tool is declared.

Three ways to make a tool:

- a plain callable, sync or async: the sandbox calls it with positional arguments, checked
  against its signature;
- ``tool.step(...)``: named arguments validated against ``input``, a result validated against
  ``output``, ``run(args, ctx)`` with a stable ``ctx.idempotency_key``;
- ``tool.group(...)``: like ``tool.step``, and its body may run durable steps through
  ``ctx.step``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

from toolbridge._json import canonical
from toolbridge._schema.nulls import NullOmission
from toolbridge._schema.schema import Schema, SchemaValidationError, schema_from
from toolbridge._schema.signature import FunctionSignature, describe
from toolbridge._tools.annotations import check_annotations
from toolbridge._tools.context import ToolContext
from toolbridge._tools.invoke import Hook, call_hook, call_maybe_async, is_async_callable, takes_context
from toolbridge._tools.lifecycle import ErrorHook, Hooks, lifecycle_hooks

if TYPE_CHECKING:
    from toolbridge._tools.shim import ShimCall, ShimSpec

__all__ = [
    "BoundCall",
    "HumanPrompt",
    "Tool",
    "call_hook",
    "call_maybe_async",
    "check_tool_name",
    "tool",
]

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
class BoundCall:
    """Validated arguments, ready for the tool's handler."""

    args: list[Any]
    kwargs: dict[str, Any]
    make_input: Callable[[], Any] = field(repr=False)

    @functools.cached_property
    def input(self) -> Any:
        """The arguments as plain JSON data, for hooks; built only when one asks."""
        return self.make_input()


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
        if self.kind == "function":
            if self.signature is None:
                return BoundCall(positional, named, lambda: {"args": positional, "kwargs": named})
            given = {"args": positional, "kwargs": named} if named else positional
            if named and self._nulls is not None:
                named = self._nulls.apply(named)
            args, kwargs = self.signature.bind(positional, named)
            return BoundCall(args, kwargs, lambda: given)
        if positional and named:
            raise SchemaValidationError([("", "pass named arguments or one object, not both")])
        if len(positional) > 1:
            raise SchemaValidationError(
                [
                    (
                        "",
                        "this tool takes named arguments (or one object), "
                        f"got {len(positional)} positional arguments",
                    )
                ]
            )
        raw: Any = positional[0] if positional else named
        if self.input_schema is None:
            return BoundCall([raw], {}, lambda: raw)
        given = raw
        if self._nulls is not None and (not named_json or b"null" in named_json):
            given = self._nulls.apply(raw)
        # Validated from the bytes received when they are the whole input, as they usually are.
        text = named_json if named and named_json and given is raw else canonical(given)
        schema = self.input_schema
        value = schema.validate_json(text, strict=self.strict)
        return BoundCall([value], {}, lambda: schema.to_jsonable(value))

    def rebind(self, changed_input: Any) -> BoundCall:
        """Validate an input rewritten by ``on_start``."""
        if self.kind == "function":
            args = changed_input if isinstance(changed_input, list) else [changed_input]
            return self.bind(list(args), {}, b"")
        schema = self.input_schema
        if schema is None:
            return BoundCall([changed_input], {}, lambda: changed_input)
        value = schema.validate_python(changed_input, strict=False)
        return BoundCall([value], {}, lambda: schema.to_jsonable(value))

    @functools.cached_property
    def input_may_hold_secrets(self) -> bool:
        """Whether the input schema marks anything secret (asked once per tool, not per call)."""
        schema = self.signature.schema if self.signature is not None else self.input_schema
        return schema is not None and _marks_secrets(schema.json_schema)

    @functools.cached_property
    def output_may_hold_secrets(self) -> bool:
        """Whether the output schema marks anything secret."""
        return self.output_schema is not None and _marks_secrets(self.output_schema.json_schema)

    @functools.cached_property
    def _nulls(self) -> NullOmission | None:
        """Where a call may hold a null meaning "not given" (see :mod:`_nulls`); None if nowhere."""
        schema = self.signature.schema if self.signature is not None else self.input_schema
        if schema is None:
            return None
        omission = NullOmission(schema.json_schema)
        return omission if omission.needed else None

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


class _ToolFactory:
    """``tool.step(...)`` and ``tool.group(...)``: declare tools with validated arguments."""

    def step(
        self,
        *,
        run: Callable[..., Any] | Callable[..., Awaitable[Any]],
        description: str = "",
        input: Any = None,
        output: Any = None,
        strict: bool = True,
        at_most_once: bool = False,
        attempts: int | None = None,
        on_start: Hook | None = None,
        on_finish: Hook | None = None,
        requires_confirmation: bool | Confirmation = False,
        name: str | None = None,
        on_error: ErrorHook | None = None,
        lifecycle: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> Tool:
        """Declare a tool whose named arguments are validated before it runs.

        Args:
            run: ``run(args, ctx)`` (or ``run(args)``), sync or async. ``args`` is the
                validated input (a model instance for a pydantic model); ``ctx`` is a
                :class:`ToolContext`.
            description: What the tool does, for the model that decides to call it.
            input: A pydantic model (or type) or a JSON Schema dict for the arguments.
                Without one, the tool takes any object.
            output: A pydantic model (or type) or a JSON Schema dict the result must match.
            strict: Pydantic strict mode, and no fields beyond those the schema declares,
                at any depth (the default). ``False`` allows lax coercion (``"2"`` for
                ``2``) and passes extra fields through to ``run``. Either way a call that
                does not validate gets a ``ValidationError`` naming each field, and ``run``
                does not run.
            at_most_once: Never run the tool twice for one call: a call interrupted by a
                crash fails with ``StepInterrupted`` on replay instead of running again.
            attempts: Tries in all before a failure is final; defaults to
                ``ToolOptions.attempts``.
            on_start: ``on_start(input)``, sync or async, gets the validated input as JSON
                data before ``run``: it may return a changed input (validated again), return
                ``None`` to keep it, or raise to refuse the call (a ``ToolError`` reaches the
                sandbox as raised; any other exception as a generic ``Refused`` error).
            on_finish: ``on_finish(result)``, sync or async, gets what ``run`` returned and
                may return a changed result (which must still match ``output``), or raise
                to fail the call. Both hooks are journaled with the call's step.
            requires_confirmation: ``True``: every call waits for a person's approval
                before it runs (``bridge.approvals``, ``toolbridge approvals``). Or
                ``requires_confirmation(args, ctx) -> bool``, sync or async, deciding per
                call on the validated input (after ``on_start``); its verdict is journaled,
                so a replay never asks it again, and if it raises the call needs approval.
                A rejected call fails with ``ApprovalRejected``, an expired one with
                ``ApprovalExpired``; neither is retried.
            name: The tool's own name, so that ``tools=`` may be a list of named tools.
            on_error: ``on_error(error)``, sync or async, sees the ``ToolError`` of a call
                that failed after it started (the handler, ``on_finish`` or the output
                check): for cleanup, or to rewrite the error by returning (or raising)
                another ``ToolError``; ``None`` keeps it. Journaled with the call's step.
            lifecycle: AgentKit's shape of the same hooks: ``{"on_start": f, "on_finish":
                g, "on_error": h}`` (``onStart`` ... accepted too), where ``f({"parameters":
                input})`` returns the parameters, ``g({"result": result})`` the result and
                ``h({"error": error})`` a replacement error (``None`` keeps the value).
                A hook is given either here or as a keyword, not both.
            annotations: MCP tool annotations (``readOnlyHint``, ``destructiveHint``,
                ``idempotentHint``, ``openWorldHint``, ``title``), shown to MCP clients.
                A tool that requires confirmation is marked ``destructiveHint`` unless it
                says otherwise.

        Raises:
            TypeError: when ``run``, ``input``, ``output`` or ``requires_confirmation``
                cannot be used.
            ValueError: when ``attempts`` is below 1 or ``name`` is not a valid tool name.
        """
        return self._declare(
            name,
            "step",
            run,
            description,
            input,
            output,
            strict,
            at_most_once,
            attempts,
            requires_confirmation,
            lifecycle_hooks(lifecycle, on_start=on_start, on_finish=on_finish, on_error=on_error),
            annotations,
        )

    def group(
        self,
        *,
        run: Callable[..., Any],
        description: str = "",
        input: Any = None,
        output: Any = None,
        strict: bool = True,
        attempts: int | None = None,
        on_start: Hook | None = None,
        on_finish: Hook | None = None,
        requires_confirmation: bool | Confirmation = False,
        name: str | None = None,
        on_error: ErrorHook | None = None,
        lifecycle: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> Tool:
        """Declare a tool whose body runs durable steps through ``ctx.step``.

        Takes the same options as :meth:`step`. Each step the body runs (``ctx.step.run``,
        ``ctx.step.sleep``, ``ctx.step.invoke``, ``ctx.step.send_event``,
        ``ctx.step.wait_for_event``) is journaled under the tool call, so a retried or
        replayed call skips the steps that already completed.
        """
        return self._declare(
            name,
            "group",
            run,
            description,
            input,
            output,
            strict,
            False,
            attempts,
            requires_confirmation,
            lifecycle_hooks(lifecycle, on_start=on_start, on_finish=on_finish, on_error=on_error),
            annotations,
        )

    def shim(
        self,
        name: str,
        handler: Callable[[ShimCall], Any],
        *,
        env: Sequence[str] = (),
        description: str = "",
        requires_confirmation: bool | Confirmation = False,
        attempts: int = 1,
        timeout: float | None = None,
    ) -> Tool:
        """Declare a program ``name`` on the command's PATH whose every run asks ``handler``.

        Given in ``tools=`` like any tool (``tools={"gh": tool.shim("gh", handler)}``), under
        both launchers, for commands and snippets. Each run of the program in the sandbox is
        a step: journaled (argv, working folder, declared variables, exit code, sizes and
        digests of stdin and of the output; never the environment a ``run`` is given),
        replayed on a re-run, counted against ``max_calls``.

        Args:
            name: The program's name in the sandbox (letters, digits and ``. _ + -``).
            handler: ``handler(call)``, sync or async, given a :class:`ShimCall`; returns
                ``call.reply(...)``, ``call.run(...)`` or ``call.refuse(...)``.
            env: Names of the sandbox's variables the program sends with each run (nothing
                else of the sandbox's environment leaves it).
            description: What the program is for (shown in the trace).
            requires_confirmation: As for ``tool.step``: a person approves each run (or the
                runs a function picks, from ``{"argv", "cwd", "env", "stdin"}``) before it runs.
            attempts: Tries in all when the handler raises. A program's side effects are not
                known to be idempotent, so a run is tried once, and one interrupted by a
                crash is not run again on replay (it fails with ``StepInterrupted``), unless
                this is above 1.
            timeout: Seconds one run may take (``ToolOptions.tool_timeout`` by default).

        Raises:
            ValueError: for a bad program name, variable name, ``attempts`` or ``timeout``.
            TypeError: when ``handler`` is not callable.
        """
        from toolbridge._tools.shim import ShimSpec, check_program_name, make_shim

        check_program_name(name)
        if not callable(handler):
            raise TypeError(f"handler must be a function taking a ShimCall, got {handler!r}")
        names = (env,) if isinstance(env, str) else tuple(env)
        for variable in names:
            if not isinstance(variable, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
                raise ValueError(f"env= names variables; {variable!r} is not a variable name")
        if not isinstance(attempts, int) or attempts < 1:
            raise ValueError("attempts= must be a whole number of at least 1")
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout= must be a positive number of seconds")
        declared = self._declare(
            None,
            "step",
            make_shim(name, handler, names),
            description or f"the program {name}",
            _SHIM_INPUT,
            None,
            True,
            attempts == 1,
            attempts,
            requires_confirmation,
            Hooks(on_start=None, on_finish=None, on_error=None),
            None,
        )
        return dataclasses.replace(declared, shim=ShimSpec(name, names), timeout=timeout)

    @staticmethod
    def _declare(
        name: str | None,
        kind: ToolKind,
        run: Callable[..., Any],
        description: str,
        input_declared: Any,
        output_declared: Any,
        strict: bool,
        at_most_once: bool,
        attempts: int | None,
        requires_confirmation: bool | Confirmation,
        hooks: Hooks,
        annotations: Mapping[str, Any] | None,
    ) -> Tool:
        if name is not None:
            check_tool_name(name)
        if not isinstance(requires_confirmation, bool) and not callable(requires_confirmation):
            raise TypeError(
                f"requires_confirmation= must be True, False or a function, got {requires_confirmation!r}"
            )
        if not callable(run):
            raise TypeError(f"run= must be a function, got {run!r}")
        if attempts is not None and (not isinstance(attempts, int) or attempts < 1):
            raise ValueError("attempts= must be a whole number of at least 1")
        return Tool(
            kind=kind,
            handler=run,
            description=description or describe(run)[0],
            input_schema=schema_from(input_declared),
            output_schema=schema_from(output_declared),
            strict=strict,
            at_most_once=at_most_once,
            attempts=attempts,
            on_start=hooks.on_start,
            on_finish=hooks.on_finish,
            on_error=hooks.on_error,
            requires_confirmation=requires_confirmation,
            name=name,
            handler_takes_context=takes_context(run),
            annotations=check_annotations(annotations),
        )


_SHIM_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "argv": {"type": "array", "items": {"type": "string"}},
        "cwd": {"type": "string"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "stdin": {
            "type": "object",
            "properties": {"size": {"type": "integer"}, "sha256": {"type": "string"}},
            "required": ["size", "sha256"],
        },
    },
    "required": ["argv", "cwd", "env", "stdin"],
}
"""A shim run's step input, as the door sends it (stdin travels beside it)."""

tool = _ToolFactory()
"""Declare tools: ``tool.step(...)`` and ``tool.group(...)``."""


def _marks_secrets(schema: dict[str, Any]) -> bool:
    """A quick look for ``writeOnly: true`` or ``format: "password"`` anywhere in a schema."""
    text = json.dumps(schema)
    return '"writeOnly": true' in text or '"format": "password"' in text
