"""A config error never writes a value that may be a secret: a wrong type is said by its
kind and length, and of a line TOML cannot read only where it is and what to write. A
value whose key never holds a secret is still quoted, so the slip can be seen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpd.config.loading.load import load
from mcpd.config.tables.model import ConfigError
from tests.conftest import ROOT

SECRET = "hunter2hunter2zz"
STDIO = '[servers.x]\ncommand = "node"\n'
HTTP = '[servers.x]\nurl = "https://h.example/mcp"\n'

# Each a config that once showed its secret in the error, and what is said of it now.
LEAKED = [
    (STDIO + f'env = "API_KEY={SECRET}"\n', "servers.x.env: expected a table, got a string"),
    (HTTP + f'headers = "X-Api-Key: {SECRET}"\n', "servers.x.headers: expected a table"),
    (STDIO + f'args = "--password {SECRET}"\n', "servers.x.args: expected an array of"),
    (HTTP + f'auth = "{SECRET}"\n', "servers.x.auth: expected a table, got a string"),
    ('[servers.x]\ncommand = ["node", "--token=' + SECRET + '"]\n', "got an array of 2 items"),
    (
        HTTP + f'headers = {{ "X-Api-Key" = "{SECRET}", Other = True }}\n',
        "(at line 3, column 55); write true or false in lower case",
    ),
    (
        STDIO + f'env = {{ DB_PASS = "{SECRET}", DEBUG = yes }}\n',
        'text values need quotes: key = "..."',
    ),
    (STDIO + f'args = ["--password", "{SECRET}", True]\n', "; write true or false in lower case"),
    (
        STDIO + f'args = [\n  "--password",\n  "{SECRET}", True\n]\n',
        "(at line 5, column 23); write true",
    ),
    (STDIO + f"env.SOMETHING = {SECRET}\n", 'column 17); text values need quotes: key = "..."\n'),
    (STDIO + f"env.PASS = {SECRET}  # {SECRET}\n", "column 12); text values need quotes"),
    (STDIO + f"args = ['{SECRET}' x]\n", "Unclosed array (at line 3, column 28)\n"),
    (STDIO + f'env = {{ A = """{SECRET}""" 1 }}\n', "(at line 3, column "),
    ("[servers.x]\nurl = https://u:" + SECRET + "@h.example/mcp\n", "column 7); text values"),
]


B64 = "aHVudGVyMmh1bnRlcjJ6eg=="  # the secret as base64 writes it

# Configs TOML cannot read whose line, as a scan of it would take it, starts inside an
# open array or string, or breaks where TOML does not: no text of the file is shown.
UNREADABLE = {
    "arr_b64": STDIO + f"args = [\n  {B64},\n]\n",
    "pem": STDIO
    + '[servers.x.env]\nKEY_PEM = """-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n'
    + B64
    + '\\q\n-----END PRIVATE KEY-----"""\n',
    "ml_b64": STDIO + f'env = {{ KEY = """abc\n{B64}\\q\n""" }}\n',
    "u2028b": STDIO + f'env = {{ K = "abc\u2028{B64}" }}\nenabled = True\n',
    "crlf_ml": STDIO.replace("\n", "\r\n") + f'[servers.x.env]\r\nKEY = """abc\r\n{B64}\rZ"""\r\n',
    "hdr_like": STDIO + f'args = [\n  ["{SECRET}"]\n]\nargs = 1\n',
    "hdr_like2": STDIO + f"args = [\n  [ {SECRET} {SECRET} ]\n]\n",
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_toml_cannot_read_is_said_without_its_text(tmp_path: Path, name: str) -> None:
    out = check_config(tmp_path, UNREADABLE[name])
    assert out.returncode == 78, out.stderr
    assert "not valid TOML" in out.stderr
    for secret in (SECRET, B64, B64.rstrip("=")):
        assert secret not in out.stdout + out.stderr


# Configs with a secret written in a key that never holds one: it is said by its kind.
MISPLACED = {
    "redact_str": f'[daemon]\nredact_patterns = "{SECRET}"\n',
    "redact_srv": STDIO + f'redact_patterns = "sk-live-{SECRET}"\n',
    "auth_type": HTTP + f'[servers.x.auth]\ntype = "Bearer {SECRET}"\n',
    "auth_meth": HTTP
    + f'[servers.x.auth]\ntype = "client_credentials"\ntoken_endpoint_auth_method = "{SECRET}"\n',
}


# And in a value whose error says what is wrong with it without quoting it.
UNQUOTED = {
    "listen": f'[daemon]\nhttp_listen = "127.0.0.1:{SECRET}"\n',
    "listen2": f'[daemon]\nhttp_listen = "http://user:{SECRET}@127.0.0.1:8080"\n',
    "e6": STDIO + f'env = {{ A = "${{{SECRET}}}" }}\n',
    "e10": STDIO + f'env = {{ A = "${{HOME}} ${{{SECRET} x}}" }}\n',
}
J6 = {"servers": {"x": {"type": SECRET, "url": "https://h.example/mcp", "headers": {"A": SECRET}}}}


@pytest.mark.parametrize("name", sorted(UNQUOTED))
def test_a_value_an_error_is_about_is_not_quoted(tmp_path: Path, name: str) -> None:
    out = check_config(tmp_path, UNQUOTED[name])
    assert "daemon.http_listen: " in out.stderr or "servers.x.env.A: " in out.stderr
    assert SECRET not in out.stdout + out.stderr


