"""The journal is private: created 0600 with its -wal and -shm, and never seen by a bwrap sandbox.

The attack: the journal lies inside the command's working folder (``cwd=`` names the
journal's own folder), and another run's secret is in it. Sandboxed code walks everything it
can see and reads every byte it can, looking for that secret.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

from tests.security.conftest import TEST_LIMITS
from toolbridge import Bridge
from toolbridge._sandbox.bwrap.launcher import BwrapLauncher

SEARCH = """
import json, os, sys
marker = sys.argv[1].encode()
found, read, refused = [], [], []
for root, dirs, files in os.walk(sys.argv[2]):
    for name in files:
        path = os.path.join(root, name)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            refused.append(name)
            continue
        read.append(name)
        if marker in data:
            found.append(name)
print(json.dumps({"found": found, "read": read, "refused": refused}))
"""


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_journal_its_wal_shm_and_key_are_created_0600(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    async with Bridge(journal=journal) as bridge, bridge.run("r") as step:
        await step.run("one", len, "abc")
        files = {p.name: mode(p) for p in tmp_path.iterdir()}
    assert files == {
        "journal.db": 0o600,
        "journal.db-wal": 0o600,
        "journal.db-shm": 0o600,
        "journal.db.key": 0o600,
    }


async def test_a_journal_readable_by_others_is_made_private_when_opened(tmp_path: Path) -> None:
    journal = tmp_path / "journal.db"
    async with Bridge(journal=journal):
        pass
    journal.chmod(0o644)
    async with Bridge(journal=journal):
        assert mode(journal) == 0o600


async def search_from_sandbox(journal_dir: Path, *, loosen: bool) -> dict[str, list[str]]:
    marker = "card-" + secrets.token_hex(8)
    journal = journal_dir / "journal.db"
    (journal_dir / "search.py").write_text(SEARCH)
    (journal_dir / "search.py").chmod(0o644)
    async with Bridge(journal=journal, sandbox=BwrapLauncher(limits=TEST_LIMITS)) as bridge:
        async with bridge.run("another-customer") as step:
            await step.run("card", lambda: marker)  # the secret, recorded in the journal
        if loosen:  # as an operator's umask or copy might: then the mount plan alone hides it
            for path in journal_dir.iterdir():
                if path.is_file():
                    path.chmod(0o644)
        async with bridge.run("attacker") as step:
            result = await step.sandbox.commands.run(
                "search",
                ["python3", "search.py", marker, str(journal_dir)],
                cwd=journal_dir,  # cwd= names the journal's folder
            )
    assert result.exit_code == 0, result.stderr
    seen: dict[str, list[str]] = json.loads(result.stdout)
    return seen


async def test_a_bwrap_sandbox_whose_cwd_holds_the_journal_cannot_read_it(
    work_dir: Path,
) -> None:
    journal_dir = work_dir / "state"
    journal_dir.mkdir(mode=0o755)
    journal_dir.chmod(0o755)
    (journal_dir / "notes.txt").write_text("the command's own file")
    os.chmod(journal_dir / "notes.txt", 0o644)
    seen = await search_from_sandbox(journal_dir, loosen=False)
    assert seen["found"] == []
    assert "notes.txt" in seen["read"]  # the probe does read what the folder rightly shows


async def test_the_mount_plan_hides_the_journal_even_when_its_mode_lets_everyone_read(
    work_dir: Path,
) -> None:
    journal_dir = work_dir / "state"
    journal_dir.mkdir(mode=0o755)
    journal_dir.chmod(0o755)
    seen = await search_from_sandbox(journal_dir, loosen=True)
    assert seen["found"] == [], seen
    # Each of the daemon's files is covered by /dev/null, on a mount without devices: it
    # cannot even be opened, whatever the mode of the file beneath.
    assert set(seen["refused"]) == {"journal.db", "journal.db-wal", "journal.db-shm", "journal.db.key"}
