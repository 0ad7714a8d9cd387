"""`toolbridge token list --journal PATH` (and revoke) need no MODULE:ATTR: tokens live in the journal."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_sidecar_cli import toolbridge
from toolbridge import Bridge


async def test_token_list_and_revoke_with_only_the_journal(journal_path: Path, tmp_path: Path) -> None:
    async with Bridge(journal=journal_path, tools={"lookup": lambda sku: sku}) as bridge:
        minted = await bridge.mint_token(run_id="vm-1", tools=["lookup"], ttl="1h")
    elsewhere = tmp_path / "elsewhere"  # no module of the app to import here
    elsewhere.mkdir()
    status, listed, said = await toolbridge(
        elsewhere, "token", "list", "--journal", str(journal_path), "--json"
    )
    assert status == 0, said
    (entry,) = json.loads(listed)
    assert (entry["id"], entry["run_id"], entry["active"]) == (minted.id, "vm-1", True)
    status, _, said = await toolbridge(
        elsewhere, "token", "revoke", "--journal", str(journal_path), minted.id
    )
    assert (status, said.strip()) == (0, f"toolbridge: revoked token {minted.id}")
    status, listed, _ = await toolbridge(elsewhere, "token", "list", "--journal", str(journal_path), "--json")
    assert json.loads(listed)[0]["active"] is False


async def test_token_list_with_neither_journal_nor_bridge_says_what_to_give(tmp_path: Path) -> None:
    status, _, said = await toolbridge(tmp_path, "token", "list")
    assert status == 2
    assert "name the journal with --journal PATH|URL (or the bridge, MODULE:ATTR)" in said
