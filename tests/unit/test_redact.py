"""Secrets kept out of messages and logs: URLs with passwords, keys in query strings."""

from __future__ import annotations

import pytest

from metakg.redact import check_url, mask_query, mask_url, secret_pattern


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("/api/search?q=dog&api_key=S3cret", "/api/search?q=dog&api_key=***"),
        ("/api/search?q=dog&X-API-Key=S3cret", "/api/search?q=dog&X-API-Key=***"),
        ("/api/search?api%5Fkey=S3cret&k=1", "/api/search?api%5Fkey=***&k=1"),
        ("/api/search?x_api_key=S3cret", "/api/search?x_api_key=***"),
        ("/api/search?q=dog;api_key=S3cret", "/api/search?q=dog;api_key=***"),
        ("/api/search?apiKey=S3cret&token=T0k", "/api/search?apiKey=***&token=***"),
        ("/api/search?q=monkey&keyword=x", "/api/search?q=monkey&keyword=x"),
    ],
)
def test_secret_looking_query_values_are_masked(target: str, shown: str) -> None:
    assert mask_query(target) == shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://alice:pw@host/v1", "http://alice:***@host/v1"),
        ("HTTP://alice:pw@host/v1", "HTTP://alice:***@host/v1"),
        ("http://alice:p@ss@host/v1", "http://alice:***@host/v1"),
        ("bolt://neo4j:pw@host:7687", "bolt://neo4j:***@host:7687"),
        ("http://host/v1?x=a@b", "http://host/v1?x=a@b"),
        ("http://alice:pa ss@host/v1", "http://alice:***@host/v1"),
        (" http://alice:pw@host/v1", " http://alice:***@host/v1"),
        ("http:alice:pw@host/v1", "http:alice:***@host/v1"),
        ("http:///alice:pw@host/v1", "http:///alice:***@host/v1"),
        ("https://ghp_TOKEN@host/v1", "https://***@host/v1"),
        ("http://host/v1?key=S3cret&q=1", "http://host/v1?key=***&q=1"),
    ],
)
def test_a_password_in_a_url_is_masked_to_its_last_at_sign(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_a_url_that_cannot_be_told_apart_is_refused_without_being_shown() -> None:
    with pytest.raises(ValueError, match="is not a valid URL") as refused:
        check_url("http://alice:pa/ss@host/v1", "llm.base_url")
    assert "pa/ss" not in str(refused.value) and "alice" not in str(refused.value)
    with pytest.raises(ValueError, match=r"must start with http:// or https://") as refused:
        check_url("ftp://alice:secret@host/", "llm.base_url")
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize(
    "written",
    [
        "Zm9v+YmFy/YmF6cXV4eHh4=",
        "Zm9v%2BYmFy%2FYmF6cXV4eHh4%3D",
        "Zm9v%2bYmFy%2fYmF6cXV4eHh4%3d",
        "Zm9v%252BYmFy%252FYmF6cXV4eHh4%253D",
        "%5Am9v+YmFy/YmF6cXV4eHh4=",
    ],
)
def test_a_key_is_found_however_a_url_writes_it(written: str) -> None:
    line = f"GET /api/search?q={written}&k=1 HTTP/1.1"
    assert secret_pattern("Zm9v+YmFy/YmF6cXV4eHh4=").sub("***", line) == "GET /api/search?q=***&k=1 HTTP/1.1"


def test_array_forms_of_secret_parameters_are_masked() -> None:
    assert mask_query("/x?apiKey%5B%5D=abc&api_key[0]=d&q=1") == "/x?apiKey%5B%5D=***&api_key[0]=***&q=1"
