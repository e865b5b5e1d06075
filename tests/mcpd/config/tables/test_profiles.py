"""Profiles: the config's checks with key paths, and a profile's view of the tool table
(servers, patterns, names of its own, discovery mode, what changes its version)."""

from __future__ import annotations

import random
import textwrap
import tomllib
from typing import Any

import msgspec
import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ConfigError, NamingConfig
from mcpd.config.tables.profiles import Patterns, ProfileConfig
from mcpd.config.tables.servertable import ToolsConfig
from mcpd.registry.naming.names import assign
from mcpd.registry.profiles.unmatched import unmatched
from mcpd.registry.profiles.views import ProfileView
from mcpd.registry.tables.catalog import Catalog
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

SERVERS = """
[servers.git]
command = "git-server"
[servers.fs]
command = "fs-server"
[servers.mail]
url = "http://127.0.0.1:9/mcp"
"""


def config(text: str) -> Any:
    return parse_config(tomllib.loads(textwrap.dedent(SERVERS + text)), env={})


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config(text)
    return info.value


# -- the config --


def test_a_full_profile_parses() -> None:
    cfg = config(
        """
        [profiles.dev]
        servers = ["git", "f*"]
        tools = { allow = ["git/*", "read_*"], deny = ["*/delete_*"] }
        prompts = { deny = ["secret*"] }
        resources = { allow = ["fs/file:///srv/*"] }
        template = "{alias}__{tool}"
        max_length = 53
        max_tools = 40
        discovery = "auto"
        pinned = ["git/git_status"]
        socket = "/tmp/mcpd-test-dev.sock"
        socket_mode = "0660"
        allow_uids = [1234]
        """
    )
    dev = cfg.profiles["dev"]
    assert dev.servers == ["git", "f*"] and dev.discovery == "auto"
    assert dev.tools.deny == ["*/delete_*"] and dev.pinned == ["git/git_status"]
    assert (dev.template, dev.max_length, dev.max_tools) == ("{alias}__{tool}", 53, 40)
    assert ProfileConfig().servers == ["*"] and ProfileConfig().discovery == "all"


@pytest.mark.parametrize(
    ("text", "path", "words"),
    [
        ('[profiles.dev]\nservers = ["gti"]', "profiles.dev.servers[0]", "not a configured"),
        ('[profiles.dev]\nservers = ["x*"]', "profiles.dev.servers[0]", "matches no server"),
        ("[profiles.dev]\nservers = []", "profiles.dev.servers", "is empty"),
        (
            '[profiles.dev]\nservers = ["git"]\ntools = { allow = ["fs/read"] }',
            "profiles.dev.tools.allow[0]",
            "not one of this profile's servers",
        ),
        ('[profiles.dev]\npinned = ["mail/"]', "profiles.dev.pinned[0]", "is empty"),
        ('[profiles.dev]\ntemplate = "{alias}"', "profiles.dev.template", "{tool}"),
        ('[profiles.dev]\ntemplate = "{x}{tool}"', "profiles.dev.template", "placeholder"),
        ("[profiles.dev]\nmax_length = 8", "profiles.dev.max_length", "between 16"),
        ("[profiles.dev]\nmax_tools = 0", "profiles.dev.max_tools", "at least 1"),
        ('[profiles.dev]\ndiscovery = "some"', "profiles.dev.discovery", "Invalid enum"),
        ("[profiles.dev]\nsearch = true", "profiles.dev.search", "unknown key"),
        ("[profiles.dev]\nallow_uids = [1]", "profiles.dev.allow_uids", "own socket"),
        ('[profiles.dev]\nsocket = "/s"\nsocket_mode = "rw"', "profiles.dev.socket_mode", "octal"),
        ('[profiles."my dev"]', "profiles.my dev", "profile name"),
        ('[profiles.default]\nsocket = "/tmp/x.sock"', "profiles.default.socket", "default"),
        (
            '[daemon]\nsocket = "/tmp/m.sock"\n[profiles.a]\nsocket = "/tmp/m.sock"',
            "profiles.a.socket",
            "daemon's own socket",
        ),
        (
            '[profiles.a]\nsocket = "/tmp/p.sock"\n[profiles.b]\nsocket = "/tmp/p.sock"',
            "profiles.b.socket",
            "profile 'a'",
        ),
    ],
)
def test_profile_errors_name_the_key(text: str, path: str, words: str) -> None:
    err = error_of(text)
    assert err.path == path, err
    assert words in err.message, err


def test_the_http_endpoint_is_loopback_unless_the_config_says_otherwise() -> None:
    assert config('[daemon]\nhttp_listen = "127.0.0.1:8765"').daemon.http_listen
    assert config('[daemon]\nhttp_listen = "[::1]:0"').daemon.http_listen
    assert config('[daemon]\nhttp_listen = "localhost:80"').daemon.http_listen
    err = error_of('[daemon]\nhttp_listen = "0.0.0.0:8765"')
    assert err.path == "daemon.http_listen" and "http_allow_remote" in err.message
    opened = config('[daemon]\nhttp_listen = "0.0.0.0:8765"\nhttp_allow_remote = true')
    assert opened.daemon.http_allow_remote
    for bad in ("8765", "127.0.0.1:", "127.0.0.1:99999", ":80"):
        assert error_of(f'[daemon]\nhttp_listen = "{bad}"').path == "daemon.http_listen"
    err = error_of('[daemon]\nhttp_origins = ["localhost:3000"]')
    assert err.path == "daemon.http_origins[0]"


