"""Loading the config file: TOML (or another host's JSON) decoded into the model's
frozen structs, every error naming its key.

``${VAR}`` and ``${VAR:-default}`` expand from the environment in any string value
(``$$`` is a literal ``$``), and ``${file:PATH}`` reads a secret file (``expand``).
Unknown keys are errors, so a typo never silently turns a setting off. A reference
that cannot be resolved inside an enabled server's table is not: that server gets it
as its ``unresolved`` reason and does not start, and the others run.
"""

from __future__ import annotations

import codecs
import os
import stat
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path

import msgspec

from protocol.shown.stand_ins import masking

from ...local.ownership.trusted_path import untrusted_file
from ..checks.all_tables import config_errors
from ..checks.servers import misplaced_keys
from ..credentials.held import held_in
from ..tables.model import MAX_CONFIG_BYTES, Config, ConfigError, key_as_written
from ..tables.profiles import ProfileConfig
from ..tables.servertable import ServerConfig
from .expand import (
    FoundSecrets,
    References,
    ServerTable,
    Unresolved,
    expand,
    expand_server,
    expand_tree,
    stand_ins,
)
from .nesting import nests_too_deep, too_deep_to_read
from .toml_errors import syntax_error
from .validation import SET_BY_MCPD, validation_error

__all__ = ["Unresolved", "expand", "load", "parse_config", "said_of", "validate"]


def parse_config(
    data: Mapping[str, object], env: Mapping[str, str] | None = None, source: str = ""
) -> Config:
    env = os.environ if env is None else env
    for key in sorted(SET_BY_MCPD - {"unresolved"}):
        if key in data:
            raise ConfigError(key, "unknown key")
    servers = data.get("servers")
    refs = References()
    found: FoundSecrets = []
    expanded = {k: expand_tree(v, k, env, refs, found) for k, v in data.items() if k != "servers"}
    tables: dict[str, ServerTable] = {}
    if isinstance(servers, dict):
        # Each server on its own: what one of them lacks on this machine is its problem.
        tables = {
            a: expand_server(b, f"servers.{key_as_written(a)}", env, found)
            for a, b in servers.items()
        }
        expanded["servers"] = {a: t.body for a, t in tables.items()}
    elif servers is not None:
        expanded["servers"] = servers
    expanded["source"] = source
    variables = {a: sorted(t.variables) for a, t in tables.items() if t.variables}
    if refs.names:
        variables[""] = sorted(refs.names)
    expanded["variables"] = variables
    expanded["secret_files"] = sorted(refs.files.union(*(t.files for t in tables.values())))
    names = refs.names.union(*(t.variables for t in tables.values()))
    read_from = dict(refs.read_from)
    for table in tables.values():
        read_from.update(table.read_from)
    # The errors of the checks show no value a reference gave, whole or in part.
    with masking(stand_ins(names, env, found)):
        try:
            config = _checked(expanded, tables)
        except ConfigError as exc:
            raise _saying_files(exc, read_from) from None
    return msgspec.structs.replace(config, held_secrets=held_in(config, found))


def _saying_files(error: ConfigError, read_from: Mapping[str, str]) -> ConfigError:
    """``error`` and those found with it, each about a value a secret file gave saying
    the file: the key's name alone leaves whoever reads it to find which file it was."""
    more = [_saying_files(e, read_from) for e in error.more]
    file = read_from.get(error.path)
    message = error.message if file is None else f"{error.message} (read from {file!r})"
    return type(error)(error.path, message, error.file, more)


def said_of(config: Config, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a sentence about ``config`` writes for each value a reference gave it, as
    its errors were written (``parse_config``): what is said of a config once it is read
    (``mcpd check-config``: a path not there, a grant) reaches whoever read its errors.
    ``env``: the one it was read with."""
    env = os.environ if env is None else env
    names = set().union(*config.variables.values())
    return stand_ins(names, env, config.held_secrets)


def _checked(expanded: dict[str, object], tables: Mapping[str, ServerTable]) -> Config:
    """The expanded config as the model's structs, every check passed."""
    _check_servers(expanded.get("servers"))
    profiles = expanded.get("profiles")
    if isinstance(profiles, dict):  # each on its own, so an error names the profile
        for name, body in profiles.items():
            _convert_at(body, ProfileConfig, f"profiles.{name}")
    try:
        config = msgspec.convert(expanded, Config)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, expanded) from None
    unresolved = {a: t.unresolved for a, t in tables.items() if t.unresolved is not None}
    if unresolved:
        servers_ = {
            a: msgspec.structs.replace(s, unresolved=unresolved[a]) if a in unresolved else s
            for a, s in config.servers.items()
        }
        config = msgspec.structs.replace(config, servers=servers_)
    validate(config, {a: t.unknown for a, t in tables.items()})
    return config


