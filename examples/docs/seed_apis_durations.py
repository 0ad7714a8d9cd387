"""Every time option takes seconds or a duration string: "250ms", "10s", "5m", "1h30m"."""

# --8<-- [start:durations]
from toolbridge import ToolOptions

options = ToolOptions(tool_timeout="10s", max_calls=50, wait_window="20s", approval_hold="5m")
assert (options.tool_timeout, options.wait_window, options.approval_hold) == (10.0, 20.0, 300.0)
assert ToolOptions(approval_timeout="1h30m").approval_timeout == 5400.0
assert ToolOptions(tool_timeout=2.5).tool_timeout == 2.5  # seconds as a number, as before

try:
    ToolOptions(tool_timeout="10 seconds")
except ValueError as error:
    print(error)  # names the option and the forms allowed
    assert str(error).startswith("ToolOptions.tool_timeout='10 seconds' is not a duration")
# --8<-- [end:durations]
