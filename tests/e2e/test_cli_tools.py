"""``toolbridge call`` and ``toolbridge definitions`` as a newcomer runs them: the installed
console script, in a fresh directory holding a module that defines a bridge.

The first test replays the documentation's example (the command-line guide includes
``examples/docs/shop_tools.py`` and its transcript ``shop_tools.console``): it copies the module
and runs the transcript, comparing what each command prints with what the page says it prints.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolbridge import DefinitionWarning, tool_definitions
from toolbridge._cli.target import load_bridge

SAMPLES = Path(__file__).parent.parent.parent / "examples" / "docs"
TOOLBRIDGE = Path(sys.executable).parent / "toolbridge"
TIMEOUT = 60

SHOP = '''
import json
from pathlib import Path

from pydantic import BaseModel

from toolbridge import Bridge, ToolError, tool


class CustomerId(BaseModel):
    id: str


def get_customer(args: CustomerId) -> dict:
    runs = Path("runs.txt")  # counts real executions, so a test can tell a replay
    runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
    if args.id == "cus_404":
        raise ToolError("no such customer", type="NotFound")
    return {"id": args.id, "name": "Acme"}


bridge = Bridge(journal="shop.db", tools={"getCustomer": tool.step(input=CustomerId, run=get_customer)})


@bridge.tool("lookup")
def lookup_by_position(customer_id: str, verbose: bool = False) -> str:
    """Look a customer up by id."""
    return customer_id.upper() if verbose else customer_id


not_a_bridge = 42
'''


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str


def toolbridge(cwd: Path, *args: str, stdin: str | None = None) -> Ran:
    done = subprocess.run(
        [str(TOOLBRIDGE), *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    (tmp_path / "shop.py").write_text(textwrap.dedent(SHOP))
    return tmp_path


def executions(shop: Path) -> int:
    runs = shop / "runs.txt"
    return len(runs.read_text()) if runs.exists() else 0


# -- the documentation, as written ---------------------------------------------------------


def documented_example() -> tuple[str, str]:
    """The module and the console transcript of the command-line guide's example."""
    return (SAMPLES / "shop_tools.py").read_text(), (SAMPLES / "shop_tools.console").read_text()


def test_the_documented_example_runs_as_shown(tmp_path: Path) -> None:
    module, transcript = documented_example()
    (tmp_path / "shop_tools.py").write_text(module)
    # Split the transcript into (command, expected output) pairs.
    steps = re.split(r"^\$ (.*)\n", transcript, flags=re.MULTILINE)[1:]
    assert len(steps) >= 8
    for command, expected in zip(steps[::2], steps[1::2], strict=True):
        argv = shlex.split(command)
        assert argv[0] == "toolbridge"
        ran = toolbridge(tmp_path, *argv[1:])
        shown = ran.stdout + ran.stderr
        if expected.endswith("...\n"):  # the page shows the start of a long output
            assert shown.startswith(expected.removesuffix("...\n")), command
        else:
            assert shown == expected, command
        assert ran.code == (1 if "failed:" in expected else 0), command


# -- toolbridge call --------------------------------------------------------------------------


def test_call_prints_the_json_result_and_records_the_call(shop: Path) -> None:
    ran = toolbridge(shop, "call", "shop:bridge", "getCustomer", "--input", '{"id": "cus_1"}')
    assert ran.code == 0, ran.stderr
    assert json.loads(ran.stdout) == {"id": "cus_1", "name": "Acme"}
    assert ran.stderr == ""
    with sqlite3.connect(shop / "shop.db") as db:
        rows = db.execute("SELECT kind, name, status, output_json FROM steps").fetchall()
    assert rows == [("tool", "getCustomer", "completed", '{"id":"cus_1","name":"Acme"}')]


def test_call_with_a_run_id_again_replays_without_running_the_tool(shop: Path) -> None:
    arguments = ("call", "shop:bridge", "getCustomer", "--input", '{"id": "cus_1"}', "--run-id", "r1")
    first = toolbridge(shop, *arguments)
    second = toolbridge(shop, *arguments)
    assert first.code == second.code == 0
    assert first.stdout == second.stdout
    assert executions(shop) == 1
    assert toolbridge(shop, *arguments[:-1], "r2").code == 0
    assert executions(shop) == 2


def test_a_tool_error_goes_to_stderr_with_exit_status_1(shop: Path) -> None:
    ran = toolbridge(
        shop, "call", "shop:bridge", "getCustomer", "--input", '{"id": "cus_404"}', "--run-id", "nf"
    )
    assert ran.code == 1
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == [
        "toolbridge: getCustomer failed: NotFound: no such customer",
        "toolbridge: the call is recorded in run nf",
    ]
    invalid = toolbridge(shop, "call", "shop:bridge", "getCustomer", "--input", '{"id": "cus_1", "x": 1}')
    assert invalid.code == 1
    assert "ValidationError: invalid arguments: /x: Extra inputs are not permitted" in invalid.stderr
    assert executions(shop) == 1  # the invalid call never ran


