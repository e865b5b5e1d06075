"""RFC 6570 templates as a router sees them: which URIs a template claims."""

from __future__ import annotations

import pytest

from protocol import uritemplate as t


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("test://template/{id}/data", "test://template/123/data", True),
        ("test://template/{id}/data", "test://template/1/2/data", False),  # {id} has no "/"
        ("test://template/{id}/data", "test://template/123/other", False),
        ("file:///{+path}", "file:///src/a b/c.py", True),  # + keeps reserved characters
        ("file:///{name}", "file:///a%20b.txt", True),
        ("file:///{name}", "file:///a b.txt", False),  # simple expansion percent-encodes
        ("db://rows{?limit,offset}", "db://rows", True),
        ("db://rows{?limit,offset}", "db://rows?limit=3&offset=4", True),
        ("db://rows{?limit}", "db://rowsX", False),
        ("x://{a}{/path*}", "x://a/b/c", True),
        ("x://page{#section}", "x://page#intro", True),
        ("demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/1", False),
    ],
)
def test_which_uris_a_template_claims(template: str, uri: str, expected: bool) -> None:
    assert t.matches(template, uri) is expected


def test_a_broken_template_claims_nothing() -> None:
    assert t.matches("file:///{path", "file:///{path") is False
    with pytest.raises(t.TemplateError):
        t.pattern("x://{}")


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("test://template/{id}/data", "test://template/{id}/data", True),
        ("file:///{name}", "file:///{+path}", True),
        ("file:///docs/{name}", "file:///{name}", True),  # one prefix starts the other
        ("demo://text/{id}", "demo://blob/{id}", False),
        ("a://{x}", "b://{x}", False),
    ],
)
def test_templates_that_could_claim_one_uri(a: str, b: str, overlap: bool) -> None:
    assert t.may_overlap(a, b) is overlap
    assert t.may_overlap(b, a) is overlap