# -- the view --


def tool(name: str, description: str = "", **props: str) -> mcp.Tool:
    schema = {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
    }
    return mcp.Tool(
        name=name, description=description, inputSchema=msgspec.Raw(msgspec.json.encode(schema))
    )


def table() -> Catalog:
    r = Catalog(NamingConfig())
    r.update(
        "git",
        [
            tool("git_status", "Shows the working tree status"),
            tool("git_log", "Shows the commit logs"),
            tool("git_delete_branch", "Deletes a branch"),
        ],
    )
    r.update(
        "fs",
        [
            tool("read_file", "Read a file"),
            tool("write_file", "Write a file"),
            tool("delete_file", "Delete a file"),
        ],
    )
    r.update("mail", [tool("send_mail", "Send an email"), tool("read_inbox", "Read mail")])
    return r


HOSTED: dict[str, Any] = {"template": "{alias}__{tool}", "max_length": 53}


def view(registry: Catalog, **profile: Any) -> ProfileView:
    v = ProfileView("p", registry)
    v.configure(msgspec.convert(profile, ProfileConfig), registry.naming, 128)
    return v


def names(v: ProfileView) -> list[str]:
    return [msgspec.json.decode(rpc.encode(item))["name"] for item in v.listing()]


def test_servers_and_patterns_choose_the_tools() -> None:
    r = table()
    assert view(r).identity and view(r).listing() is r.listing()
    assert names(view(r, servers=["git"])) == [
        "mcp__git__git_delete_branch",
        "mcp__git__git_log",
        "mcp__git__git_status",
    ]
    assert names(view(r, tools={"allow": ["read_*"]})) == [
        "mcp__fs__read_file",
        "mcp__mail__read_inbox",
    ]
    assert names(view(r, tools={"allow": ["fs/*"], "deny": ["*delete*"]})) == [
        "mcp__fs__read_file",
        "mcp__fs__write_file",
    ]
    deny_everywhere = names(view(r, servers=["*"], tools={"deny": ["*/*delete*", "mail/*"]}))
    assert deny_everywhere == [
        "mcp__fs__read_file",
        "mcp__fs__write_file",
        "mcp__git__git_log",
        "mcp__git__git_status",
    ]
    v = view(r, servers=["g*"])
    assert v.lookup("mcp__git__git_log") is r.lookup("mcp__git__git_log")
    assert v.lookup("mcp__fs__read_file") is None  # another profile's tool is not callable
    assert v.closest("mcp__git__git_lg")[0] == "mcp__git__git_log"
    assert all(n.startswith("mcp__git__") for n in v.closest("mcp__fs__read_fil"))


def test_patterns_see_renamed_names_and_calls_reach_the_servers_own() -> None:
    r = table()
    r.set_rules("fs", ToolsConfig(rename={"read_file": "cat"}))
    v = view(r, **HOSTED, tools={"allow": ["cat"]})
    assert names(v) == ["fs__cat"]
    entry = v.lookup("fs__cat")
    assert entry is not None and (entry.alias, entry.original, entry.name) == (
        "fs",
        "read_file",
        "cat",
    )
    listed = msgspec.json.decode(rpc.encode(v.listing()[0]))
    assert listed["description"] == "[fs] Read a file"
    assert listed["_meta"]["mcpd/originalName"] == "read_file"


def test_a_profile_for_a_prefixing_host_fits_64_characters() -> None:
    r = table()
    r.update(
        "a_server_with_a_long_alias", [tool("a_tool_with_a_rather_long_name_indeed_" + "x" * 20)]
    )
    v = view(r, **HOSTED)
    assert "git__git_status" in names(v)
    assert all(len("mcp__mcpd__" + n) <= 64 for n in names(v))
    long = [n for n in names(v) if n.startswith("a_server")]
    assert len(long) == 1 and len(long[0]) == 53 and long[0][-7] == "_"  # cut and hashed
    # The table keeps its own names: the profile's are its own.
    assert r.lookup("mcp__git__git_status") is not None and v.lookup("mcp__git__git_status") is None


def test_names_from_scratch_equal_the_tables() -> None:
    rng = random.Random(5)
    for _ in range(30):
        naming = NamingConfig(
            template=rng.choice(["{alias}__{tool}", "{tool}", "x.{tool}"]),
            max_length=rng.choice([16, 20, 64]),
        )
        r = Catalog(naming)
        keys = []
        for alias in ("a", "b", "a_b"):
            tools = {
                rng.choice(["t", "t.1", "t_1", "tool_" * rng.randint(1, 4), "b__t"])
                for _ in range(4)
            }
            r.update(alias, [tool(t) for t in tools])
            keys += [(alias, t) for t in tools]
        got = assign(naming, keys)
        for key, local in got.items():
            entry = r.lookup(local)
            assert entry is not None and (entry.alias, entry.original) == key, (naming, key)
        assert len(set(got.values())) == len(got)


