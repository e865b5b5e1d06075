"""What a profile's agents learn of a server the profile does not show, in a running
daemon: nothing. The hidden server lists the same URI and template as a shown one;
for the profile's agents the URI and the template are the shown server's alone
(listed, read, linked, completed and subscribed as that server wrote them), a URI two
shown servers list names those two only, and the hidden server's list changes are no
news to them. The owner's view of the same daemon is unchanged: both servers' forms,
and the ambiguity they make. A profile's deny of a folder keeps out every spelling of
its files' URIs a server may read as one of them."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import load
from protocol.shown.visible import quote
from tests.support.clients.agent import META, Agent, connect, running
from tests.support.clients.daemon_http import curl
from tests.support.uris.spellings import DENIED, DENIED_FOLDER, RESPELLED

LIMIT = 60
SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "shared_uri_server.py")
HIDDEN = "privy"
README = "file:///README.md"
SHARED = "file:///shared.md"
TEMPLATE = "notes://{id}"
LISTEN = "subscriptions/listen"
CHANGES = ("notifications/prompts/list_changed", "notifications/resources/list_changed")


def server(name: str, uris: str, templates: str = "", prompts: str = "") -> str:
    args = [SERVER, name, uris, templates, prompts]
    return f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"


def write_config(tmp: Path, dev_servers: str = '"pub", "pub2"', extra: str = "") -> Path:
    """``pub`` and ``pub2`` shown to the profile ``dev`` (on its own socket), and
    ``privy``, hidden from it, listing what ``pub`` lists."""
    path = tmp / "mcpd.toml"
    path.write_text(
        f'[daemon]\nsocket = "{tmp / "mcpd.sock"}"\nstartup_deadline = 20\n'
        + server("pub", f"{README},{SHARED}", TEMPLATE, "hello")
        + server("pub2", SHARED)
        + server(HIDDEN, f"{README},{SHARED},privy://payroll", TEMPLATE, "hello")
        + extra
        + f'[profiles.dev]\nservers = [{dev_servers}]\nsocket = "{tmp / "dev.sock"}"\n'
    )
    return path


def uris(listing: dict[str, Any]) -> list[str]:
    return sorted(r["uri"] for r in listing["resources"])


def templates(listing: dict[str, Any]) -> list[str]:
    return sorted(t["uriTemplate"] for t in listing["resourceTemplates"])


async def read(agent: Agent, uri: str) -> dict[str, Any]:
    return await agent.rpc("resources/read", {"uri": uri})


def text_of(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    [content] = reply["result"]["contents"]
    return str(content["text"])


async def listen(agent: Agent, rid: str, notifications: dict[str, Any]) -> dict[str, Any]:
    """Open a listen; what its acknowledgement says mcpd honours."""
    count = len(agent.notifications)
    body = {"notifications": notifications, "_meta": META}
    message = {"jsonrpc": "2.0", "id": rid, "method": LISTEN, "params": body}
    await agent.send_raw(json.dumps(message).encode() + b"\n")
    acknowledged = (await agent.wait_notifications(count + 1))[count]
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    return dict(acknowledged["params"]["notifications"])


async def changes(agent: Agent, after: int) -> list[str]:
    """Wait for both list changes among the notifications after the first ``after``;
    the methods of those about prompts and resources."""
    while True:
        methods = [m["method"] for m in agent.notifications[after:]]
        if set(CHANGES) <= set(methods):
            return [m for m in methods if m in CHANGES]
        await agent.wait_notifications(len(agent.notifications) + 1)


@contextlib.asynccontextmanager
async def profile_agents(tmp_path: Path) -> AsyncIterator[tuple[Agent, Agent]]:
    """A modern and an initialized legacy agent on the profile's socket."""
    path = write_config(tmp_path)
    dev_sock = str(tmp_path / "dev.sock")
    async with (
        running(load(path), str(path)),
        connect(dev_sock) as dev,
        connect(dev_sock, modern=False) as legacy,
    ):
        await legacy.initialize()
        yield dev, legacy


def assert_unnamed(replies: dict[str, Any]) -> None:
    for what, reply in replies.items():
        assert HIDDEN not in json.dumps(reply), f"{what} names {HIDDEN}: {reply}"


