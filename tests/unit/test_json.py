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
    ],
)
def test_refuses_what_python_would_accept(text: str, message: str) -> None:
    with pytest.raises(JSONFormatError, match=message):
        loads_strict(text)


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
