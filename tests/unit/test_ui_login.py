"""The web view's login, piece by piece: the one-time token, the session cookie, the form
token; and the MCP hint that names the view without its login token."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.datastructures import Headers

from toolbridge import Bridge
from toolbridge._journal.approvals import ApprovalRequest
from toolbridge._mcp.approvals import UI_URL_ENV, how_to_decide
from toolbridge._ui.login import Login


def test_the_login_token_opens_one_session_once() -> None:
    login = Login()
    assert login.spend("x" * len(login.token)) is None
    assert login.spend("") is None
    session = login.spend(login.token)
    assert session is not None
    assert login.spend(login.token) is None  # spent


def test_a_session_is_found_by_its_own_cookie_only() -> None:
    login, other = Login(), Login()
    session = login.spend(login.token)
    assert session is not None
    cookie = f"{login.cookie_name}={session}"
    assert login.session_of(Headers({"cookie": cookie})) == session
    assert login.session_of(Headers({"cookie": f"a=b; {cookie}; c=d"})) == session
    assert login.session_of(Headers({"cookie": f"{login.cookie_name}={session}x"})) is None
    assert login.session_of(Headers({"cookie": f"{other.cookie_name}={session}"})) is None
    assert other.session_of(Headers({"cookie": cookie})) is None  # another server's session
    assert login.session_of(Headers({"cookie": '"unbalanced'})) is None
    assert login.session_of(Headers({})) is None


def test_each_session_has_its_own_form_token() -> None:
    login = Login()
    first = login.spend(login.token)
    assert first is not None
    assert login.form_token(first) == login.form_token(first)
    assert login.form_token(first) != login.form_token("another")
    assert login.form_token(first) != Login().form_token(first)  # a key of its own per server


def test_the_mcp_hint_names_the_view_but_never_its_login_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(UI_URL_ENV, "http://127.0.0.1:8766/?token=s3cret-login#frag")
    req = ApprovalRequest(
        id="apr_1",
        run_id="order-42",
        step_key="refund#0",
        args_hash="h",
        kind="approval",
        tool="refund",
        arguments={},
        summary="refund(amount=5)",
        state="pending",
        created_at=0.0,
        expires_at=1.0,
    )
    hint = how_to_decide(req, Bridge(journal=tmp_path / "j.db"))
    assert "s3cret-login" not in hint
    assert hint.endswith(", or http://127.0.0.1:8766/runs/order-42")
