from __future__ import annotations

import pytest

from toolbridge._json import JSONFormatError, canonical, dumps, loads_strict


def test_accepts_plain_json() -> None:
    assert loads_strict(b'{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NaN", "NaN is not valid JSON"),
        ('{"x": Infinity}', "Infinity is not valid JSON"),
        ('{"a": 1, "a": 1}', "duplicate key 'a'"),
        ('{"outer": {"a": 1, "a": 2}}', "duplicate key 'a'"),
        ("[" * 65 + "]" * 65, "deeper than 64"),
        ('{"a":' * 70 + "1" + "}" * 70, "deeper than 64"),
        ("{", "not valid JSON"),
        ("[1e999]", "the number 1e999 is out of range"),
        ('{"x": -1e999}', "the number -1e999 is out of range"),
        ("[" + "9" * 5000 + "]", "an integer of 5000 digits is too long"),
        ("[-" + "9" * 4301 + "]", "an integer of 4301 digits is too long"),
        ('["\\ud800"]', "lone surrogate \\\\ud800"),
        ('{"\\udfff": 1}', "lone surrogate \\\\udfff"),
        ('{"a": ["ok", {"b": "x\\udc00y"}]}', "lone surrogate \\\\udc00"),
    ],
)
def test_refuses_what_python_would_accept(text: str, message: str) -> None:
    with pytest.raises(JSONFormatError, match=message):
        loads_strict(text)


def test_accepts_what_can_be_written_again() -> None:
    assert loads_strict("[" + "9" * 4300 + "]") == [int("9" * 4300)]
    assert loads_strict('["\\ud83d\\ude00", 1.5e308]') == ["\U0001f600", 1.5e308]  # a pair is one character
    assert loads_strict('["\\u00e9"]') == ["\u00e9"]


def test_depth_is_configurable() -> None:
    assert loads_strict("[[[]]]", max_depth=3) == [[[]]]
    with pytest.raises(JSONFormatError):
        loads_strict("[[[[]]]]", max_depth=3)


def test_canonical_is_independent_of_key_order() -> None:
    assert canonical({"b": 1, "a": [2, {"d": 1, "c": 2}]}) == canonical({"a": [2, {"c": 2, "d": 1}], "b": 1})
    assert canonical({"b": 1, "a": "é"}) == '{"a":"é","b":1}'


def test_dumps_refuses_nan() -> None:
    with pytest.raises(ValueError, match="Out of range"):
        dumps(float("nan"))
