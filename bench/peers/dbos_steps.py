"""Peer: DBOS steps on a SQLite or PostgreSQL system database; prints {"latencies_ms": [...]}.

Usage: python dbos_steps.py MODE DATABASE N
MODE "default" uses DBOS's own SQLite settings; "wal-normal" gives it an engine in WAL mode
with synchronous=NORMAL, the durability toolbridge's journal uses by default. With a
``postgresql://`` DATABASE, "pg-default" is DBOS's own settings (the server's
``synchronous_commit=on``: a WAL flush per commit) and "pg-async-commit" its fastest
durable setting, ``synchronous_commit=off`` (what toolbridge's ``durability="normal"`` uses).
"""

import json
import sys
import time
from typing import Any

import sqlalchemy as sa
from dbos import DBOS

WARMUP = 50


def main(mode: str, database: str, count: int) -> None:
    url = database if mode.startswith("pg-") else f"sqlite:///{database}"
    config: dict[str, Any] = {"name": "bench", "system_database_url": url}
    if mode == "pg-async-commit":
        engine_url = url.replace("postgresql://", "postgresql+psycopg://", 1)
        config["system_database_engine"] = sa.create_engine(
            engine_url, connect_args={"options": "-c synchronous_commit=off"}
        )
    elif mode == "wal-normal":
        engine = sa.create_engine(url)

        @sa.event.listens_for(engine, "connect")
        def _pragmas(connection: Any, _record: Any) -> None:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")

        config["system_database_engine"] = engine
    DBOS(config=config)  # type: ignore[arg-type]

    @DBOS.step()
    def echo(value: str) -> str:
        return value

    @DBOS.workflow()
    def workflow(steps: int, warmup: int) -> list[float]:
        for _ in range(warmup):
            echo("warm")
        latencies = []
        for _ in range(steps):
            started = time.perf_counter()
            echo("x")
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies

    DBOS.launch()
    try:
        latencies = workflow(count, WARMUP)
    finally:
        DBOS.destroy()
    print(json.dumps({"latencies_ms": latencies}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
