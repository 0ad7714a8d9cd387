"""The error boundary: one journal shape for every unexpected exception, detail kept apart."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolbridge
from toolbridge._durable.boundary import Kind, catch, new_error_id


def crash() -> None:
    raise KeyError("password=hunter2")


def raised() -> Exception:
    try:
        crash()
    except KeyError as exc:
        return exc
    raise AssertionError("crash() returned")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "InternalError",
            "the tool 'lookup' failed unexpectedly; the host's journal has the detail under err_",
        ),
        ("Refused", "the call was refused (error id err_"),
        ("OutputValidationError", "tool 'lookup' returned a result that does not match its output schema"),
    ],
)
def test_every_kind_has_one_entry_shape_and_a_message_without_the_detail(kind: Kind, message: str) -> None:
    caught = catch(raised(), what="tool 'lookup'", kind=kind)
    error = caught.error
    assert (error.type, error.retryable) == (kind, False)
    assert error.message.startswith(message)
    assert error.error_id in error.message
    assert "hunter2" not in error.message
    assert set(caught.entry) == {"type", "message", "retryable", "error_id", "exception", "traceback"}
    assert {key: caught.entry[key] for key in ("type", "message", "retryable", "error_id")} == error.to_dict()
    assert caught.entry["exception"] == "KeyError: 'password=hunter2'"
    assert "in crash" in caught.entry["traceback"]


def test_retryable_is_data_on_the_error() -> None:
    caught = catch(raised(), what="step 'charge'", retryable=True)
    assert caught.error.retryable is True
    assert caught.entry["retryable"] is True


def test_error_ids_are_fresh() -> None:
    ids = {new_error_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(error_id.startswith("err_") and len(error_id) == 20 for error_id in ids)


def test_no_other_module_makes_error_ids_or_keeps_tracebacks() -> None:
    # The boundary is the one place: an error id or a traceback built elsewhere would be a
    # second journal shape (there were four places with three shapes). The fake launcher's
    # stderr holds a traceback as a dying process's would: that is output, not a journal entry.
    package = Path(toolbridge.__file__).parent
    offenders = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name != "boundary.py"
        and "_proto" not in path.parts
        and path.relative_to(package).as_posix() != "testing/_launcher.py"
        and ('"err_' in (text := path.read_text()) or "format_exception" in text)
    ]
    assert offenders == []
