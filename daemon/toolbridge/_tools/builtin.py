"""Built-in tools that ask a person: ``toolbridge.ask_user()`` and ``toolbridge.request_approval()``.

They are handed to a sandbox like any other tool. A call makes a request (see
``_calls/approvals.py``) and waits, durably, until someone answers it from host code
(``bridge.approvals``) or the command line (``toolbridge approvals``); its result is the
answer, or the decision.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolbridge._schema.schema import schema_from
from toolbridge._tools.tool import HumanPrompt, Tool, check_tool_name

__all__ = ["ask_user", "request_approval"]

_SCALARS = {"string", "integer", "number", "boolean", "null"}


class AskUserInput(BaseModel):
    """The arguments of ``ask_user``."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="What to ask the person, in a sentence.")


class RequestApprovalInput(BaseModel):
    """The arguments of ``request_approval``."""

    model_config = ConfigDict(extra="forbid")
    action: str = Field(min_length=1, description="What is about to be done, for a person to approve.")
    details: dict[str, Any] = Field(default_factory=dict, description="Facts the person needs to decide.")


class ApprovalDecision(BaseModel):
    """What ``request_approval`` returns."""

    approved: bool
    by: str
    reason: str | None = None


def _never_called(*_: Any) -> Any:  # the call path answers these tools itself
    raise AssertionError("a built-in human-in-the-loop tool has no handler")


def _check_flat(schema: dict[str, Any]) -> None:
    """An answer a person can type: a scalar, or an object whose fields are scalars."""
    kind = schema.get("type")
    if kind == "object":
        for field_name, field in (schema.get("properties") or {}).items():
            if field.get("type") not in _SCALARS and "enum" not in field:
                raise TypeError(
                    f"answer= must be flat (a scalar, or an object of scalar fields) so that a "
                    f"person can give it; field {field_name!r} is not a scalar"
                )
    elif kind not in _SCALARS and "enum" not in schema:
        raise TypeError("answer= must be flat: a scalar type, or a model whose fields are scalars")


def ask_user(
    *,
    name: str = "ask_user",
    description: str = "Ask the person you work for a question, and wait for the answer.",
    answer: Any = None,
) -> Tool:
    """A tool that asks a person a question and returns the answer.

    In the sandbox: ``answer = await tools.ask_user(question="Which account?")``. The call
    waits until someone answers (``bridge.approvals.answer(id, ...)`` or ``toolbridge
    approvals answer ID TEXT``), and returns the answer; a request the person rejects fails
    with ``ApprovalRejected``, one nobody answers in time with ``ApprovalExpired``.

    Args:
        name: The tool's name (for ``tools=[...]``).
        description: What the model is told about the tool.
        answer: The answer's shape: a pydantic model, type or JSON Schema that is flat (a
            scalar, or an object of scalar fields). An answer is validated against it when
            given; a string by default.

    Raises:
        TypeError: for an answer schema that is not flat.
    """
    schema = schema_from(str if answer is None else answer)
    assert schema is not None
    _check_flat(schema.json_schema)
    return Tool(
        kind="step",
        handler=_never_called,
        description=description,
        input_schema=schema_from(AskUserInput),
        output_schema=schema,
        attempts=1,
        name=check_tool_name(name),
        human=HumanPrompt("input", schema),
    )


def request_approval(
    *,
    name: str = "request_approval",
    description: str = (
        "Ask the person you work for to approve an action before you take it, and wait for "
        "their decision. Take the action only if approved is true."
    ),
) -> Tool:
    """A tool that asks a person to approve an action and returns their decision.

    In the sandbox: ``await tools.request_approval(action="refund order 42", details={...})``
    returns ``{"approved": true|false, "by": ..., "reason": ...}``; a rejection is a decision,
    not an error. A request nobody decides in time fails with ``ApprovalExpired``.

    Args:
        name: The tool's name (for ``tools=[...]``).
        description: What the model is told about the tool.
    """
    return Tool(
        kind="step",
        handler=_never_called,
        description=description,
        input_schema=schema_from(RequestApprovalInput),
        output_schema=schema_from(ApprovalDecision),
        attempts=1,
        name=check_tool_name(name),
        human=HumanPrompt("approval"),
    )
