from __future__ import annotations

from toolbridge._tokens import TokenRegistry, split_token


def test_a_minted_token_resolves_until_revoked() -> None:
    registry: TokenRegistry[str] = TokenRegistry()
    token, token_id = registry.mint("grant")
    assert registry.resolve(token) == "grant"
    registry.revoke(token_id)
    assert registry.resolve(token) is None


def test_a_token_with_the_right_id_and_a_wrong_secret_is_refused() -> None:
    registry: TokenRegistry[str] = TokenRegistry()
    token, token_id = registry.mint("grant")
    assert registry.resolve(f"tb1.{token_id}.wrong") is None
    assert registry.resolve(token + "x") is None


def test_malformed_tokens_are_refused() -> None:
    registry: TokenRegistry[str] = TokenRegistry()
    registry.mint("grant")
    for token in ("", "tb1", "tb1..", "tb2.a.b", "tb1.a.b.c"):
        assert registry.resolve(token) is None
        assert split_token(token) is None


def test_tokens_are_unique() -> None:
    registry: TokenRegistry[int] = TokenRegistry()
    tokens = {registry.mint(i)[0] for i in range(200)}
    assert len(tokens) == 200
