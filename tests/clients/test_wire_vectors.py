"""The shared wire vectors (tests/vectors/wire.json), run against the Python client.

The Node client runs the same file (clients/node/test/wire-vectors.test.js): a call is the
same bytes on the wire from either language, and the same bytes mean the same result or
ToolError to both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inngest_tools import ToolError
from inngest_tools._proto import toolbridge_pb2 as pb
from inngest_tools._transport import (
    FORMATS,
    decode_definitions,
    decode_stream_answer,
    encode_arguments,
    stream_request,
)

VECTORS = json.loads((Path(__file__).parent.parent / "vectors" / "wire.json").read_text(encoding="utf-8"))


def _named(section: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("vector", VECTORS[section], ids=[v["name"] for v in VECTORS[section]])


def _answer_message(readable: dict[str, Any]) -> pb.CallToolStreamResponse:
    """The readable form of an answer, built field by field."""
    answer = pb.CallToolStreamResponse(call_id=readable["call_id"])
    if "response" in readable:
        fields = readable["response"]
        response = pb.CallToolResponse(
            step_key=fields.get("step_key", ""), replayed=fields.get("replayed", False)
        )
        if "result_json" in fields:
            response.result_json = fields["result_json"].encode()
        if "error" in fields:
            response.error.CopyFrom(pb.ToolError(**fields["error"]))
        answer.response.CopyFrom(response)
    if "status" in readable:
        answer.status.CopyFrom(pb.CallStatus(**readable["status"]))
    return answer


def test_the_vectors_cover_both_languages_and_every_status() -> None:
    node_calls = [v for v in VECTORS["calls"] if not v["kwargs"]]
    assert len(node_calls) >= 8
    assert len(VECTORS["calls"]) > len(node_calls)
    statuses = {v["answer"]["status"]["code"] for v in VECTORS["answers"] if "status" in v["answer"]}
    assert statuses >= {3, 5, 8, 14, 16}


@_named("calls")
def test_a_call_is_these_bytes_on_the_wire(vector: dict[str, Any]) -> None:
    positional, named = encode_arguments(tuple(vector["args"]), vector["kwargs"])
    assert positional == vector["positional_arguments_json"].encode()
    assert named == vector["named_arguments_json"].encode()
    request = stream_request(
        vector["call_id"], vector["tool"], positional, named, vector.get("traceparent", "")
    )
    assert request.SerializeToString().hex() == vector["request_hex"]


@_named("answers")
def test_an_answer_means_this_result_or_error(vector: dict[str, Any]) -> None:
    wire = bytes.fromhex(vector["answer_hex"])
    built = _answer_message(vector["answer"]).SerializeToString()
    assert built == wire, f"answer_hex should be {built.hex()}"
    answer = pb.CallToolStreamResponse.FromString(wire)
    if "error" in vector:
        with pytest.raises(ToolError) as caught:
            decode_stream_answer(answer)
        error = caught.value
        assert {
            "type": error.type,
            "message": error.message,
            "retryable": error.retryable,
            "error_id": error.error_id,
        } == vector["error"]
    else:
        assert decode_stream_answer(answer) == vector["result"]


@_named("definitions")
def test_a_definitions_request_is_these_bytes(vector: dict[str, Any]) -> None:
    request = pb.ListToolsRequest(format=FORMATS[vector["format"]])
    assert request.SerializeToString().hex() == vector["request_hex"]


@_named("listed")
def test_listed_definitions_decode_to_this_list(vector: dict[str, Any]) -> None:
    wire = bytes.fromhex(vector["response_hex"])
    built = pb.ListToolsResponse(
        tools=[
            pb.ToolDefinition(name=entry["name"], definition_json=entry["definition_json"].encode())
            for entry in vector["response"]["tools"]
        ]
    ).SerializeToString()
    assert built == wire, f"response_hex should be {built.hex()}"
    assert decode_definitions(pb.ListToolsResponse.FromString(wire)) == vector["definitions"]
