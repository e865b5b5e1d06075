"""``mcpd pins export|import|forget-unreadable`` against a stand-in for the daemon: a
damaged or missing export refused naming it before the daemon is asked, what the daemon
answers said in a line a person reads, and each failure its own exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.main import main
from tests.support.daemons.fake import answering, error

EXPORT: dict[str, Any] = {
    "format": 1,
    "servers": {
        "mail": {"tools": {"send": "sha256:aa", "read": "sha256:bb"}, "prompts": {}},
        "notes": {"tools": {"find": "sha256:cc"}, "instructions": {"": "sha256:dd"}},
    },
}


def run(sock: Path, *argv: str) -> int:
    try:
        return main(["pins", *argv, "--socket", str(sock)])
    except SystemExit as done:
        assert isinstance(done.code, int)
        return done.code


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "mcpd.sock"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    path = tmp_path / "pins.json"
    path.write_text(json.dumps(EXPORT))
    return path


# -- import --


def test_a_damaged_export_is_refused_naming_it_and_the_daemon_is_not_asked(
    tmp_path: Path, sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / "pins.json"
    damaged.write_text('{"format": 1, "servers": {"mail": {"tools": ')  # cut off
    with answering(sock) as daemon:
        assert run(sock, "import", str(damaged)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mcpd: {damaged} is not JSON: ")
    assert "Traceback" not in err
    assert daemon.requests == []


def test_a_missing_export_is_refused_naming_it(
    tmp_path: Path, sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.json"
    assert run(sock, "import", str(missing)) == 2
    assert capsys.readouterr().err == f"mcpd: cannot read {missing}: No such file or directory\n"


def test_an_import_sends_the_export_as_read_and_says_what_the_daemon_took(
    sock: Path, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = {"servers": ["mail", "notes"], "items": 4, "released": 1, "saved": True}
    with answering(sock, mcpd_lineLimit={"maxLineBytes": 1 << 20}, mcpd_pins_import=taken) as d:
        assert run(sock, "import", str(export), "--replace") == 0
    (sent,) = [r for r in d.requests if r["method"] == "mcpd/pins/import"]
    assert sent["params"]["pins"] == EXPORT and sent["params"]["replace"] is True
    assert capsys.readouterr().out == (
        "imported 4 pinned items of mail, notes; 1 held item(s) released\n"
    )


def test_an_import_the_daemon_could_not_save_fails(
    sock: Path, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = {"servers": [], "items": 0, "released": 0, "saved": False}
    with answering(sock, mcpd_lineLimit={"maxLineBytes": 1 << 20}, mcpd_pins_import=taken):
        assert run(sock, "import", str(export)) == 1
    assert "imported 0 pinned items of no server" in capsys.readouterr().out


def test_a_daemon_that_does_not_say_its_line_limit_is_sent_the_export_as_it_is(
    sock: Path, export: Path
) -> None:
    taken = {"servers": ["mail"], "items": 2, "released": 0}
    with answering(
        sock,
        mcpd_lineLimit=lambda msg: error(msg, -32601, "Method not found"),
        mcpd_pins_import=taken,
    ) as daemon:
        assert run(sock, "import", str(export)) == 0
    assert [r["method"] for r in daemon.requests] == ["mcpd/lineLimit", "mcpd/pins/import"]


def test_a_line_limit_that_is_no_answer_is_a_bad_reply_and_nothing_is_imported(
    sock: Path, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with answering(sock, mcpd_lineLimit={"limit": "big"}, mcpd_pins_import={}) as daemon:
        assert run(sock, "import", str(export)) == 4
    assert "the answer of mcpd to mcpd/lineLimit could not be read" in capsys.readouterr().err
    assert [r["method"] for r in daemon.requests] == ["mcpd/lineLimit"]


def test_an_export_past_the_line_limit_is_refused_with_both_sizes(
    sock: Path, export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with answering(sock, mcpd_lineLimit={"maxLineBytes": 4096}) as daemon:
        assert run(sock, "import", str(export)) == 2
    size = export.stat().st_size
    err = capsys.readouterr().err
    assert f"cannot import {export}: at {size:,} bytes it makes a request longer than the " in err
    assert "4,096 bytes mcpd reads (max_line_bytes in [daemon])" in err
    assert [r["method"] for r in daemon.requests] == ["mcpd/lineLimit"]


# -- export --


def test_an_export_to_stdout_is_the_daemons_pins_as_json(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with answering(sock, mcpd_pins_export=EXPORT) as daemon:
        assert run(sock, "export") == 0
    assert json.loads(capsys.readouterr().out) == EXPORT
    assert daemon.requests[-1]["params"]["servers"] is None


def test_an_export_to_a_file_counts_what_it_wrote(
    tmp_path: Path, sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    with answering(sock, mcpd_pins_export=EXPORT):
        assert run(sock, "export", "-o", str(out)) == 0
    assert json.loads(out.read_text()) == EXPORT
    assert capsys.readouterr().out == f"mcpd: 4 pinned items of 2 server(s) in {out}\n"


def test_an_export_of_servers_with_no_pins_names_them_and_writes_nothing(
    tmp_path: Path, sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    only_mail = {"format": 1, "servers": {"mail": EXPORT["servers"]["mail"]}}
    with answering(sock, mcpd_pins_export=only_mail) as daemon:
        assert run(sock, "export", "mail", "zeta", "alpha", "-o", str(out)) == 1
    assert daemon.requests[-1]["params"]["servers"] == ["mail", "zeta", "alpha"]
    assert capsys.readouterr().err == "mcpd: no pins of alpha, zeta\n"
    assert not out.exists()


def test_an_export_with_no_daemon_says_it_cannot_reach_it(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(sock, "export") == 3
    assert str(sock) in capsys.readouterr().err


# -- forget-unreadable --


def test_forgetting_unreadable_files_says_each_removed_and_what_was_approved(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = {"removed": ["/var/lib/mcpd/pins/mail.json"], "approved": ["mail", "notes"]}
    with answering(sock, mcpd_pins_forget_unreadable=said):
        assert run(sock, "forget-unreadable") == 0
    assert capsys.readouterr().out == (
        "removed /var/lib/mcpd/pins/mail.json\n"
        "servers are approved by listing again; approved as they list now: mail, notes\n"
    )


def test_forgetting_with_nothing_unreadable_says_so(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with answering(sock, mcpd_pins_forget_unreadable={"removed": [], "approved": []}):
        assert run(sock, "forget-unreadable") == 0
    assert capsys.readouterr().out == (
        "no unreadable pin file was kept\n"
        "servers are approved by listing again; approved as they list now: none\n"
    )
