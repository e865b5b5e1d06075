"""Credential formats found in what a server sends: the kind each marker names, what
only looks like a credential, key blocks whole or cut off, and the cheap trigger on
the raw bytes, which must find every credential the full patterns would mask in any
way a JSON encoder writes the text around it."""

from __future__ import annotations

import json
import re

import msgspec
import pytest

from mcpd.policy.redaction.patterns import FORMAT, TRIGGER, kind_marker, redact

KEY_BLOCK = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\nAAKCAQ==\n-----END RSA PRIVATE KEY-----"
CREDENTIALS = [
    (KEY_BLOCK, "private key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn", "private key"),
    ("AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
    ("ASIAIOSFODNN7EXAMPLE", "AWS access key id"),
    ("ghp_" + "a1B2" * 9, "GitHub token"),
    ("gho_" + "Z" * 30, "GitHub token"),
    ("github_pat_" + "11ABC_" * 8, "GitHub token"),
    ("xoxb-1234567890-abcdefghij", "Slack token"),
    ("sk-proj-" + "Ab3_" * 6, "API key"),
    ("AIza" + "Sy0-_" * 7, "Google API key"),
]


def redacted(text: str) -> tuple[str, list[str]]:
    seen: list[str] = []
    return redact(text, seen), seen


@pytest.mark.parametrize(("credential", "kind"), CREDENTIALS)
def test_each_format_is_replaced_by_a_marker_naming_its_kind(credential: str, kind: str) -> None:
    out, seen = redacted(f"token: {credential}")
    assert out == f"token: {kind_marker(kind)}"
    assert seen == [FORMAT + kind]
    assert credential not in out


def test_several_credentials_are_each_masked_and_counted_in_order() -> None:
    aws, slack = "AKIAIOSFODNN7EXAMPLE", "xoxp-0000000000-zzzz"
    out, seen = redacted(f"{slack} and {aws}, again {slack}")
    slack_marker, aws_marker = kind_marker("Slack token"), kind_marker("AWS access key id")
    assert out == f"{slack_marker} and {aws_marker}, again {slack_marker}"
    assert seen == [FORMAT + "Slack token", FORMAT + "AWS access key id", FORMAT + "Slack token"]


@pytest.mark.parametrize(
    "text",
    [
        "task-list and risk-assessment-of-the-quarter",  # "sk-" inside a word
        "AKIAIOSFODNN7EXAMPL",  # one character short
        "AKIAIOSFODNN7EXAMPLEX",  # one too many: some other identifier
        "akiaiosfodnn7example",  # the format is upper case
        "ghp_short",
        "xoxb-123",
        "sk-tooshort",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "myghp_" + "a" * 40,  # a prefix in the middle of a word names nothing
    ],
)
def test_what_only_looks_like_a_credential_is_left_alone(text: str) -> None:
    assert redacted(text) == (text, [])


def test_a_key_block_is_masked_to_its_end_line_and_what_follows_is_kept() -> None:
    out, seen = redacted(f"before\n{KEY_BLOCK}\nafter, and\n{KEY_BLOCK}\nend")
    marker = kind_marker("private key")
    assert out == f"before\n{marker}\nafter, and\n{marker}\nend"
    assert seen == [FORMAT + "private key"] * 2


def test_a_key_block_cut_off_is_masked_to_the_end_of_the_text() -> None:
    cut = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI"
    out, _ = redacted(f"head {cut} and the rest of the page")
    assert out == f"head {kind_marker('private key')}"


def test_a_key_block_whose_end_line_is_garbled_hides_everything_after_it() -> None:
    out, _ = redacted("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KE\nmore")
    assert out == kind_marker("private key")


# What may come just before a credential in a text, and how encoders write it.
BEFORE = ["", " ", "=", "\n", "\r\n", "\t", "“", "\u00a0", "—", "\x0b", "\\", '"']


def encodings(text: str) -> list[bytes]:
    ascii_only = json.dumps({"text": text})
    return [
        ascii_only.encode(),
        # Some encoders write the hex of \\uXXXX in upper case.
        re.sub(r"\\u[0-9a-f]{4}", lambda m: m[0][:2] + m[0][2:].upper(), ascii_only).encode(),
        json.dumps({"text": text}, ensure_ascii=False).encode(),
        msgspec.json.encode({"text": text}),
    ]


@pytest.mark.parametrize("before", BEFORE)
@pytest.mark.parametrize(("credential", "kind"), CREDENTIALS)
def test_the_trigger_finds_every_credential_the_patterns_would_mask(
    credential: str, kind: str, before: str
) -> None:
    text = f"config:{before}{credential}"
    _, seen = redacted(text)
    assert seen == [FORMAT + kind], "the case itself is a credential"
    for raw in encodings(text):
        assert TRIGGER.search(raw) is not None, raw


def test_the_trigger_passes_text_without_any_credential() -> None:
    for text in ("a plain result", "task-list", "AKIA", "the ask-key flag", "mask-sk"):
        for raw in encodings(text):
            assert TRIGGER.search(raw) is None, raw


def test_a_flood_of_almost_key_blocks_is_matched_in_one_pass() -> None:
    # Many headers and end lines that are not a private key's, then one cut off:
    # the text from the cut-off header on is masked, what comes before is kept.
    noise = "-----BEGIN A B C PUBLIC KEY----- -----END X Y Z -----\n" * 20_000
    out, seen = redacted(noise + "-----BEGIN PRIVATE KEY-----\n" + noise)
    assert out == noise + kind_marker("private key")
    assert seen == [FORMAT + "private key"]
