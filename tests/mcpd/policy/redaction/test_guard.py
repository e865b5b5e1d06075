"""The guard on what servers send (``policy.redaction.guard``): the forms JSON gives a secret,
overlaps and edges, the credential formats, and what it leaves as it was."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import msgspec
import pytest
from msgspec import Raw

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.cutparts import CUT_NOTES, CUT_PART
from mcpd.policy.redaction.guard import LogMask, SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from protocol.shown.visible import QUOTED, cut, cut_bytes, quote

ODD = 'se/cr"et\\é\x01-0123456789'
PLAIN = "plain-secret-0123456789"


def guard(*secrets: tuple[str, str], patterns: bool = False) -> SecretGuard:
    known = KnownSecrets()
    known.replace("config", [HeldSecret(where, value) for where, value in secrets])
    g = SecretGuard(known)
    g.configure(["s"] if patterns else [])
    return g


def masked(g: SecretGuard, raw: bytes) -> object:
    return json.loads(bytes(g.raw("s", Raw(raw), "a result")))


@pytest.mark.parametrize(
    "encode",
    [
        lambda v: json.dumps(v),
        lambda v: json.dumps(v, ensure_ascii=False),
        lambda v: msgspec.json.encode(v).decode(),
        lambda v: json.dumps(v).replace("/", "\\/"),
        lambda v: json.dumps(v).replace("\\u00e9", "\\u00E9").replace("/", "\\/"),
    ],
)
def test_each_form_json_encoders_give_a_secret_is_found(encode: object) -> None:
    g = guard(("servers.a.env.KEY", ODD))
    raw = encode({"text": f"it is {ODD}!"}).encode()  # type: ignore[operator]
    assert masked(g, raw) == {"text": "it is [secret of servers.a.env.KEY]!"}
    assert g.masked("s") == {"servers.a.env.KEY": 1}


def test_a_result_without_a_secret_is_the_same_object() -> None:
    g = guard(("servers.a.env.KEY", PLAIN))
    raw = Raw(b'{"content": [{"type": "text", "text": "plain-secret-012345678"}]}')
    assert g.raw("s", raw, "a result") is raw
    assert g.masked("s") == {}


def test_a_near_miss_in_the_bytes_leaves_the_result_as_it_came() -> None:
    # The bytes hold the secret, but as the tail of an escape: decoded, it is not there.
    g = guard(("servers.a.env.KEY", "u00e9-0123456789abc"))
    raw = Raw(b'{"x": "\\u00e9-0123456789abc"}')
    assert g.raw("s", raw, "a result") is raw
    assert g.masked("s") == {}


def test_secrets_at_the_edges_and_overlapping_are_masked_whole() -> None:
    g = guard(("servers.a.env.ONE", "abcdefghij-1234"), ("servers.b.env.TWO", "ghij-1234-zzzzzz"))
    raw = json.dumps(["abcdefghij-1234", "abcdefghij-1234-zzzzzz", {"abcdefghij-1234": 1}])
    assert masked(g, raw.encode()) == [
        "[secret of servers.a.env.ONE]",
        "[secret of servers.a.env.ONE]",  # the two overlap: one marker, the first's
        {"[secret of servers.a.env.ONE]": 1},
    ]


def test_a_secret_in_a_text_and_an_error_is_masked_and_counted() -> None:
    g = guard(("servers.a.env.KEY", PLAIN))
    assert g.text("s", f"{PLAIN}{PLAIN}", "stderr") == "[secret of servers.a.env.KEY]" * 2
    from protocol.jsonrpc import messages as rpc

    error = rpc.RPCError(-1, f"no {PLAIN}", {"k": [PLAIN]})
    out = g.rpc_error("s", error, "an error")
    assert (out.message, out.data) == (
        "no [secret of servers.a.env.KEY]",
        {"k": ["[secret of servers.a.env.KEY]"]},
    )
    clean = rpc.RPCError(-1, "fine")
    assert g.rpc_error("s", clean, "an error") is clean
    assert g.masked("s") == {"servers.a.env.KEY": 4}


def test_a_secret_is_found_in_a_reason_that_quotes_what_the_server_wrote() -> None:
    # Its quote and backslash written behind a backslash, its control as an escape.
    g = guard(("servers.a.headers.Cookie", ODD))
    said = f"HTTP 503 {quote(f'busy {ODD}')}"
    assert ODD not in said
    shown = 'HTTP 503 "busy [secret of servers.a.headers.Cookie]"'
    assert g.text("s", said, "why it failed") == shown
    assert g.masked("s") == {"servers.a.headers.Cookie": 1}


@pytest.mark.parametrize("secret", [PLAIN, ODD])
def test_a_server_cannot_pad_a_secret_across_a_quotes_cut_to_show_its_beginning(
    secret: str,
) -> None:
    # Wherever the cut falls inside the echoed secret, the reason shows at most the
    # fewest characters that could be any text's end, and the rest is marked.
    g = guard(("servers.a.headers.Key", secret))
    quoted = quote(secret, len(secret))[1:-1]
    for kept in range(1, len(secret)):
        said = f"HTTP 503 {quote('x' * (QUOTED - kept) + secret)}"
        shown = g.text("s", said, "why it failed")
        for size in range(4, len(quoted)):
            assert quoted[:size] not in shown, (kept, shown)
        if len(quote(secret[:kept])) - 2 >= 4:
            assert shown.endswith(
                f'[secret of servers.a.headers.Key]" (and {len(secret) - kept} more characters)'
            ), shown
        assert g.holds(said) == (len(quote(secret[:kept])) - 2 >= 4)
        assert g.shown({"why": said}) == {"why": shown}
    # Text that merely ends like no secret begins is left as it is.
    plain = f"HTTP 503 {quote('y' * 400)}"
    assert g.text("s", plain, "why it failed") == plain


@pytest.mark.parametrize(
    "cut_at",
    [
        lambda text, at: cut(text, at),
        lambda text, at: cut_bytes(text.encode(), len(text[:at].encode())),
        lambda text, at: cut_bytes(text.encode()[: len(text[:at].encode())], 512, whole=4096),
    ],
)
@pytest.mark.parametrize("secret", [PLAIN, ODD])
def test_a_server_cannot_pad_a_secret_across_any_cut_of_mcpds_to_show_its_beginning(
    cut_at: Callable[[str, int], str], secret: str
) -> None:
    # An unquoted cut (a long stderr line, a body's start) is noted as a quote's is.
    g = guard(("servers.a.env.KEY", secret))
    for kept in range(1, len(secret)):
        said = cut_at("x" * 40 + secret + "z" * 60, 40 + kept)
        shown = g.text("s", said, "a log line")
        assert not any(secret[:size] in shown for size in range(4, len(secret))), (kept, shown)
        assert g.holds(said) == (kept >= 4)
        assert g.shown({"stderr": [said]}) == {"stderr": [shown]}
    assert g.masked("s") == {"servers.a.env.KEY": len(secret) - 4}


NOTE = "\u2026 (and 5 more characters)"


@pytest.mark.parametrize(
    "secret",
    ["".join(f"k{i:07d}" for i in range(80_000)), "ab" * 320_000],
    ids=["plain", "repeating"],
)
def test_notes_of_cuts_cost_one_look_at_a_long_secret_each(secret: str) -> None:
    # A server pads its words and writes notes that read as mcpd's: each note is one
    # pass over the text before it, not one per length the secret could be cut at.
    g = guard(("servers.a.env.KEY", secret))
    kept = len(secret) // 2
    padded = "x" * 260_000 + ("x" * 100 + NOTE) * 64
    said = padded + secret[:kept] + NOTE + cut(secret, kept)
    assert g.holds(said)
    shown = g.text("s", said, "an error")
    assert secret[:CUT_PART] not in shown
    mark = "[secret of servers.a.env.KEY]"
    last = f"\u2026 (and {len(secret) - kept} more characters)"
    assert shown == padded + mark + NOTE + mark + last
    assert g.masked("s") == {"servers.a.env.KEY": 2}


def test_of_many_notes_of_cuts_the_last_ones_are_looked_at() -> None:
    # Notes a server writes before mcpd's own cut do not push that cut out of the look.
    g = guard(("servers.a.env.KEY", PLAIN))
    said = "y" * 40 + NOTE * (CUT_NOTES * 4) + cut(PLAIN, 12)
    shown = g.text("s", said, "an error")
    assert shown == "y" * 40 + NOTE * (CUT_NOTES * 4) + "[secret of servers.a.env.KEY]" + (
        f"\u2026 (and {len(PLAIN) - 12} more characters)"
    )


def test_a_status_row_is_masked_in_its_strings_and_keeps_its_numbers() -> None:
    g = guard(("servers.a.env.KEY", "1700000000"))
    row = {"last_error": "HTTP 503 1700000000", "since": 1700000000.5, "stderr": ["1700000000"]}
    assert g.shown(row) == {
        "last_error": "HTTP 503 [secret of servers.a.env.KEY]",
        "since": 1700000000.5,
        "stderr": ["[secret of servers.a.env.KEY]"],
    }
    assert g.masked("s") == {}  # counted where the server's words were kept, not here


def test_a_server_echoing_a_secret_again_and_again_is_counted_each_time_and_logged_few(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.a.env.KEY", PLAIN)])
    g = SecretGuard(known, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "mcpd.secrets"):
        for _ in range(100):
            g.text("s", f"token {PLAIN}", "a log message")
        said = [r.getMessage() for r in caplog.records]
        now[0] = 10.0
        g.text("s", f"token {PLAIN}", "a log message")
    assert g.masked("s") == {"servers.a.env.KEY": 101}
    assert said == ["s: masked [secret of servers.a.env.KEY] in a log message"] * 5
    [after] = [r.getMessage() for r in caplog.records][5:]
    assert after == (
        "s: masked [secret of servers.a.env.KEY] in a log message (95 more like this not logged)"
    )


KINDS = [
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "private key"),
    ("-----BEGIN PRIVATE KEY-----\nMIIE cut off", "private key"),
    ("AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
    ("ASIAIOSFODNN7EXAMPLE", "AWS access key id"),
    ("ghp_" + "a1" * 18, "GitHub token"),
    ("github_pat_" + "A1_" * 11, "GitHub token"),
    ("xoxb-1234567890-abcdef", "Slack token"),
    ("sk-ant-api03-" + "x" * 30, "API key"),
    ("AIza" + "B" * 35, "Google API key"),
]


@pytest.mark.parametrize(("credential", "kind"), KINDS)
def test_credential_formats_are_masked_by_kind_when_asked(credential: str, kind: str) -> None:
    raw = json.dumps({"text": f"found {credential}"}).encode()
    assert masked(guard(patterns=True), raw) == {"text": f"found [secret: {kind}]"}
    off = guard()
    assert off.raw("s", Raw(raw), "a result") == Raw(raw)


def test_words_that_only_look_alike_are_not_credentials() -> None:
    g = guard(patterns=True)
    raw = Raw(json.dumps({"t": "task-list AKIA short sk-1 ghp_x xoxb-1"}).encode())
    assert g.raw("s", raw, "a result") is raw


def test_a_new_token_is_found_once_the_guard_is_refreshed() -> None:
    known = KnownSecrets()
    tokens: list[HeldSecret] = []
    known.watch("daemon", lambda: tokens)
    g = SecretGuard(known)
    raw = Raw(b'{"t": "tok-ABCDEFGHIJKLMNOP"}')
    assert g.raw("s", raw, "a result") is raw
    tokens.append(HeldSecret("servers.s (OAuth)", "tok-ABCDEFGHIJKLMNOP"))
    g.refresh()
    assert json.loads(bytes(g.raw("s", raw, "a result"))) == {"t": "[secret of servers.s (OAuth)]"}


def test_a_log_record_is_masked_in_its_message_and_fields() -> None:
    g = guard(("servers.a.env.KEY", PLAIN))
    record = logging.LogRecord("x", logging.INFO, "f", 1, "said %s", (PLAIN,), None)
    record.mcpd_server = "s"
    record.mcpd_stderr = f"line {PLAIN}"
    assert LogMask(g).filter(record)
    assert record.getMessage() == "said [secret of servers.a.env.KEY]"
    assert record.mcpd_stderr == "line [secret of servers.a.env.KEY]"


def test_a_large_result_full_of_secrets_is_masked_everywhere() -> None:
    g = guard(("servers.a.env.KEY", PLAIN))
    copies = 100_000
    raw = json.dumps({"text": f"{PLAIN} and " * copies}).encode()
    out = masked(g, raw)
    assert out == {"text": "[secret of servers.a.env.KEY] and " * copies}
    assert g.masked("s") == {"servers.a.env.KEY": copies}


def test_adjacent_secrets_get_a_marker_each_and_a_chain_of_overlaps_one() -> None:
    g = guard(
        ("servers.a.env.A", "aaaa-bbbb"),
        ("servers.b.env.B", "bbbb-cccc"),
        ("servers.c.env.C", "cccc-dddd"),
    )
    text = "aaaa-bbbbaaaa-bbbb|aaaa-bbbb-cccc-dddd|"
    assert g.text("s", text, "stderr") == (
        "[secret of servers.a.env.A][secret of servers.a.env.A]|[secret of servers.a.env.A]|"
    )


class Unwalkable(dict[str, object]):
    """A decoded value that fails the test if anything walks it."""

    def items(self):  # type: ignore[override]
        raise AssertionError("walked")


def test_while_no_secret_is_held_a_value_is_not_walked_at_all() -> None:
    value = Unwalkable(text="anything")
    assert guard().value("s", value, "a result") is value
    # Nor with one held that the server's bytes do not hold: those are searched first.
    held = guard(("servers.a.env.KEY", PLAIN))
    assert not held.finds("s", Raw(b'{"text":"plain-secret-01234567"}'))
    assert held.finds("s", Raw(b'{"text":"plain-secret-0123456789"}'))


def test_a_server_whose_text_is_searched_for_formats_is_looked_at_for_them() -> None:
    g = guard(patterns=True)
    key = b'{"text":"ghp_' + b"a" * 36 + b'"}'
    assert g.finds("s", Raw(key)) and not g.finds("other", Raw(key))
    assert masked(g, key) != json.loads(key)


def spelled(text: str) -> str:
    """``text`` as no encoder writes it in JSON: each character a ``\\u`` escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def test_what_mcpd_writes_again_of_a_servers_is_searched_as_written() -> None:
    g = guard(("servers.a.env.KEY", ODD), ("servers.a.env.PIN", "123456789012"))
    # Neither is in the bytes as the server wrote them; both are once written again.
    raw = Raw(f'{{"text": "{spelled(ODD)}", "n": 1.23456789012e11}}'.encode())
    assert not g.finds("s", raw)
    assert json.loads(bytes(g.reread("s", raw, "a listed item"))) == {
        "text": "[secret of servers.a.env.KEY]",
        "n": "[secret of servers.a.env.PIN].0",  # its digits as a float writes them
    }
    # mcpd's own words quoting the server's are searched in that form too.
    said = {"text": f"it returned {quote(ODD)}", "n": 1}
    assert json.loads(g.written("s", said, "a result")) == {
        "text": 'it returned "[secret of servers.a.env.KEY]"',
        "n": 1,
    }
    assert g.masked("s") == {"servers.a.env.KEY": 2, "servers.a.env.PIN": 1}


