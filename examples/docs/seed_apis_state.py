"""Per-run state, AgentKit's lifecycle and hyphenated names: createTool's write-file, in Python."""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from toolbridge import Bridge, ToolContext, ToolError, tool

DISK = Path(tempfile.mkdtemp())

# --8<-- [start:tool]
WRITE_FILE_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The path to write the file to"},
        "contents": {"type": "string", "description": "The contents to write to the file"},
    },
    "required": ["path", "contents"],
}


async def write_file_handler(args: dict[str, str], ctx: ToolContext) -> dict[str, bool]:
    target = DISK / args["path"]
    if not target.parent.is_dir():
        raise ToolError(f"no folder {target.parent.name!r}", type="NotFound")
    target.write_text(args["contents"])
    ctx.network.state["fileWritten"] = True  # or ctx.state["fileWritten"]
    return {"success": True}


def on_start(event: dict[str, Any]) -> Any:
    # Validate or modify parameters before execution; raising refuses the call.
    if ".." in event["parameters"]["path"]:
        raise ToolError("paths may not leave the folder", type="Refused")
    return event["parameters"]


def on_finish(event: dict[str, Any]) -> dict[str, Any]:
    return {**event["result"], "checked": True}  # modify or enhance the result


def on_error(event: dict[str, Any]) -> ToolError:
    error = event["error"]  # cleanup here; return (or raise) another error to rewrite it
    return ToolError(f"write-file failed: {error.message}", type=error.type)


write_file = tool.step(
    name="write-file",
    description="Write a file to disk with the given contents",
    input=WRITE_FILE_PARAMETERS,
    run=write_file_handler,
    lifecycle={"on_start": on_start, "on_finish": on_finish, "on_error": on_error},
)
# --8<-- [end:tool]

# --8<-- [start:run]
SNIPPET = """
written = await tools["write-file"](path="notes.txt", contents="hello")
try:
    await tools["write-file"](path="../escape.txt", contents="no")
except ToolError as error:
    refused = error.type
try:
    await tools["write-file"](path="no/such/folder.txt", contents="x")
except ToolError as error:
    failed = error.message.split(":")[0]
return [written, refused, failed]
"""


async def main(journal: Path) -> None:
    async with Bridge(journal=journal) as bridge:
        for attempt in ("first run", "replay"):
            async with bridge.run("write-notes") as step:
                result = await step.sandbox.python("write", SNIPPET, tools=[write_file])
                print(attempt, result, dict(step.state))
                assert result == [{"success": True, "checked": True}, "Refused", "write-file failed"]
                assert step.state == {"fileWritten": True}  # restored on replay too


# --8<-- [end:run]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as work:
        asyncio.run(main(Path(work) / "journal.db"))
    assert (DISK / "notes.txt").read_text() == "hello"
