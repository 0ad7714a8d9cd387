"""AgentKit's createTool, option by option, in toolbridge's form (each part runs)."""

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from toolbridge import Bridge, ToolContext, tool

# --8<-- [start:create]
WRITE_FILE_INPUT = {  # AgentKit's `parameters`: a JSON Schema dict, or a pydantic model
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "The path to write the file to"},
        "contents": {"type": "string", "description": "The contents to write to the file"},
    },
    "required": ["path", "contents"],
}


def write(args: Any, ctx: ToolContext) -> dict[str, bool]:
    # args: the validated parameters (a dict for a JSON Schema input, a model for a pydantic one)
    # ctx: run_id, step_key, attempt, idempotency_key, and the run's state
    Path(args["path"]).write_text(args["contents"])
    ctx.network.state["fileWritten"] = True  # AgentKit's network.state; ctx.state is the same
    return {"success": True}


write_file = tool.step(
    name="write-file",
    description="Write a file to disk with the given contents",
    input=WRITE_FILE_INPUT,
    run=write,
    strict=True,  # the default, as in AgentKit
    lifecycle={
        "on_start": lambda given: {
            **given["parameters"],
            "contents": given["parameters"]["contents"].strip(),
        },
        "on_finish": lambda given: {**given["result"], "checked": True},
    },
)
# --8<-- [end:create]


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        target = str(Path(folder) / "note.txt")
        # --8<-- [start:call]
        async with Bridge(journal="toolbridge.db") as bridge, bridge.run("agentkit-1") as step:
            done = await step.sandbox.python(
                "write",
                f'return await tools["write-file"](path="{target}", contents="  hello  ")',
                tools=[write_file],
            )
            assert step.state["fileWritten"] is True  # the host reads the run's state too
        # --8<-- [end:call]
        assert done == {"success": True, "checked": True}, done
        assert Path(target).read_text() == "hello"


asyncio.run(main())
