"""The hot path of several versions of the daemon, in one run: which change bought what.

Each version is a git revision, exported (``git archive``) to a temporary directory and put
first on ``PYTHONPATH``, so ``bench/hot_path.py`` (from the working tree) runs against its
daemon and its Python client. Rounds interleave the versions (one round of hot_path.py each,
in turn), and every figure is the median of the rounds, as a ratio to the raw unary echo of
the same round.

Usage: python bench/compare.py [--rounds 5] REV [REV ...]   (e.g. main HEAD~2 HEAD)
       a REV of the form NAME=REV:ENV=VALUE sets an environment variable for that version
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _export(rev: str, into: Path) -> str:
    """The revision's daemon and Python client, as a ``PYTHONPATH`` (the client is the one
    sandboxes get: the runtime copies the ``inngest_tools`` the daemon's interpreter finds)."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, "daemon", "clients/python"], cwd=ROOT, check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return os.pathsep.join((str(into / "daemon"), str(into / "clients" / "python")))


def _version(spec: str) -> tuple[str, str, dict[str, str]]:
    name, _, rest = spec.partition("=") if "=" in spec.split(":")[0] else (spec, "", spec)
    rev, *settings = rest.split(":")
    return name or rev, rev, dict(setting.split("=", 1) for setting in settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("versions", nargs="+")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="toolbridge-compare-") as work:
        trees = {}
        for index, spec in enumerate(args.versions):
            name, rev, settings = _version(spec)
            trees[name] = (_export(rev, Path(work) / str(index)), settings)
        for number in range(args.rounds):
            names = list(trees)
            for name in names[number % len(names) :] + names[: number % len(names)]:
                tree, settings = trees[name]
                env = {**os.environ, **settings, "PYTHONPATH": tree}
                argv = [sys.executable, str(HERE / "hot_path.py"), "--rounds", "1", "--json"]
                out = subprocess.run(
                    [*argv, *(["--uvloop"] if args.uvloop else [])], env=env, check=True, capture_output=True
                )
                results.setdefault(name, []).extend(json.loads(out.stdout))
    print(f"hot path by version: medians of {args.rounds} interleaved rounds, x = ratio to raw-unary")
    print("| version | sync p50 x | async p50 x | sync calls/s x | async calls/s x | raw p50 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, rounds in results.items():

        def ratio(subject: str, key: str, rounds: list[dict[str, Any]] = rounds) -> float:
            return float(statistics.median(r[subject][key] / r["raw-unary"][key] for r in rounds))

        raw = statistics.median(r["raw-unary"]["p50_ms"] for r in rounds)
        cells = [ratio(s, k) for k in ("p50_ms", "calls_per_s") for s in ("sync-tool", "async-tool")]
        print(f"| {name} | " + " | ".join(f"{cell:.2f}" for cell in cells) + f" | {raw:.3f} |")


if __name__ == "__main__":
    main()