async def test_a_uri_a_hidden_server_lists_too_is_the_shown_servers_alone(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with profile_agents(tmp_path) as (dev, legacy):
            replies: dict[str, Any] = {}
            replies["list"] = listed = await dev.result("resources/list")
            assert uris(listed) == [README, f"mcpd://pub/{SHARED}", f"mcpd://pub2/{SHARED}"]
            page = await curl(str(tmp_path / "dev.sock"), "/resources")
            replies["GET /resources"] = body = json.loads(page.body)
            assert uris(body) == uris(listed)
            replies["read"] = reply = await read(dev, README)
            assert text_of(reply) == f"pub read {README}"
            replies["legacy read"] = reply = await read(legacy, README)
            assert text_of(reply) == f"pub read {README}"
            assert_unnamed(replies)
            # The hidden server's own URIs stay out of reach.
            for uri in ("privy://payroll", f"mcpd://{HIDDEN}/{README}"):
                said = (await read(dev, uri))["error"]["message"]
                assert said.startswith(f"Resource not found: {quote(uri)}.")


async def test_an_ambiguous_uri_names_the_shown_servers_only(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with profile_agents(tmp_path) as (dev, legacy):
            for agent in (dev, legacy):
                reply = await read(agent, SHARED)
                assert reply["error"]["code"] == -32602
                assert reply["error"]["data"]["candidates"] == [
                    f"mcpd://pub/{SHARED}",
                    f"mcpd://pub2/{SHARED}",
                ]
                assert_unnamed({"read": reply})


async def test_a_template_a_hidden_server_shares_is_the_shown_servers_alone(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with profile_agents(tmp_path) as (dev, legacy):
            replies: dict[str, Any] = {}
            replies["templates"] = shown = await dev.result("resources/templates/list")
            assert templates(shown) == [TEMPLATE]
            replies["read"] = reply = await read(dev, "notes://7")
            assert text_of(reply) == "pub read notes://7"
            ref = {"type": "ref/resource", "uri": TEMPLATE}
            arg = {"name": "id", "value": ""}
            for agent in (dev, legacy):
                complete = {"ref": ref, "argument": arg}
                replies["complete"] = done = await agent.rpc("completion/complete", complete)
                assert done["result"]["completion"]["values"] == ["pub"], done
            assert_unnamed(replies)


async def test_links_in_results_are_handed_over_as_the_profile_reads_them(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with profile_agents(tmp_path) as (dev, _):
            linked = await dev.call("mcp__pub__link", {"uri": README})
            assert linked["content"][0]["uri"] == README
            prompt = await dev.result("prompts/get", {"name": "mcp__pub__hello"})
            assert prompt["messages"][0]["content"]["uri"] == README
            assert_unnamed({"call": linked, "prompt": prompt})


async def test_subscriptions_to_such_a_uri_are_honoured(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with profile_agents(tmp_path) as (dev, legacy):
            assert (await legacy.rpc("resources/subscribe", {"uri": README}))["result"] == {}
            honoured = await listen(dev, "L", {"resourceSubscriptions": [README, "notes://7"]})
            assert honoured["resourceSubscriptions"] == [README, "notes://7"]


async def test_the_owner_still_sees_every_server_and_their_ambiguity(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon, connect(daemon.socket_path) as owner:
            listed = await owner.result("resources/list")
            assert uris(listed) == [
                f"mcpd://privy/{README}",
                f"mcpd://privy/{SHARED}",
                f"mcpd://pub/{README}",
                f"mcpd://pub/{SHARED}",
                f"mcpd://pub2/{SHARED}",
                "privy://payroll",
            ]
            shown = await owner.result("resources/templates/list")
            assert templates(shown) == [f"mcpd://privy/{TEMPLATE}", f"mcpd://pub/{TEMPLATE}"]
            reply = await read(owner, README)
            assert reply["error"]["data"]["candidates"] == [
                f"mcpd://privy/{README}",
                f"mcpd://pub/{README}",
            ]
            assert text_of(await read(owner, f"mcpd://privy/{README}")) == f"privy read {README}"
            assert text_of(await read(owner, "privy://payroll")) == "privy read privy://payroll"
            linked = await owner.call("mcp__pub__link", {"uri": README})
            assert linked["content"][0]["uri"] == f"mcpd://pub/{README}"
            page = json.loads((await curl(daemon.socket_path, "/resources")).body)
            assert uris(page) == uris(listed)


MORE = server("privy2", "privy2://x", "", "more")


@contextlib.asynccontextmanager
async def listening(tmp_path: Path) -> AsyncIterator[tuple[Agent, Agent, Agent]]:
    """The owner and the profile's modern agent listening for prompt and resource list
    changes, and a legacy agent on the profile's socket; then a reload adds a server
    the profile does not show, with prompts and resources, and the owner hears of
    both."""
    path = write_config(tmp_path)
    dev_sock = str(tmp_path / "dev.sock")
    async with (
        running(load(path), str(path)) as daemon,
        connect(daemon.socket_path) as owner,
        connect(dev_sock) as dev,
        connect(dev_sock, modern=False) as legacy,
    ):
        await legacy.initialize()
        flags = {"promptsListChanged": True, "resourcesListChanged": True}
        for agent in (owner, dev):
            assert await listen(agent, "L", flags) == flags
        write_config(tmp_path, extra=MORE)
        await owner.result("mcpd/reload")
        await changes(owner, 1)
        # Whatever went to the profile's agents went out in the same pass as the
        # owner's, before the replies to these.
        for agent in (dev, legacy):
            await agent.result("ping")
        yield owner, dev, legacy


async def test_a_hidden_servers_list_changes_are_no_news_to_the_profile(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with listening(tmp_path) as (_, dev, legacy):
            assert [m["method"] for m in dev.notifications[1:]] == []
            assert legacy.notifications == []


async def test_a_profile_that_comes_to_show_a_server_tells_its_agents_only(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with listening(tmp_path) as (owner, dev, legacy):
            owner_seen, dev_seen, legacy_seen = (len(a.notifications) for a in (owner, dev, legacy))
            write_config(tmp_path, dev_servers='"pub", "pub2", "privy2"', extra=MORE)
            await owner.result("mcpd/reload")
            assert sorted(await changes(dev, dev_seen)) == sorted(CHANGES)
            tags = [m["params"]["_meta"][META_ID] for m in dev.notifications[dev_seen:]]
            assert tags == ["L", "L"]
            assert sorted(await changes(legacy, legacy_seen)) == sorted(CHANGES)
            assert "privy2://x" in uris(await dev.result("resources/list"))
            # Nothing the owner sees changed.
            await owner.result("ping")
            assert len(owner.notifications) == owner_seen


META_ID = "io.modelcontextprotocol/subscriptionId"


TEMPLATE_SERVER = str(
    Path(__file__).resolve().parents[3] / "support" / "uris" / "template_server.py"
)


async def test_a_denied_uri_is_denied_however_an_agent_spells_it(tmp_path: Path) -> None:
    """A server that reads every spelling of a path as that path (a URL parser's
    reading) is asked for none of them by an agent whose profile denies the path; the
    profile's other files are read as before."""
    path = tmp_path / "mcpd.toml"
    path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nstartup_deadline = 20\n'
        f"[servers.fs]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([TEMPLATE_SERVER, 'file:///{+path}'])}\n"
        f'[profiles.default.resources]\ndeny = ["fs/{DENIED_FOLDER}"]\n'
    )
    with trio.fail_after(LIMIT):
        async with running(load(str(path))) as daemon, connect(daemon.socket_path) as agent:
            assert "file:///home/u/notes.txt" in text_of(
                await read(agent, "file:///home/u/notes.txt")
            )
            for uri in (DENIED, *RESPELLED, *(f"mcpd://fs/{u}" for u in RESPELLED)):
                reply = await read(agent, uri)
                said = reply.get("error", {}).get("message", "")
                assert said.startswith(f"Resource not found: {quote(uri)}."), (uri, reply)
            daemon.stop()


PATH_SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "path_server.py")


async def test_a_denied_path_is_read_by_no_spelling_that_has_that_path(tmp_path: Path) -> None:
    """A server that opens whatever path a URI has, under any scheme or none, is asked
    by an agent whose profile denies a folder of ``file:`` URIs, and a kind of file by
    its path, for none of those files, however the agent writes their path; the other
    files are read."""
    data = tmp_path / "data"
    (data / "pub").mkdir(parents=True)
    (data / "secret").mkdir()
    (data / "pub" / "readme.txt").write_text("public words")
    (data / "pub" / "id.pem").write_text("pem words")
    secret = data / "secret" / "key.txt"
    secret.write_text("secret words")
    # From the server's working directory, as many ``..`` as reach the root, then the
    # file's path.
    climbing = "../" * 64 + str(secret).lstrip("/")
    (tmp_path / "etc").mkdir()
    path = tmp_path / "etc" / "mcpd.toml"
    path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "run" / "mcpd.sock"}"\nstartup_deadline = 20\n'
        f"[servers.fs]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([PATH_SERVER, str(data)])}\n"
        f'[profiles.narrow.resources]\ndeny = ["fs/file://{data}/secret/*", "fs/{data}/*.pem"]\n'
    )
    with trio.fail_after(LIMIT):
        async with running(load(str(path))) as daemon, connect(daemon.socket_path) as agent:
            await agent.use_profile("narrow")
            listed = uris(await agent.result("resources/list"))
            assert listed == [f"file://{data}/pub/readme.txt"]
            for uri in (f"file://{data}/pub/readme.txt", f"{data}/pub/readme.txt"):
                assert text_of(await read(agent, uri)) == "public words"
            for uri in (
                f"file://{secret}",
                f"{secret}",
                f"{data}/pub/../secret/key.txt",
                f"x://{secret}",
                f"mcpd:{secret}",
                f"https://example.com{secret}",
                f"mcpd://fs/{secret}",
                f"mcpd://fs/x://{secret}",
                f"{secret};x",
                f"https://example.com{secret};x",
                f"{data}/pub/id.pem",
                f"{data}/pub/id.pem;.txt",
                f"https://example.com{data}/pub/id.pem;x",
                climbing,
                f"x:{climbing}",
                f"mcpd://fs/{climbing}",
            ):
                reply = await read(agent, uri)
                said = reply.get("error", {}).get("message", "")
                assert said.startswith(f"Resource not found: {quote(uri)}."), (uri, reply)
            # The owner's profile denies nothing, and the server opens those spellings.
            await agent.use_profile("default")
            assert text_of(await read(agent, f"x://{secret}")) == "secret words"
            assert text_of(await read(agent, climbing)) == "secret words"
            assert text_of(await read(agent, f"{data}/pub/id.pem;.txt")) == "pem words"
            daemon.stop()