def test_a_host_files_unknown_type_is_noted_without_it(tmp_path: Path) -> None:
    out = check_config(tmp_path, json.dumps(J6), "mcp.json")
    assert "servers.x.type: not a transport mcpd knows; ignored" in out.stderr
    assert SECRET not in out.stdout + out.stderr
    slip = {"servers": {"x": {"type": "htpp", "url": "https://h.example/mcp"}}}
    out = check_config(tmp_path, json.dumps(slip), "mcp.json")
    assert "servers.x.type: 'htpp' is not a transport mcpd knows (is it \"http\"?)" in out.stderr


@pytest.mark.parametrize("name", sorted(MISPLACED))
def test_a_secret_in_a_key_that_never_holds_one_is_said_by_kind(tmp_path: Path, name: str) -> None:
    out = check_config(tmp_path, MISPLACED[name])
    assert out.returncode == 78, out.stderr
    assert " characters" in out.stderr
    assert SECRET not in out.stdout + out.stderr


def check_config(
    tmp_path: Path, toml: str, name: str = "mcpd.toml"
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(toml)
    return subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MCPD_SOCKET": str(tmp_path / "s.sock")},
    )


@pytest.mark.parametrize(("toml", "said"), LEAKED)
def test_check_config_says_what_is_wrong_without_the_secret(
    tmp_path: Path, toml: str, said: str
) -> None:
    out = check_config(tmp_path, toml)
    assert out.returncode == 78, out.stderr
    assert said in out.stderr
    assert SECRET not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (STDIO + 'call_timeout = "30s"\n', 'got the string "30s"'),
        ("[daemon]\nmax_tools = true\n", "expected a whole number, got true"),
        (STDIO + 'sandbox = "strikt"\n', "value 'strikt'; did you mean \"strict\"? give one of"),
        (STDIO + 'transport = "htp"\n', "value 'htp'; did you mean \"http\"? give one of"),
        (STDIO + 'enabled = "yes"\n', 'expected true or false, got the string "yes"'),
        ('[daemon]\nredact_patterns = "Off"\n', 'expected true or false, got the string "Off"'),
        (STDIO + "trusted = True\n", "column 11); write true or false in lower case"),
    ],
)
def test_a_value_whose_key_holds_no_secret_is_still_written(
    tmp_path: Path, toml: str, said: str
) -> None:
    path = tmp_path / "mcpd.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load(path, env={})
    assert said in str(caught.value)


# Where a secret may be, and configs broken around it: in its own value or beside it.
_PLACES = [
    STDIO + "env = {s}\n",
    STDIO + "env = {{ A = {s}, B = 1 }}\n",
    STDIO + "env = {{ A = {s}, B = yes }}\n",
    STDIO + "env.A = {s} x\n",
    STDIO + "env.A = {b}\n",
    STDIO + "args = {s}\n",
    STDIO + "args = [{s}, 1]\n",
    STDIO + "args = [{s}, True]\n",
    STDIO + "args = [\n  {s}, True\n]\n",
    STDIO + "args = [{b}]\n",
    STDIO + "args = [\n  [{s}] x\n]\n",
    STDIO + "args = [\n  [{s}.{s}] x\n]\n",
    HTTP + "headers = {s}\n",
    HTTP + "headers = {{ X = {s}, Y = True }}\n",
    HTTP + "headers.X = {b}\n",
    HTTP + "auth = {s}\n",
    HTTP + "auth = {{ client_secret = {s}, x = 1 }}\n",
    HTTP + "auth = {{ client_secret = {s}, scopes = [bad] }}\n",
    "[servers.x]\nurl = {s}\ncommand = 1\n",
    "[servers.x]\nurl = {b}\n",
    "[servers.x]\nurl = {s} # {b}\n",
    STDIO + "cwd = [{s}]\n",
    STDIO + "args = [\n  {b}==,\n]\n",
    STDIO + "args = [\n  Authorization: Bearer {b}==,\n]\n",
    STDIO + 'env = {{ K = """abc\n{b}==\\q\n""" }}\n',
    STDIO + 'env = {{ K = "abc\u2028{b}==" }}\nenabled = True\n',
    STDIO + 'env = {{ K = "abc\r{b}==" }}\n',
    STDIO + "args = [\n  [{s}]\n]\nargs = 1\n",
    STDIO + "args = [\n  [ {b} {b} ]\n]\n",
    "[daemon]\nhttp_listen = {s}\n",
    '[daemon]\nhttp_listen = "127.0.0.1:{b}"\n',
    '[daemon]\nhttp_listen = "http://u:{b}@127.0.0.1:80"\n',
    "[daemon]\nredact_patterns = {s}\n",
    STDIO + "redact_patterns = {s}\n",
    STDIO + "start = {s}\n",
    HTTP + "[servers.x.auth]\ntype = {s}\n",
    HTTP + '[servers.x.auth]\ntype = "oauth"\ntoken_endpoint_auth_method = {s}\n',
    STDIO + 'env = {{ A = "${{x{b}}}" }}\n',
    STDIO + 'env = {{ A = "${{x{b} x}}" }}\n',
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(st.sampled_from("abcXYZ0189-_+/=:@.%"), min_size=12, max_size=40),
    st.sampled_from(_PLACES),
    st.sampled_from(['"{}"', "'{}'", '"""{}"""', "'''{}'''", '["{}"]', '{{ k = "{}" }}']),
)
def test_no_secret_is_written_in_any_error(
    tmp_path_factory: pytest.TempPathFactory, secret: str, place: str, quoted: str
) -> None:
    # A string of twelve or more characters is not a word the error itself may say.
    toml = place.format(s=quoted.format(secret), b=secret)
    path = tmp_path_factory.mktemp("cfg") / "mcpd.toml"
    path.write_text(toml)
    try:
        load(path, env={})
    except ConfigError as exc:
        assert secret not in str(exc), (toml, str(exc))