def _check_servers(servers: object) -> None:
    """msgspec names a table key only as ``[...]``: check each server (and each of its
    env/headers values) on its own, so an error names the alias and the key."""
    if not isinstance(servers, dict):
        return
    for alias, body in servers.items():
        where = f"servers.{key_as_written(alias)}"
        for table, type_ in (("env", str), ("headers", str), ("tool_timeouts", float)):
            items = body.get(table) if isinstance(body, dict) else None
            if isinstance(items, dict):
                for key, value in items.items():
                    _convert_at(value, type_, f"{where}.{table}.{key}")
        for kind in ("tools", "prompts"):
            rules = body.get(kind) if isinstance(body, dict) else None
            for table in ("rename", "description"):
                items = rules.get(table) if isinstance(rules, dict) else None
                if isinstance(items, dict):
                    for key, value in items.items():
                        _convert_at(value, str, f"{where}.{kind}.{table}.{key}")
        if isinstance(body, dict) and "unresolved" in body:  # set by mcpd, not a config key
            raise ConfigError(f"{where}.unresolved", "unknown key")
        _convert_at(body, ServerConfig, where)
        if isinstance(body, dict) and ("command" in body) != ("url" in body):
            stdio, lazy = "command" in body, body.get("start") == "lazy"
            for error in misplaced_keys(where, body, stdio=stdio, lazy=lazy):
                raise error


def _convert_at(value: object, type_: type[object], where: str) -> None:
    try:
        msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, value, where, type_) from None


def validate(config: Config, unexpanded: Mapping[str, Collection[str]] | None = None) -> None:
    """Raise the config's first error, carrying every other it has (``config_errors``).
    ``unexpanded``: per server, the key paths whose values were left as written."""
    errors = config_errors(config, unexpanded)
    if errors:
        raise errors[0].with_more(errors[1:])


def _read(p: Path) -> bytes:
    try:
        # Opened without waiting: a FIFO would hold the loading (and a reload, with the
        # daemon in it) until something wrote to it.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            # Checked on the open file, so what is checked is what is read.
            st = os.fstat(f.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise ConfigError("", f"cannot read {str(p)!r}: it is a directory")
            if not stat.S_ISREG(st.st_mode):  # a device such as /dev/zero never ends
                raise ConfigError("", f"config file {str(p)!r} is not a regular file")
            # The config says which commands mcpd runs as its user: a file someone
            # else could have written would run theirs.
            untrusted = untrusted_file(str(p), st)
            if untrusted is not None:
                raise ConfigError("", f"config file not trusted: {untrusted}")
            too_large = f"config file {str(p)!r} is larger than {MAX_CONFIG_BYTES} bytes"
            if st.st_size > MAX_CONFIG_BYTES:
                raise ConfigError("", too_large)
            text = f.read(MAX_CONFIG_BYTES + 1)  # it may have grown since
    except FileNotFoundError:
        raise ConfigError("", f"config file {str(p)!r} not found") from None
    except OSError as exc:
        raise ConfigError("", f"cannot read {str(p)!r}: {exc.strerror}") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError("", too_large)
    # Some editors start UTF-8 text with a byte order mark; neither TOML nor JSON
    # parsers take it.
    return text.removeprefix(codecs.BOM_UTF8)


def load(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    """The config in the file at ``path``, whose ``source`` is that file's absolute
    path: a relative one is resolved against the working directory as it is read, so
    that what every sandbox hides is the file that was read."""
    p = Path(path).absolute()
    text = _read(p)
    if p.suffix == ".json" or text.lstrip()[:1] == b"{":
        # Another host's mcpServers file, used as it is. The importer (and json) only
        # then: a daemon started on TOML does without them.
        from ..importing.served import config_from_json

        return _parsed_in(p, config_from_json(text, str(p)), env)
    try:
        decoded = text.decode("utf-8")
        data = tomllib.loads(decoded)
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{p}: not valid TOML: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("", f"{p}: not valid TOML: {syntax_error(decoded, str(exc))}") from None
    except RecursionError:  # arrays or inline tables within each other, past any bound
        raise ConfigError("", too_deep_to_read(str(p))) from None
    if nests_too_deep(data):
        raise ConfigError("", too_deep_to_read(str(p)))
    return _parsed_in(p, data, env)


def _parsed_in(p: Path, data: Mapping[str, object], env: Mapping[str, str] | None) -> Config:
    try:
        return parse_config(data, env, source=str(p))
    except ConfigError as exc:
        raise exc.in_file(str(p)) from None
