"""Reading the config file (``mcpd.config.loading.load.load``): which files are read and how
each one that cannot be is refused, in one error naming the file, without waiting on
a pipe or reading a device without end; which format a file is read as; and errors
in its text naming the line or the key. (What a config's keys mean and how they are
checked is in test_load_keys.py and its neighbours.)"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mcpd.config.loading import load as config_load
from mcpd.config.loading.load import load
from mcpd.config.tables.model import ConfigError

TOML = b'[daemon]\ncall_timeout = 5.0\n\n[servers.notes]\ncommand = "notes-server"\n'
JSON = b'{"mcpServers": {"notes": {"command": "notes-server"}}}'


def written(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def said(error: ConfigError) -> str:
    """What an error says of the key, the file it names apart."""
    assert error.file
    return str(error).removeprefix(f"{error.file}: ")


def refusal(path: Path | str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    assert caught.value.path == ""  # about the file, not a key in it
    return str(caught.value)


def test_a_toml_file_loads_and_names_itself_as_the_source(tmp_path: Path) -> None:
    path = written(tmp_path, "mcpd.toml", TOML)
    config = load(path, env={})
    assert config.daemon.call_timeout == 5.0
    assert config.servers["notes"].command == "notes-server"
    assert config.source == str(path)


def test_a_file_named_relatively_names_its_absolute_path_as_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its source is what every sandbox hides: resolved where it is read, as it is read.
    written(tmp_path, "mcpd.toml", TOML)
    monkeypatch.chdir(tmp_path)
    assert load("mcpd.toml", env={}).source == str(tmp_path / "mcpd.toml")
    assert load(Path("./mcpd.toml"), env={}).source == str(tmp_path / "mcpd.toml")


@pytest.mark.parametrize("name", ["servers.json", "servers.conf"])
def test_another_hosts_json_loads_by_its_suffix_or_its_first_brace(
    tmp_path: Path, name: str
) -> None:
    path = written(tmp_path, name, b"\n  " + JSON)
    assert load(path, env={}).servers["notes"].command == "notes-server"


def test_an_empty_file_is_the_default_config(tmp_path: Path) -> None:
    assert load(written(tmp_path, "empty.toml", b""), env={}).servers == {}


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    assert refusal(path) == f"config file {str(path)!r} not found"
    assert "not found" in refusal(tmp_path / "no-dir" / "mcpd.toml")


def test_a_dangling_symlink_is_a_missing_file(tmp_path: Path) -> None:
    link = tmp_path / "mcpd.toml"
    link.symlink_to(tmp_path / "gone.toml")
    assert "not found" in refusal(link)


def test_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "mcpd.toml"
    folder.mkdir()
    message = refusal(folder)
    assert str(folder) in message and "directory" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = written(tmp_path, "mcpd.toml", TOML)
    path.chmod(0)
    message = refusal(path)
    assert str(path) in message and "Permission denied" in message


def test_a_fifo_is_refused_at_once_rather_than_waited_on(tmp_path: Path) -> None:
    # Opening a FIFO for reading waits for a writer: the loading (the daemon's, on a
    # reload) would hang. A writer opened here only if the load does block, so the
    # test ends either way.
    fifo = tmp_path / "mcpd.toml"
    os.mkfifo(fifo)
    done = threading.Event()

    def unblock() -> None:
        if not done.wait(10):
            with open(os.open(fifo, os.O_WRONLY), "wb") as w:
                w.write(TOML)

    helper = threading.Thread(target=unblock)
    helper.start()
    try:
        message = refusal(fifo)
    finally:
        done.set()
        helper.join()
    assert str(fifo) in message and "not a regular file" in message


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_symlink_to_a_device_is_refused_without_reading_it(tmp_path: Path, device: str) -> None:
    link = tmp_path / "mcpd.toml"
    link.symlink_to(device)
    message = refusal(link)
    assert str(link) in message and "not a regular file" in message


def test_a_file_of_gigabytes_is_refused_without_being_read(tmp_path: Path) -> None:
    path = tmp_path / "mcpd.toml"
    with open(path, "wb") as f:
        f.truncate(4 << 30)  # sparse: nothing is written, nothing need be read
    message = refusal(path)
    assert str(path) in message and "larger than" in message


def test_a_file_just_over_the_limit_is_refused_and_one_at_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_load, "MAX_CONFIG_BYTES", len(TOML))
    assert load(written(tmp_path, "at.toml", TOML), env={}).daemon.call_timeout == 5.0
    assert "larger than" in refusal(written(tmp_path, "over.toml", TOML + b"\n"))


def test_a_file_that_is_not_utf8_is_refused_naming_it(tmp_path: Path) -> None:
    message = refusal(written(tmp_path, "mcpd.toml", b'[daemon]\nsocket = "\xff\xfe"\n'))
    assert "mcpd.toml" in message and "not valid TOML" in message
    utf16 = '{"mcpServers": {}}'.encode("utf-16")
    assert "UTF-8" in refusal(written(tmp_path, "servers.json", utf16))


@pytest.mark.parametrize(("name", "data"), [("mcpd.toml", TOML), ("servers.json", JSON)])
def test_a_byte_order_mark_as_some_editors_write_is_not_part_of_the_text(
    tmp_path: Path, name: str, data: bytes
) -> None:
    path = written(tmp_path, name, b"\xef\xbb\xbf" + data)
    assert load(path, env={}).servers["notes"].command == "notes-server"


def test_json_with_a_byte_order_mark_and_no_suffix_is_still_json(tmp_path: Path) -> None:
    path = written(tmp_path, "servers", b"\xef\xbb\xbf" + JSON)
    assert load(path, env={}).servers["notes"].command == "notes-server"


def test_a_toml_error_names_the_file_and_its_line(tmp_path: Path) -> None:
    text = b'[daemon]\ncall_timeout = 5.0\n\n[servers.notes\ncommand = "x"\n'
    message = refusal(written(tmp_path, "mcpd.toml", text))
    assert message.startswith(f"{tmp_path / 'mcpd.toml'}: not valid TOML")
    assert "line 4" in message


def test_a_repeated_key_is_a_toml_error_naming_its_line(tmp_path: Path) -> None:
    text = b"[daemon]\ncall_timeout = 5.0\ncall_timeout = 6.0\n"
    assert "line 3" in refusal(written(tmp_path, "mcpd.toml", text))


def test_a_json_error_names_the_file_and_its_line(tmp_path: Path) -> None:
    message = refusal(written(tmp_path, "servers.json", b'{"mcpServers": {\n  "a": [}\n}'))
    assert "servers.json" in message and "line 2" in message


def _deep_toml(levels: int) -> dict[str, bytes]:
    return {
        "arrays": b"x = " + b"[" * levels + b"]" * levels + b"\n",
        "inline tables": b"x = " + b"{a = " * levels + b"1" + b"}" * levels + b"\n",
        "dotted keys": b"[" + b".".join([b"a"] * levels) + b"]\nx = 1\n",
        "server table": (
            b'[servers.s]\ncommand = "x"\nargs = ' + b"[" * levels + b"]" * levels + b"\n"
        ),
    }


@pytest.mark.parametrize("shape", list(_deep_toml(1)))
@pytest.mark.parametrize("levels", [150, 5000])
def test_toml_nested_too_deeply_is_refused_naming_the_file(
    tmp_path: Path, shape: str, levels: int
) -> None:
    path = written(tmp_path, "deep.toml", _deep_toml(levels)[shape])
    assert refusal(path) == f"{path}: nested more than 100 levels deep"


@pytest.mark.parametrize("levels", [150, 900, 100_000])
def test_json_nested_too_deeply_is_refused_naming_the_file(tmp_path: Path, levels: int) -> None:
    text = b'{"mcpServers": {"a": {"command": "x"}}, "z": ' + b"[" * levels + b"]" * levels + b"}"
    path = written(tmp_path, "deep.json", text)
    message = refusal(path)
    assert message.startswith(f"{path}: ") and "nested more than 100 levels deep" in message


@pytest.mark.parametrize(
    ("toml", "path"),
    [
        (b'[daemon]\nsocket = "/run/a\\u0000b.sock"\n', "daemon.socket"),
        (b'[daemon]\nstate_dir = "/var/a\\u0000b"\n', "daemon.state_dir"),
        (b'[daemon]\nallow_groups = ["wheel\\u0000"]\n', "daemon.allow_groups[0]"),
        (
            b'[servers.s]\ncommand = "x"\n[profiles.p]\nsocket = "/run/p.sock"\n'
            b'allow_groups = ["a\\u0000"]\n',
            "profiles.p.allow_groups[0]",
        ),
        (b'[profiles.p]\nsocket = "/run/p\\u0000.sock"\n', "profiles.p.socket"),
    ],
)
def test_a_daemon_path_or_group_with_a_nul_is_named(tmp_path: Path, toml: bytes, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(written(tmp_path, "mcpd.toml", toml), env={})
    assert (caught.value.path, caught.value.message) == (
        path,
        "contains a NUL character, which the system cannot pass on",
    )


def test_a_bad_value_names_its_key_path(tmp_path: Path) -> None:
    path = written(tmp_path, "mcpd.toml", b'[daemon]\ncall_timeout = "soon"\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    assert caught.value.path == "daemon.call_timeout"


@pytest.mark.parametrize("key", ["a\\u0000b", "\\u001b[2J", "line\\nbreak"])
def test_a_key_with_control_characters_is_an_unknown_key_named_as_written(
    tmp_path: Path, key: str
) -> None:
    path = written(tmp_path, "mcpd.toml", f'[daemon]\n"{key}" = 1\n'.encode())
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    decoded = key.encode().decode("unicode_escape")
    assert caught.value.path == f"daemon.{decoded}"
    assert caught.value.message.startswith("unknown key; daemon takes ")


def test_variables_come_from_the_environment_given(tmp_path: Path) -> None:
    path = written(tmp_path, "mcpd.toml", b'[servers.notes]\ncommand = "${NOTES_BIN}"\n')
    config = load(path, env={"NOTES_BIN": "/opt/notes"})
    assert config.servers["notes"].command == "/opt/notes"
    assert config.variables == {"notes": ["NOTES_BIN"]}


@pytest.mark.parametrize("mode", [0o666, 0o646, 0o602], ids=oct)
def test_a_config_every_user_may_write_is_refused_since_it_says_what_runs(
    tmp_path: Path, mode: int
) -> None:
    path = written(tmp_path, "mcpd.toml", TOML)
    path.chmod(mode)
    message = refusal(path)
    assert "config file not trusted" in message and "every user" in message
    assert f"chmod go-w {path}" in message


def test_a_config_in_a_directory_every_user_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    path = written(shared, "mcpd.toml", TOML)
    message = refusal(path)
    assert "config file not trusted" in message and f"the directory {shared}" in message


def test_an_error_shows_a_value_from_the_environment_or_a_secret_file_as_its_reference(
    tmp_path: Path,
) -> None:
    # Whoever reads the config's state reads its errors, and any value may be a password.
    path = written(tmp_path, "mcpd.toml", b'[daemon]\nallow_groups = ["${LISTEN}"]\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={"LISTEN": "hunter2/Zq9-SECRET"})
    assert said(caught.value) == "daemon.allow_groups[0]: no group named '${LISTEN}'"
    secret = written(tmp_path, "listen", b"hunter2/Zq9-SECRET\n")
    secret.chmod(0o600)
    path.write_text(f'[daemon]\nallow_groups = ["${{file:{secret}}}"]\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    assert "hunter2" not in said(caught.value)
    assert "named '[secret of daemon.allow_groups[0]]'" in said(caught.value)


@pytest.mark.parametrize(
    "value", ["s3cr\\et'Val\"ue", "s3cr3t\tValue", "s3cr3t'Value", "p\u00e4ss\u202eword-Zq9"]
)
def test_a_value_an_error_quotes_with_escapes_is_shown_as_its_reference_too(
    tmp_path: Path, value: str
) -> None:
    path = written(tmp_path, "mcpd.toml", b'[daemon]\nallow_groups = ["${LISTEN}"]\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={"LISTEN": value})
    message = said(caught.value)
    assert "${LISTEN}" in message
    for part in ("s3cr", "Val", "ss", "word"):
        assert part not in message


# A token longer than any quote of an error's text: 263 of its characters fit in one.
LONG_TOKEN = "Zq9x" * 100 + "Z"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://mcp.example.com:99999/v1/${API_TOKEN}/mcp", "its port is not a number"),
        ("https://:8443/v1/${API_TOKEN}/mcp", "has no host"),
    ],
)
def test_a_value_an_error_cuts_shows_no_part_of_itself(tmp_path: Path, url: str, why: str) -> None:
    path = written(tmp_path, "mcpd.toml", f'[servers.api]\nurl = "{url}"\n'.encode())
    with pytest.raises(ConfigError) as caught:
        load(path, env={"API_TOKEN": LONG_TOKEN})
    message = said(caught.value)
    assert message.startswith("servers.api.url: ") and why in message
    assert "/v1/${API_TOKEN}/mcp" in message
    assert "Zq9" not in message and "more characters" not in message


@pytest.mark.parametrize(
    "value",
    [
        "Zq9\u3164cdefgh",  # a Hangul filler: printable to Python, escaped by a quote
        "Zq9\ufe00cdefgh",  # a variation selector, alike
        'Zq9"cd\x01efgh',  # a quote and a control character together
    ],
)
def test_a_value_an_error_quotes_with_escapes_of_its_own_shows_no_part_of_itself(
    tmp_path: Path, value: str
) -> None:
    path = written(tmp_path, "mcpd.toml", b'[servers.api]\nurl = "https://:8443/${API_TOKEN}"\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={"API_TOKEN": value})
    message = said(caught.value)
    assert '"https://:8443/${API_TOKEN}" has no host' in message
    assert "Zq9" not in message and "efgh" not in message


@pytest.mark.parametrize(
    ("toml", "shown"),
    [
        # Python writes the whole string in single quotes for its '"', so the value's "'"
        # is escaped, as it would not be in the value alone.
        (
            b'[daemon]\nallow_groups = ["\\"${LISTEN}"]\n',
            "daemon.allow_groups[0]: no group named '\"${LISTEN}'",
        ),
        # A value msgspec refuses, written by msgspec.
        (
            b'[servers.s]\ncommand = "x"\nsandbox = "\\"${LISTEN}"\n',
            "servers.s.sandbox: Invalid enum value: a string of 11 characters",
        ),
    ],
)
def test_a_value_python_quotes_inside_a_string_shows_no_part_of_itself(
    tmp_path: Path, toml: bytes, shown: str
) -> None:
    path = written(tmp_path, "mcpd.toml", toml)
    with pytest.raises(ConfigError) as caught:
        load(path, env={"LISTEN": "Zq9'cdefgh"})
    message = said(caught.value)
    assert message.startswith(shown)
    assert "Zq9" not in message and "efgh" not in message


def test_a_value_a_urls_shown_part_ends_inside_shows_no_part_of_itself(tmp_path: Path) -> None:
    # Where a URL is shown, its query is left off: here, the value's end.
    path = written(tmp_path, "mcpd.toml", b'[servers.api]\nurl = "https://:8443/${API_TOKEN}"\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={"API_TOKEN": "Zq9cdefgh?ijklmn"})
    message = said(caught.value)
    assert message == 'servers.api.url: URL "https://:8443/${API_TOKEN}" has no host'


def test_a_value_an_error_holds_as_it_is_is_shown_as_its_reference(tmp_path: Path) -> None:
    path = written(tmp_path, "mcpd.toml", b'[naming]\ntemplate = "{tool}{${NAMING}}"\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={"NAMING": "Zq9cdefgh"})
    assert said(caught.value) == "naming.template: unknown placeholder {${NAMING}}"


def test_an_error_in_the_file_names_the_file_first(tmp_path: Path) -> None:
    path = written(tmp_path, "mcpd.toml", b'[servers.notes]\ncomand = "x"\n')
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    said = 'servers.notes.comand: unknown key; did you mean "command"?'
    assert str(caught.value) == f"{path}: {said}"
    assert (caught.value.file, caught.value.path) == (str(path), "servers.notes.comand")
