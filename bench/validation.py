"""What validating a call and building definitions cost, beside pydantic alone in the same run.

Validation: ``Tool.bind`` (what the daemon runs for each call of a ``tool.step``) on an order
with nested models, against pydantic's ``TypeAdapter.validate_json`` on the same bytes, the
baseline. Three shapes of the same call: every optional argument left out; every optional
argument sent as ``null``, as OpenAI's strict mode sends them (the daemon drops those nulls,
re-serializes, then validates); and the lax tool (``strict=False``).

Definitions: ``tool_definitions`` for twenty such tools in each format, against
``TypeAdapter.json_schema`` for the same models, the baseline.

Usage: python bench/validation.py [--rounds 5] [--calls 5000] [--builds 50]

Each figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import enum
import functools
import json
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter

from toolbridge import DefinitionWarning, tool, tool_definitions
from toolbridge._definitions.build import FORMATS
from toolbridge._tools.convert import to_tool


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str = Field(description="Street and number")
    postcode: str = Field(pattern=r"^[0-9]{5}$")
    country: str = "US"


class Line(BaseModel):
    sku: str = Field(min_length=3, max_length=12)
    quantity: int = Field(1, ge=1)


class Order(BaseModel):
    customer_id: str
    lines: list[Line]
    shipping: Address
    billing: Address | None = None
    priority: Priority = Priority.LOW
    note: str | None = None
    gift: bool = False


LINES = [{"sku": f"sku-{i}", "quantity": 2} for i in range(10)]
LEFT_OUT = {"customer_id": "c1", "lines": LINES, "shipping": {"street": "Main 1", "postcode": "12345"}}
AS_NULLS = {
    **LEFT_OUT,
    "lines": [{**line, "quantity": None} for line in LINES],
    "shipping": {"street": "Main 1", "postcode": "12345", "country": None},
    "billing": None,
    "priority": None,
    "note": None,
    "gift": None,
}


def _per_call_us(work: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - start) / calls * 1e6


def _validation(calls: int) -> dict[str, float]:
    adapter = TypeAdapter(Order)
    strict = to_tool(tool.step(input=Order, run=lambda args: None))
    lax = to_tool(tool.step(input=Order, strict=False, run=lambda args: None))
    left_out = json.dumps(LEFT_OUT).encode()
    as_nulls = json.dumps(AS_NULLS).encode()
    return {
        "pydantic validate_json (baseline)": _per_call_us(
            lambda: adapter.validate_json(left_out, strict=True, extra="forbid"), calls
        ),
        "bind, optionals left out": _per_call_us(lambda: strict.bind([], LEFT_OUT, left_out), calls),
        "bind, optionals as null": _per_call_us(lambda: strict.bind([], AS_NULLS, as_nulls), calls),
        "bind, lax tool": _per_call_us(lambda: lax.bind([], LEFT_OUT, left_out), calls),
    }


def _definitions(builds: int) -> dict[str, float]:
    tools = {f"tool{i}": tool.step(input=Order, run=lambda args: None) for i in range(20)}
    figures = {
        "pydantic json_schema x20 (baseline)": _per_call_us(
            lambda: [TypeAdapter(Order).json_schema() for _ in range(20)], builds
        )
        / 1000
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DefinitionWarning)
        for format in FORMATS:
            build = functools.partial(tool_definitions, tools, format=format)
            figures[f"tool_definitions x20, {format}"] = _per_call_us(build, builds) / 1000
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--builds", type=int, default=50)
    options = parser.parse_args()
    rounds_validation = [_validation(options.calls) for _ in range(options.rounds)]
    rounds_definitions = [_definitions(options.builds) for _ in range(options.rounds)]
    print(f"validating one call, microseconds (median of {options.rounds} rounds of {options.calls}):")
    for name in rounds_validation[0]:
        print(f"  {name:<42} {statistics.median(r[name] for r in rounds_validation):8.1f}")
    print(f"building definitions, milliseconds (median of {options.rounds} rounds of {options.builds}):")
    for name in rounds_definitions[0]:
        print(f"  {name:<42} {statistics.median(r[name] for r in rounds_definitions):8.2f}")


if __name__ == "__main__":
    main()
