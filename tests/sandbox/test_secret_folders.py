"""At the default level the directory that holds a secret file, or the config file,
is hidden whole where the server needs nothing in it: a file replaced there by a
rename (an editor, ``sed -i``, a credential tool) or created after the server started
is as hidden as the one that was there. Where the directory cannot be hidden, mcpd
says so, and a reload restarts the servers started before the file changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from tests.support.daemons.as_operator import client
from tests.support.daemons.sandboxed import agent_of, hostile, serving, steady, text, wait_ready

pytestmark = pytest.mark.timeout(120)


def replace(path: Path, content: str) -> None:
    """``path`` given ``content`` as editors and ``sed -i`` do: a new file renamed onto it."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(content)
    os.rename(fresh, path)


async def test_a_secret_replaced_or_created_after_a_server_started_stays_hidden(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "secrets"
    folder.mkdir()
    vault, late = folder / "vault-token", folder / "late-token"
    vault.write_text("vault-first\n")
    extra = '[servers.vault]\nurl = "http://127.0.0.1:9/mcp"\n'
    extra += f'headers = {{ X-Api-Key = "${{file:{vault}}}", X-Late = "${{file:{late}}}" }}\n'
    with serving(tmp_path, {"hostile": hostile()}, extra, config_dir=tmp_path / "conf") as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            replace(vault, "vault-second\n")
            late.write_text("late-secret\n")
            for path, secret in ((vault, "vault-second"), (late, "late-secret")):
                got = text(await agent.call("mcp__hostile__read_file", {"path": str(path)}))
                assert secret not in got and got.startswith("refused:"), got


async def test_the_config_file_rewritten_in_place_stays_hidden(tmp_path: Path) -> None:
    servers = {"hostile": hostile(), "steady": steady()}
    with serving(tmp_path, servers, config_dir=tmp_path / "conf") as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            inline = '[servers.inline]\nurl = "http://127.0.0.1:9/mcp"\n'
            inline += 'headers = { X-Api-Key = "inline-secret-5521" }\n'
            replace(d.config, d.config.read_text() + inline)
            got = text(await agent.call("mcp__hostile__read_file", {"path": str(d.config)}))
            assert "inline-secret-5521" not in got and got.startswith("refused:"), got


async def test_a_secret_whose_directory_cannot_be_hidden_is_said_and_a_change_restarts(
    tmp_path: Path,
) -> None:
    # Beside the user's home: its directory holds what every server sees.
    secret = tmp_path / "vault-token"
    secret.write_text("vault-first\n")
    extra = '[servers.vault]\nurl = "http://127.0.0.1:9/mcp"\n'
    extra += f'headers = {{ X-Api-Key = "${{file:{secret}}}" }}\n'
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}, extra) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            log = await d.logged(f"{secret} is hidden from a sandboxed server")
            said = next(line for line in log.splitlines() if f"{secret} is hidden" in line)
            assert str(secret) in said and "the user's home" in said, said
            replace(secret, "vault-second\n")
            report = await agent.result("mcpd/reload")
            assert sorted(report["changed"]) == ["hostile", "steady"], report
            await wait_ready(agent, "hostile")
            got = text(await agent.call("mcp__hostile__read_file", {"path": str(secret)}))
            assert "vault-second" not in got and got.startswith("refused:"), got


async def test_a_reload_after_an_identical_copy_replaced_the_config_says_why_it_restarts(
    tmp_path: Path,
) -> None:
    # Beside the user's home, as above; the copy reads as the file did, and is still
    # a file the running servers were never to read, and could now.
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            replace(d.config, d.config.read_text())
            out = await trio.to_thread.run_sync(client, Path(d.socket), "reload")
            assert out.returncode == 0, out.stderr
            why = (
                f"restarted: it could see what is now at {d.config}, which changed since it started"
            )
            assert out.stdout.startswith(
                f"reloaded: added -, removed -, changed hostile ({why}), steady ({why}), "
                "unchanged tickets\n"
            ), out.stdout
            await wait_ready(agent, "hostile")
            got = text(await agent.call("mcp__hostile__read_file", {"path": str(d.config)}))
            assert got.startswith("refused:"), got


async def test_a_secret_reached_through_links_stays_hidden_where_it_really_lies(
    tmp_path: Path,
) -> None:
    vault, deep = tmp_path / "vault", tmp_path / "deep"
    (deep / "sub").mkdir(parents=True)
    vault.mkdir()
    (vault / "tok").write_text("vault-first\n")
    (deep / "tok2").write_text("deep-first\n")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "tok").symlink_to(vault / "tok")  # kept as dotfiles are
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "lnk").symlink_to(deep / "sub")
    named = (tmp_path / "links" / "tok", f"{tmp_path}/a/lnk/../tok2")  # the second: deep/tok2
    extra = '[servers.vault]\nurl = "http://127.0.0.1:9/mcp"\n'
    extra += f'headers = {{ A = "${{file:{named[0]}}}", B = "${{file:{named[1]}}}" }}\n'
    with serving(tmp_path, {"hostile": hostile()}, extra, config_dir=tmp_path / "conf") as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            replace(vault / "tok", "vault-second\n")  # a token rotated where it lies
            replace(deep / "tok2", "deep-second\n")
            for path, secret in ((vault / "tok", "vault-second"), (deep / "tok2", "deep-second")):
                got = text(await agent.call("mcp__hostile__read_file", {"path": str(path)}))
                assert secret not in got and got.startswith("refused:"), got


async def test_a_config_file_linked_from_mcpds_directory_stays_hidden_where_it_lies(
    tmp_path: Path,
) -> None:
    real = tmp_path / "dotfiles" / "mcpd.toml"
    servers = {"hostile": hostile(), "steady": steady()}
    with serving(tmp_path, servers, config_dir=tmp_path / "conf" / "mcpd", config_in=real) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile")
            inline = '[servers.inline]\nurl = "http://127.0.0.1:9/mcp"\n'
            inline += 'headers = { X-Api-Key = "inline-secret-7741" }\n'
            replace(real, real.read_text() + inline)
            got = text(await agent.call("mcp__hostile__read_file", {"path": str(real)}))
            assert "inline-secret-7741" not in got and got.startswith("refused:"), got
