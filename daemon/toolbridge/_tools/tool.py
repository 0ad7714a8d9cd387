"""Tool declarations: frozen definitions, built and checked when a tool is declared.

Three ways to make a tool:

- a plain callable, sync or async: the sandbox calls it with positional arguments, checked
  against its signature;
- ``tool.step(...)``: named arguments validated against ``input``, a result validated against
  ``output``, ``run(args, ctx)`` with a stable ``ctx.idempotency_key``;
- ``tool.group(...)``: like ``tool.step``, and its body may run durable steps through
  ``ctx.step``.

(and ``tool.shim(...)``, a program on the command's PATH). The definition they build is
:class:`Tool` (:mod:`toolbridge._tools.definition`); a call's arguments are bound against it
by :mod:`toolbridge._tools.binding`. Both are re-exported here, where the package imports them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolbridge._schema.schema import schema_from
from toolbridge._schema.signature import describe
from toolbridge._tools.annotations import check_annotations
from toolbridge._tools.binding import BoundCall
from toolbridge._tools.definition import Confirmation, HumanPrompt, Tool, ToolKind, check_tool_name
from toolbridge._tools.invoke import Hook, call_hook, call_maybe_async, takes_context
from toolbridge._tools.lifecycle import ErrorHook, Hooks, lifecycle_hooks

if TYPE_CHECKING:
    from toolbridge._tools.shim import ShimCall

__all__ = [
    "BoundCall",
    "HumanPrompt",
    "Tool",
    "call_hook",
    "call_maybe_async",
    "check_tool_name",
    "tool",
]


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
