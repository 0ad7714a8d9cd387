from __future__ import annotations

import pytest

from toolbridge import ToolOptions


def test_defaults_are_the_documented_limits() -> None:
    options = ToolOptions()
    assert (options.tool_timeout, options.max_calls, options.wait_window) == (30.0, 100, 20.0)
    assert (options.max_request_bytes, options.max_reply_bytes) == (256 * 1024, 1024 * 1024)
    assert options.attempts == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"tool_timeout": 0},
        {"wait_window": -1},
        {"max_calls": 0},
        {"attempts": 0},
        {"max_calls": 1.5},
        {"max_request_bytes": 0},
        {"retry_backoff": -1},
    ],
)
def test_invalid_options_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="ToolOptions"):
        ToolOptions(**bad)  # type: ignore[arg-type]


def test_backoff_grows_and_is_capped() -> None:
    options = ToolOptions(retry_backoff=1.0, retry_backoff_max=5.0)
    for retry, ceiling in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (10, 5.0)):
        delays = [options.backoff(retry) for _ in range(50)]
        assert all(0 <= delay <= ceiling for delay in delays)
        assert max(delays) > ceiling / 4  # jittered over the range, not stuck at zero


def test_options_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        ToolOptions(10)  # type: ignore[call-arg]
    options = ToolOptions()
    with pytest.raises(AttributeError):
        options.max_calls = 5  # type: ignore[misc]