def test_version_moves_only_for_changes_this_profile_sees() -> None:
    r = table()
    git = view(r, servers=["git"])
    own = view(r, **HOSTED, servers=["git"])
    every = view(r)
    before = (git.sync(), own.sync(), every.sync())
    r.set_availability("mail", False, "unavailable: mail is down")
    assert (git.sync(), own.sync()) == before[:2]  # mail is not theirs
    assert every.sync() > before[2]
    r.set_availability("git", False, "unavailable: git is down")
    r.set_availability("git", True, None)  # back before anyone looked: still news
    assert git.sync() > before[0] and own.sync() > before[1]
    assert "[unavailable" not in msgspec.json.decode(rpc.encode(own.listing()[0]))["description"]
    r.set_availability("git", False, "unavailable: git is down")
    described = msgspec.json.decode(rpc.encode(own.listing()[0]))["description"]
    assert described.startswith("[unavailable: git is down] [git]")
    assert own.markers() == {"git": "unavailable: git is down"}


def test_search_mode_auto_and_pinned() -> None:
    r = table()
    searched = view(r, discovery="search", pinned=["git/git_status"])
    assert searched.mode == "search"
    assert [e.local for e in searched.pinned()] == ["mcp__git__git_status"]
    assert searched.servers() == ["fs", "git", "mail"]
    hits = searched.search("send an email", 3)
    assert hits[0].name == "mcp__mail__send_mail"
    only_git = view(r, servers=["git"], discovery="search")
    assert {h.server for h in only_git.search("delete", 10)} == {"git"}
    auto = ProfileView("auto", r)
    auto.configure(ProfileConfig(discovery="auto", max_tools=7), r.naming, 128)
    assert auto.mode == "search" and len(auto.entries()) == 8
    auto.configure(ProfileConfig(discovery="auto", max_tools=8), r.naming, 128)
    assert auto.mode == "all"
    before = searched.sync()
    r.set_availability("mail", False, "down")  # not pinned: the meta-tools did not change
    assert searched.sync() == before
    r.set_availability("git", False, "down")  # the pinned tool's description did
    assert searched.sync() > before
    index = searched.index()
    r.set_availability("git", True)
    assert searched.index() is index  # an outage does not rebuild the index


def test_prompts_and_resources_go_through_the_same_rules() -> None:
    v = view(
        table(),
        servers=["fs", "mail"],
        prompts={"deny": ["mail/draft_*"]},
        resources={"allow": ["file:///srv/*", "mail/mail://inbox/*"]},
    )
    assert v.admits_prompt("fs", "draft_reply") and not v.admits_prompt("mail", "draft_reply")
    assert not v.admits_prompt("git", "summary")  # not one of its servers
    assert v.admits_resource("fs", "file:///srv/a.txt")
    assert not v.admits_resource("fs", "file:///etc/passwd")
    assert v.admits_resource("mail", "mail://inbox/1") and not v.admits_resource(
        "fs", "mail://inbox/1"
    )


def test_a_profile_that_matches_no_tool_is_a_config_error() -> None:
    r = table()
    aliases = ["git", "fs", "mail"]
    ok = {"dev": ProfileConfig(servers=["git"], pinned=["git_status"])}
    assert unmatched(ok, r, r.naming, aliases) is None
    nothing = Patterns(allow=["nope*"])
    err = unmatched({"dev": ProfileConfig(tools=nothing)}, r, r.naming, aliases)
    assert err is not None and err.path == "profiles.dev.tools", err
    pinned = {"dev": ProfileConfig(servers=["git"], pinned=["git_status", "git/git_stats"])}
    err = unmatched(pinned, r, r.naming, aliases)
    assert err is not None and err.path == "profiles.dev.pinned[1]" and "git_stats" in str(err)
    assert str(err).endswith(
        """'git/git_stats' matches none of its tools (did you mean "git/git_status"?)"""
    )
    err = unmatched(
        {"dev": ProfileConfig(servers=["git"], tools=Patterns(allow=["git_stat", "zz*"]))},
        r,
        r.naming,
        aliases,
    )
    assert err is not None
    assert (
        str(err) == 'profiles.dev.tools: matches no tool of git: "git_stat" (did you mean '
        '"git_status"?), "zz*" match none of them'
    )
    # A server that has not listed yet (or is about to change) cannot be judged.
    empty = {"dev": ProfileConfig(servers=["git", "new"], tools=nothing)}
    assert unmatched(empty, r, r.naming, [*aliases, "new"]) is None
    assert (
        unmatched(
            {"dev": ProfileConfig(servers=["git"], pinned=["x"])},
            r,
            r.naming,
            aliases,
            unknown=["git"],
        )
        is None
    )
