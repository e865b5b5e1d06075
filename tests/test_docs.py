"""The manual pages and the configuration reference say what the code has: every
command and option of the parser in mcpd(1), every key of the config model in
mcpd.toml(5) and docs/configuration.md, and nothing that is gone."""

from __future__ import annotations

import argparse
import re
import types
import typing
from pathlib import Path

import msgspec
import pytest

from mcpd.cli.main import build_parser
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config, ConfigError

ROOT = Path(__file__).resolve().parent.parent
MAN1 = ROOT / "man" / "mcpd.1"
MAN5 = ROOT / "man" / "mcpd.toml.5"
CONFIG_MD = ROOT / "docs" / "configuration.md"
# Struct fields mcpd sets itself, which a config file may not: (table, key).
NOT_KEYS = {("", "source"), ("", "held_secrets"), ("servers.*", "unresolved")}
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")

# -- the command line --


def commands(
    parser: argparse.ArgumentParser, name: str = "mcpd"
) -> dict[str, argparse.ArgumentParser]:
    """Every command that runs, by its full name (``mcpd auth login``); a command made
    of subcommands only is not one itself."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {name: parser}
    found = {} if name != "mcpd" else {name: parser}
    for sub in subs:
        for word, child in sub.choices.items():
            found.update(commands(child, f"{name} {word}"))
    return found


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        o
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction)
        for o in a.option_strings
    }


def plain(roff: str) -> str:
    """Roff text without its escapes, as a reader sees it."""
    text = re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-").replace("\\e", "\\")
    return re.sub(r"^\.[A-Z]{1,2}\s?", "", text, flags=re.M).replace('"', "")


def man_sections(path: Path) -> dict[str, str]:
    """``.SS`` (and ``.SH``) titles of a manual page and the roff text under each."""
    sections: dict[str, str] = {}
    title = ""
    for line in path.read_text().splitlines():
        m = re.match(r"^\.S[SH]\s+(.*)$", line)
        if m:
            title = plain(m.group(1)).strip()
            sections[title] = ""
        elif title:
            sections[title] += line + "\n"
    return sections


def tagged(roff: str) -> list[str]:
    """The tag lines of the ``.TP`` items: what each item is about."""
    lines = roff.splitlines()
    return [plain(lines[i + 1]) for i, line in enumerate(lines[:-1]) if line.strip() == ".TP"]


def test_every_command_and_option_is_in_mcpd_1() -> None:
    sections = man_sections(MAN1)
    wanted = commands(build_parser())
    problems = []
    for name, parser in sorted(wanted.items()):
        title = name if name != "mcpd" else "OPTIONS"
        if title not in sections:
            problems.append(f"command {name!r} has no section in man/mcpd.1")
            continue
        have = options(parser) - {"-h", "--help"}
        told = {o for tag in tagged(sections[title]) for o in _OPTION.findall(tag)}
        problems += [f"{name} {o}: not in man/mcpd.1" for o in sorted(have - told)]
        problems += [f"{name} {o}: in man/mcpd.1, but no such option" for o in sorted(told - have)]
        text = plain(sections[title])
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue  # its commands have sections of their own
            if not action.option_strings:
                shown = str(action.metavar or action.dest).upper()
                if shown not in text.upper():
                    problems.append(f"{name}: its argument {shown} is not in man/mcpd.1")
            for choice in action.choices or ():
                if isinstance(choice, str) and choice not in text:
                    problems.append(f"{name}: the choice {choice!r} is not in man/mcpd.1")
    for title in sections:
        if title.startswith("mcpd ") and title not in wanted:
            problems.append(f"man/mcpd.1 has a section {title!r}, which is no command")
    assert not problems, "\n".join(problems)


# -- the configuration --


def _struct_of(annotation: object) -> tuple[type[msgspec.Struct] | None, bool]:
    """The Struct a field holds (directly, optionally, or as a table of them), and
    whether it is a table keyed by name."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return annotation, False
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            struct, named = _struct_of(arg)
            if struct is not None:
                return struct, named
    if origin is dict:
        struct, _ = _struct_of(typing.get_args(annotation)[1])
        return struct, struct is not None
    if origin is list:  # an array of tables ([[policy]]), documented as one table
        struct, _ = _struct_of(typing.get_args(annotation)[0])
        return struct, False
    return None, False