def test_what_mcpd_writes_again_without_a_secret_is_as_it_came() -> None:
    g = guard(("servers.a.env.KEY", PLAIN))
    raw = Raw(b'{"text": "\\u0070lain", "n": 1.5e3}')
    assert g.reread("s", raw, "a listed item") is raw
    assert g.written("s", {"text": "plain"}, "a result") == b'{"text":"plain"}'
    assert g.masked("s") == {}


def test_a_secret_beside_a_number_no_double_holds_is_masked_and_the_number_kept() -> None:
    g = guard(("servers.a.env.KEY", "Zq9&x<Lk>Pw7=secret"))
    raw = b'{"text":"Zq9\\u0026x\\u003cLk\\u003ePw7\\u003dsecret","n":1e400,"m":-0.0}'
    masked_raw = bytes(g.raw("s", Raw(raw), "a result"))
    assert masked_raw == b'{"text":"[secret of servers.a.env.KEY]","n":1E+400,"m":-0.0}'
    # What mcpd writes of it, the server's member passed on as it came beside its text.
    written = g.written("s", {"text": "Zq9&x<Lk>Pw7=secret", "s": Raw(b"[1e400]")}, "a result")
    assert written == b'{"text":"[secret of servers.a.env.KEY]","s":[1E+400]}'
