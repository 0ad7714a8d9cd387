"""The error a failed tool call raises in the sandbox."""

from __future__ import annotations


class ToolError(Exception):
    """A tool call failed.

    Attributes:
        type: A short machine-readable kind: ``"ValidationError"``, ``"ToolTimeout"``,
            ``"MaxCallsExceeded"``, ``"ToolNotFound"``, the type the tool raised, ...
        message: What went wrong, in words meant for this code (or the model writing it).
        retryable: Whether calling again may succeed.
        error_id: For unexpected failures, the id the host's journal keeps the detail under.
    """

    def __init__(
        self, message: str, *, type: str = "ToolError", retryable: bool = False, error_id: str = ""
    ) -> None:
        super().__init__(message)
        self.type = type
        self.message = message
        self.retryable = retryable
        self.error_id = error_id

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"

    def __repr__(self) -> str:
        return f"ToolError(type={self.type!r}, message={self.message!r})"