def config_keys(cls: type[msgspec.Struct] = Config, table: str = "") -> dict[str, set[str]]:
    """Every table of the config (``servers.*.auth``) with its keys; a key that holds a
    table is one of its parent's keys and a table of its own."""
    tables: dict[str, set[str]] = {}
    hints = typing.get_type_hints(cls)
    for name in msgspec.structs.fields(cls):
        key = name.encode_name
        if (table, key) in NOT_KEYS:
            continue
        struct, named = _struct_of(hints[name.name])
        if table:
            tables.setdefault(table, set()).add(key)
        if struct is not None:
            inner = ".".join(p for p in (table, key, "*" if named else "") if p)
            for t, keys in config_keys(struct, inner).items():
                tables.setdefault(t, set()).update(keys)
    return tables


def _table_name(text: str) -> str:
    """``[servers.ALIAS.tools]`` -> ``servers.*.tools``."""
    return ".".join("*" if p.isupper() else p for p in text.strip("[]").split("."))


def documented_in_markdown() -> dict[str, set[str]]:
    reference = CONFIG_MD.read_text().split("\n## Reference\n", 1)[1]
    found: dict[str, set[str]] = {}
    for section in reference.split("\n### ")[1:]:
        title, body = section.split("\n", 1)
        keys = set(re.findall(r"^\| `([^`]+)` \|", body, re.M))
        for name in re.findall(r"`(\[[^`]+\])`", title):
            found.setdefault(_table_name(name), set()).update(keys)
    return found


def documented_in_man() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for title, body in man_sections(MAN5).items():
        keys = {tag.split()[0] for tag in tagged(body) if tag.strip()}
        for name in re.findall(r"\[[^\]]+\]", title):
            found.setdefault(_table_name(name), set()).update(keys)
    return found


def test_the_walk_finds_the_tables_and_keys_it_must() -> None:
    """A walk that missed nested or named tables would pass any document."""
    keys = config_keys()
    assert {"daemon", "naming", "servers.*", "servers.*.tools", "servers.*.auth"} <= set(keys)
    assert {"profiles.*", "profiles.*.resources", "policy", "policy.annotations"} <= set(keys)
    assert {"call_timeout", "ask_timeout", "http_origins"} <= keys["daemon"]
    assert {"tools", "auth", "relay"} <= keys["servers.*"]
    assert "unresolved" not in keys["servers.*"]


@pytest.mark.parametrize(("table", "key"), sorted(NOT_KEYS))
def test_what_the_walk_leaves_out_is_no_config_key(table: str, key: str) -> None:
    data: dict[str, object] = {key: "x"}
    if table == "servers.*":
        data = {"servers": {"a": {"command": "true", key: "x"}}}
    with pytest.raises(ConfigError, match="unknown key"):
        parse_config(data)


@pytest.mark.parametrize(
    ("where", "documented"),
    [("docs/configuration.md", documented_in_markdown), ("man/mcpd.toml.5", documented_in_man)],
)
def test_every_config_key_is_documented(where: str, documented: typing.Any) -> None:
    keys = config_keys()
    have = documented()
    problems = []
    for table, names in sorted(keys.items()):
        if table not in have:
            problems.append(f"[{table}] has no section in {where}")
            continue
        problems += [f"{table}.{k}: not in {where}" for k in sorted(names - have[table])]
        problems += [
            f"{table}.{k}: in {where}, but no such key" for k in sorted(have[table] - names)
        ]
    problems += [
        f"{where} documents [{t}], which is no table" for t in sorted(set(have) - set(keys))
    ]
    assert not problems, "\n".join(problems)


# -- links between the documents --


def _slug(heading: str) -> str:
    """The anchor a Markdown heading gets (GitHub's rule)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_between_the_documents_reaches_its_place() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = []
    for doc in docs:
        text = doc.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            linked = (doc.parent / path).resolve() if path else doc
            if not linked.exists():
                problems.append(f"{doc.name}: {target}: no such file")
                continue
            if anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", linked.read_text(), re.M)
                if anchor not in {_slug(h) for h in headings}:
                    problems.append(f"{doc.name}: {target}: no such heading")
    assert not problems, "\n".join(problems)


def test_the_readme_fits_on_a_page() -> None:
    # What it is, the two commands, using it from an agent, the commands and a map of
    # the docs; the rest lives in docs/.
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines < 300, f"README.md has {lines} lines; move what a reference holds to docs/"