def test_input_may_be_positional_or_read_from_stdin(shop: Path) -> None:
    positional = toolbridge(shop, "call", "shop:bridge", "lookup", "--input", '["cus_1", true]')
    assert (positional.code, json.loads(positional.stdout)) == (0, "CUS_1")
    piped = toolbridge(shop, "call", "shop:bridge", "lookup", "--input", "-", stdin='{"customer_id": "c2"}')
    assert (piped.code, json.loads(piped.stdout)) == (0, "c2")


def test_journal_option_records_the_call_elsewhere(shop: Path) -> None:
    elsewhere = shop / "elsewhere.db"
    ran = toolbridge(
        shop,
        "call",
        "shop:bridge",
        "lookup",
        "--input",
        '["c1"]',
        "--journal",
        str(elsewhere),
        "--run-id",
        "j1",
    )
    assert ran.code == 0, ran.stderr
    with sqlite3.connect(elsewhere) as db:
        assert db.execute("SELECT run_id, status FROM runs").fetchall() == [("j1", "completed")]
    assert not (shop / "shop.db").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["call", "shop:bridge", "nope"],
            "shop:bridge has no tool named 'nope' (its tools: getCustomer, lookup)",
        ),
        (["call", "shop:bridge", "lookup", "--input", "{bad"], "--input is not valid JSON"),
        (["call", "shop:bridge", "lookup", "--input", "5"], "--input must be a JSON object"),
        (["call", "shop:bridge", "lookup", "--input", '{"a": 1, "a": 2}'], "duplicate key 'a'"),
        (["call", "missing_module:bridge", "lookup"], "cannot import 'missing_module'"),
        (["call", "shop", "lookup"], "expected MODULE:ATTR"),
        (["definitions", "shop:not_a_bridge"], "shop:not_a_bridge is a int, not a toolbridge.Bridge"),
    ],
)
def test_usage_problems_exit_with_status_2_and_say_what_is_wrong(
    shop: Path, arguments: list[str], message: str
) -> None:
    ran = toolbridge(shop, *arguments)
    assert ran.code == 2
    assert message in ran.stderr
    assert ran.stdout == ""
    assert executions(shop) == 0


# -- toolbridge definitions ---------------------------------------------------------------------


@pytest.mark.parametrize("format", ["anthropic", "openai", "openai-strict", "mcp"])
def test_definitions_prints_what_tool_definitions_returns(
    shop: Path, format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = toolbridge(shop, "definitions", "shop:bridge", "--format", format)
    assert ran.code == 0, ran.stderr
    monkeypatch.chdir(shop)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_bridge adds the directory
    monkeypatch.delitem(sys.modules, "shop", raising=False)
    bridge = load_bridge("shop:bridge")
    monkeypatch.delitem(sys.modules, "shop")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefinitionWarning)
        expected = tool_definitions(bridge.tools, format=format)  # type: ignore[arg-type]
    assert json.loads(ran.stdout) == json.loads(json.dumps(expected))
    assert ran.stderr == "".join(
        f"toolbridge: not in the {format} definitions: {dropped}\n" for dropped in expected.dropped
    )


def test_definitions_says_on_stderr_what_the_format_cannot_express(tmp_path: Path) -> None:
    (tmp_path / "tags.py").write_text(
        textwrap.dedent(
            """
            from toolbridge import Bridge

            bridge = Bridge(journal=None)

            @bridge.tool
            def tag(labels: dict[str, str]) -> None:
                '''Label something.'''
            """
        )
    )
    ran = toolbridge(tmp_path, "definitions", "tags:bridge", "--format", "openai-strict")
    assert ran.code == 0
    assert json.loads(ran.stdout)[0]["strict"] is False
    assert ran.stderr == (
        "toolbridge: not in the openai-strict definitions: tag: /properties/labels: an object with "
        "free-form keys cannot be expressed in OpenAI strict mode, so this tool is sent with strict: false\n"
    )
    assert toolbridge(tmp_path, "definitions", "tags:bridge", "--format", "gemini").code == 2


def test_a_failed_call_on_a_bridge_without_a_journal_claims_no_record(tmp_path: Path) -> None:
    (tmp_path / "bare.py").write_text(
        textwrap.dedent(
            """
            from toolbridge import Bridge

            bridge = Bridge(journal=None)

            @bridge.tool
            def double(n: int) -> int:
                return 2 * n
            """
        )
    )
    assert json.loads(toolbridge(tmp_path, "call", "bare:bridge", "double", "--input", "[21]").stdout) == 42
    failed = toolbridge(tmp_path, "call", "bare:bridge", "double", "--input", '["many"]')
    assert failed.code == 1
    assert failed.stderr.splitlines() == [
        "toolbridge: double failed: ValidationError: invalid arguments: /n: Input should be a valid "
        "integer, unable to parse string as an integer"
    ]
