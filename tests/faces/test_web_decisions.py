"""The web view's decision API as the page uses it, on a bridge serving its own view: an
``ask_user`` question answered and a call rejected, each reaching the real sandbox; the
refusals say what to send instead and decide nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from tests.e2e.test_approvals import output, pending, refund_tool, start
from tests.faces.conftest import WAIT, log_in, open_url
from tests.faces.test_web_login import form_token
from tests.faces.test_web_login import post as _post
from toolbridge import Bridge, CommandResult, ask_user

ASK = """
import asyncio, json
from inngest_tools import tools

async def main():
    print(json.dumps({"answer": await tools.ask_user(question="Which account?")}))

asyncio.run(main())
"""


async def test_a_question_is_answered_and_a_call_rejected_from_the_web(
    bridge: Bridge, script: Callable[[str, str], Path]
) -> None:
    path = script("ask.py", ASK)

    async def ask() -> CommandResult:
        async with bridge.run("ask") as step:
            return await step.sandbox.commands.run(
                "ask", ["python3", str(path)], tools=[ask_user()], cwd=path.parent
            )

    asking = asyncio.create_task(ask())
    async with bridge.serve_ui(port=0) as login_url:
        url, cookie = await asyncio.to_thread(log_in, login_url)
        token = {
            "cookie": cookie,
            "origin": url.rstrip("/"),
            "x-toolbridge-token": await asyncio.to_thread(form_token, url, cookie),
        }
        (question,) = await pending(bridge)
        where = f"{url}api/approvals/{question.id}"
        status, said = await asyncio.to_thread(_post, where, {"action": "approve", "by": "erin"}, token)
        assert (status, "asks a question: answer it instead" in said["error"]) == (409, True)
        status, said = await asyncio.to_thread(_post, where, {"action": "answer", "by": "erin"}, token)
        assert (status, said["error"]) == (400, "an answer is needed")
        status, said = await asyncio.to_thread(_post, where, {"action": "shrug", "by": "erin"}, token)
        assert (status, said["error"]) == (400, "action must be approve, reject or answer")
        status, said = await asyncio.to_thread(
            _post, f"{url}api/approvals/apr_nope", {"action": "approve", "by": "erin"}, token
        )
        assert status == 404
        assert (await bridge.approvals.get(question.id)).state == "pending"
        status, said = await asyncio.to_thread(
            _post, where, {"action": "answer", "by": "erin", "answer": "savings"}, token
        )
        assert status == 200, said
        assert (said["state"], said["decided_by"], said["channel"], said["answer"]) == (
            "approved",
            "erin",
            "web",
            "savings",
        )
        assert output(await asyncio.wait_for(asking, WAIT)) == {"answer": "savings"}

        ran: list[int] = []
        refunding = start(
            bridge, script, {"refund": refund_tool(ran, requires_confirmation=True)}, [("big", 900)]
        )
        (req,) = await pending(bridge)
        where = f"{url}api/approvals/{req.id}"
        status, said = await asyncio.to_thread(_post, where, {"action": "reject", "by": "erin"}, token)
        assert (status, said["error"]) == (400, "say why it is rejected: the reason is shown to the sandbox")
        status, said = await asyncio.to_thread(
            _post, where, {"action": "reject", "by": "erin", "reason": "not this customer"}, token
        )
        assert status == 200, said
        result = output(await asyncio.wait_for(refunding, WAIT))
        assert result["big"]["type"] == "ApprovalRejected"
        assert "not this customer" in result["big"]["message"]
        assert ran == []
        status, said = await asyncio.to_thread(_post, where, {"action": "approve", "by": "erin"}, token)
        assert status == 409
        assert "already decided: rejected by erin via web" in said["error"]
        listing = f"{url}api/approvals"
        status, _, listed = await asyncio.to_thread(open_url, listing, headers={"cookie": cookie})
        assert (status, json.loads(listed)) == (200, [])
