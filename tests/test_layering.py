"""The layout's rules, checked on the code: no import cycles, and imports only in the
directions the design allows.

Every import statement of the three packages counts, wherever it is (inside
functions and ``if TYPE_CHECKING:`` blocks too): a cycle hidden behind
TYPE_CHECKING is still two modules that cannot be read, tested or replaced apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.reading.class_shapes import ClassTree, name_of
from tests.support.reading.imports import imports_of, module_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "transports", "mcpd")
# Modules that do I/O or run an event loop; protocol/ and the registry use none.
IO_MODULES = ("trio", "h11", "socket", "ssl", "subprocess", "asyncio", "selectors")


def our_modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found[module_name(path)] = path
    return found


MODULES = our_modules()


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        edges[name] = {t for t in imports_of(path) if t in MODULES and t != name}
    return edges


def externals(name: str) -> set[str]:
    """The top-level names of what ``name`` imports from outside our packages."""
    return {t.split(".")[0] for t in imports_of(MODULES[name]) if t.split(".")[0] not in PACKAGES}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


# (who, what it must not import, why)
FORBIDDEN = [
    ("protocol", "transports", "protocol/ is the sans-IO core: it imports nothing of ours"),
    ("protocol", "mcpd", "protocol/ is the sans-IO core: it imports nothing of ours"),
    ("transports", "mcpd", "transports move messages and know nothing of the daemon"),
    ("mcpd.agents", "transports", "the agent side sees servers only through its interfaces"),
    *(
        ("transports.base", f"transports.{kind}", "the base says what every transport is")
        for kind in ("stdio", "http", "sse")
    ),
    ("mcpd.servers", "mcpd.agents", "servers never know about agents"),
    ("mcpd.registry", "mcpd.servers", "the registry is bookkeeping: no I/O, no servers"),
    ("mcpd.registry", "mcpd.agents", "the registry is bookkeeping: no I/O, no agents"),
    ("mcpd.registry", "mcpd.local", "the registry is bookkeeping: no I/O"),
    ("mcpd.registry", "transports", "the registry is bookkeeping: no I/O"),
    ("mcpd.config", "mcpd.servers", "the config is a model and its loader, used by all"),
    ("mcpd.config", "mcpd.agents", "the config is a model and its loader, used by all"),
    (
        "mcpd.local",
        "mcpd.agents",
        "mcpd.local serves the wiring, not the agents",
    ),
    (
        "mcpd.local",
        "mcpd.servers",
        "mcpd.local serves the wiring, not the servers",
    ),
    *(
        (room, "mcpd.agents.beyond_tools", "a tools/call's way needs nothing of the other methods")
        for room in ("mcpd.agents.calls", "mcpd.agents.askback", "mcpd.agents.tasks")
    ),
    ("mcpd.cli", "mcpd.servers", "the command line talks to the daemon over its socket"),
    (
        "mcpd.cli",
        "mcpd.agents.agent_server",
        "the command line talks to the daemon over its socket",
    ),
]


def test_the_import_graph_has_no_cycle() -> None:
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize(("who", "banned", "why"), FORBIDDEN)
def test_no_import_goes_the_wrong_way(who: str, banned: str, why: str) -> None:
    wrong = sorted(
        f"{src} imports {dst}"
        for src, dsts in graph().items()
        if within(src, who)
        for dst in dsts
        if within(dst, banned)
    )
    assert not wrong, f"{why}:\n" + "\n".join(wrong)


# What the daemon answers the command line with, which both ends read: whatever these
# import, ``mcpd status`` loads, so they reach nothing of the daemon, not even through
# another module (who an agent is, in an approval waiting, and the user names it holds
# are the one exception: both are plain values).
ANSWERS = (
    "mcpd.status_document",
    "mcpd.server_row",
    "mcpd.login_answers",
    "mcpd.approval_answers",
)
ANSWERS_MAY_LOAD = (*ANSWERS, "mcpd.policy.agent", "mcpd.local.ownership.owners")


def loaded_by(edges: dict[str, set[str]], roots: tuple[str, ...]) -> set[str]:
    """The modules of ours that importing ``roots`` loads, the roots included."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += edges[name]
    return seen


def test_the_answers_the_command_line_reads_load_nothing_of_the_daemon() -> None:
    wrong = sorted(loaded_by(graph(), ANSWERS) - set(ANSWERS_MAY_LOAD))
    assert not wrong, "the command line's answers load more than msgspec values:\n" + "\n".join(
        wrong
    )


def test_the_load_checker_follows_imports_through_other_modules() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert loaded_by(edges, ("a",)) == {"a", "b", "c"}


# Packages the rest of mcpd reaches through their ``__init__`` only: what is inside
# may be split, merged or loaded late without touching anyone who uses it.
ENTRY_POINTS = ("mcpd.servers.oauth",)


def reaches_inside(edges: dict[str, set[str]], package: str) -> list[str]:
    return sorted(
        f"{src} imports {dst}"
        for src, dsts in edges.items()
        if not within(src, package)
        for dst in dsts
        if dst.startswith(package + ".")
    )


@pytest.mark.parametrize("package", ENTRY_POINTS)
def test_a_package_with_an_entry_point_is_used_through_it(package: str) -> None:
    wrong = reaches_inside(graph(), package)
    assert not wrong, f"import {package} itself, not its modules:\n" + "\n".join(wrong)


def test_the_entry_point_checker_sees_a_module_reached_inside() -> None:
    edges = {"a.user": {"a.pkg", "a.pkg.inner"}, "a.pkg.inner": {"a.pkg.errors"}}
    assert reaches_inside(edges, "a.pkg") == ["a.user imports a.pkg.inner"]


@pytest.mark.parametrize("who", ["protocol", "mcpd.registry"])
def test_pure_parts_do_no_io(who: str) -> None:
    wrong = sorted(
        f"{name} imports {ext}"
        for name in MODULES
        if within(name, who)
        for ext in externals(name)
        if ext in IO_MODULES
    )
    assert not wrong, f"{who} must not do I/O:\n" + "\n".join(wrong)


# The stdio sandbox's plan: what a sandbox is, decided from values (what the machine
# offers and where the paths lead come in found by ``transports.stdio.sandbox.host``).
# Not MCP, so not in protocol/; held to no I/O here instead, the filesystem included.
SANDBOX_PLAN = tuple(
    f"transports.stdio.sandbox.{m}"
    for m in ("plan", "mounts", "strict_view", "fixed_dirs", "limits", "machine", "built_view")
)
PLAN_MAY_IMPORT = (*SANDBOX_PLAN, "transports.path_identity", "protocol")


def plan_io(edges: dict[str, set[str]], extern: dict[str, set[str]]) -> list[str]:
    """What a module of the sandbox's plan imports that could do I/O: an I/O module,
    ``os``, or a module of ours outside the plan (and the values it is made of)."""
    return sorted(
        f"{name} imports {dst}"
        for name in SANDBOX_PLAN
        for dst in sorted(extern[name] & {*IO_MODULES, "os"})
        + sorted(d for d in edges[name] if not any(within(d, ok) for ok in PLAN_MAY_IMPORT))
    )


def test_the_sandbox_plan_does_no_io() -> None:
    wrong = plan_io(graph(), {name: externals(name) for name in SANDBOX_PLAN})
    assert not wrong, "the sandbox's plan decides from values, with no I/O:\n" + "\n".join(wrong)


def test_the_plan_checker_sees_io() -> None:
    plan, mounts = SANDBOX_PLAN[:2]
    edges = {plan: {mounts, "transports.stdio.sandbox.host"}, mounts: set()}
    extern = {plan: {"msgspec"}, mounts: {"os"}}
    edges |= {m: set() for m in SANDBOX_PLAN[2:]}
    extern |= {m: set() for m in SANDBOX_PLAN[2:]}
    assert plan_io(edges, extern) == [
        f"{mounts} imports os",
        f"{plan} imports transports.stdio.sandbox.host",
    ]


# A module past this many lines holds more than one thing to read at once: split it
# where its meaning parts, not where the count falls.
MODULE_LINES = 400


def test_no_module_is_past_its_length() -> None:
    long = sorted(
        f"{name}: {lines} lines"
        for name, path in MODULES.items()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    )
    assert not long, f"modules past {MODULE_LINES} lines:\n" + "\n".join(long)


def test_the_checker_sees_cycles_and_wrong_directions() -> None:
    # A checker that found nothing because it read nothing would pass the tests above.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "mcpd.agents.agent_server" in MODULES and "protocol.jsonrpc.messages" in MODULES
    edges = graph()
    assert "mcpd.servers.supervisor" in edges["mcpd.servers.all_servers"]
    assert "protocol.jsonrpc.messages" in edges["transports.stdio.transport"]


# -- seams: the agent side reaches the servers at one place --

# What the agent side may import of mcpd.servers: the values both sides share, in one
# module, and the two fronts daemon.py wires for it. Each entry: module -> what it is.
SHARED = "mcpd.servers.shared"
SERVERS_SEAM = {
    SHARED: "the values both sides share: a call, its outcome, whose it is, ...",
    "mcpd.servers.all_servers": "AllServers: the servers as the agent side is handed them",
    "mcpd.servers.auth_commands": "Logins: the OAuth logins behind `mcpd auth`",
}


def past_the_seam(edges: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{src} imports {dst}"
        for src, dsts in edges.items()
        if within(src, "mcpd.agents")
        for dst in dsts
        if within(dst, "mcpd.servers") and dst not in SERVERS_SEAM
    )


def test_the_agent_side_imports_of_the_servers_only_the_seam() -> None:
    wrong = past_the_seam(graph())
    assert not wrong, (
        f"the agent side imports what it shares with the servers from {SHARED}, and "
        f"of the rest only the fronts daemon.py wires ({', '.join(sorted(SERVERS_SEAM))}):\n"
        + "\n".join(wrong)
    )


def test_the_seam_checker_sees_a_module_reached_past_it() -> None:
    edges = {
        "mcpd.agents.a": {SHARED, "mcpd.servers.calling.calls", "mcpd.registry.tables.table"},
        "mcpd.servers.b": {"mcpd.servers.calling.calls"},
    }
    assert past_the_seam(edges) == ["mcpd.agents.a imports mcpd.servers.calling.calls"]


# -- seams: the servers' Call holds only what the servers use --

# The class both sides hand each other for a tools/call: (module, class).
SERVERS_CALL = ("mcpd.servers.calling.calls", "Call")


def fields_of(source: str, name: str) -> list[str]:
    """The fields the class ``name`` of ``source`` declares (its annotated names)."""
    [cls] = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name]
    return [
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    ]


def unused_by_servers(sources: dict[str, str]) -> list[str]:
    """The fields of the servers' ``Call`` that no module under ``mcpd.servers`` reads
    or writes. An attribute is known by its name alone, whatever object it is of, so a
    field whose name the servers use for something else passes: this is a floor."""
    used = {
        node.attr
        for name, source in sources.items()
        if within(name, "mcpd.servers")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
    }
    module, cls = SERVERS_CALL
    return [field for field in fields_of(sources[module], cls) if field not in used]


def test_the_servers_call_holds_only_what_the_servers_use() -> None:
    unused = unused_by_servers({name: path.read_text() for name, path in MODULES.items()})
    assert not unused, (
        "fields of the servers' Call that no module under mcpd/servers/ reads or writes: "
        "what only the agent side reads of a call is its own (mcpd.agents.agent.AgentCall), "
        "and what the servers say of it they write on the Call:\n" + "\n".join(unused)
    )


def test_the_call_checker_sees_a_field_the_servers_never_use() -> None:
    sources = {
        "mcpd.servers.calling.calls": (
            "class Call:\n    name: str\n    decision: str\n    kept: int\n"
        ),
        "mcpd.servers.calling.queue_bytes": "def take(call):\n    call.kept = len(call.name)\n",
        "mcpd.agents.calls.toolcall": "def route(call):\n    call.decision = 'allow'\n",
    }
    assert unused_by_servers(sources) == ["decision"]


# -- seams: what one side uses of the other is declared, not probed --


# What may be asked of an object by name: only what no type declares (stdlib
# objects whose attributes depend on the platform or on how they were made). Each
# entry: (module, the object asked) -> why it cannot be typed.
PROBES_ALLOWED = {
    ("mcpd.agents.entry.peers", "socket"): "the stdlib names SO_PEERGROUPS only where it was built",
    ("mcpd.cli.main", "args"): "argparse's Namespace holds what the subcommand's defaults set",
    ("mcpd.demo.runtime", "handler"): "a callable object need not have a __name__",
    ("transports.http.dial", "socket"): "the socket module names TCP_KEEPIDLE on Linux",
    (
        "transports.stdio.process.strays",
        "os",
    ): "the os module has pidfd_open only where the kernel has",
}


def probes(source: str, where: str) -> list[tuple[str, str]]:
    """Each ``getattr``/``hasattr`` call in ``source``: (the object asked, where)."""
    return [
        (ast.unparse(node.args[0]), f"{where}:{node.lineno}: {ast.unparse(node)}")
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and name_of(node.func) in ("getattr", "hasattr") and node.args
    ]


def test_no_capability_is_probed() -> None:
    found = [
        text
        for name, path in MODULES.items()
        for subject, text in probes(path.read_text(), name)
        if (name, subject) not in PROBES_ALLOWED
    ]
    assert not found, (
        "what an object offers is declared by its type (a field, a method, an abstract "
        "base); use it instead of asking by name:\n" + "\n".join(found)
    )
    used = {
        (name, subject)
        for name, path in MODULES.items()
        for subject, _ in probes(path.read_text(), name)
    }
    gone = sorted(f"{m}: {s}" for m, s in set(PROBES_ALLOWED) - used)
    assert not gone, "no longer probed; strike from PROBES_ALLOWED:\n" + "\n".join(gone)


# -- seams: what crosses between agents and servers is typed, not Any --


def any_aliases(tree: ast.Module) -> set[str]:
    """The module-level names of ``tree`` that stand for a type naming ``Any``
    (``Outcome = Any``, ``Hook = Callable[[Any], None]``), an alias of one included."""
    found: set[str] = set()
    assigned = [
        (node.targets[0].id, node.value)
        if isinstance(node, ast.Assign)
        else (name_of(node.target), node.value)
        for node in tree.body
        if (isinstance(node, ast.Assign) and [type(t) for t in node.targets] == [ast.Name])
        or (isinstance(node, ast.AnnAssign) and node.value is not None)
    ]
    while True:
        more = {
            name
            for name, value in assigned
            if name not in found and value is not None and names_in(value) & (found | {"Any"})
        }
        if not more:
            return found
        found |= more


def names_in(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def any_at(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, aliases: set[str] = frozenset()
) -> list[str]:
    """The parameters of ``fn`` (and ``return``) whose annotation names ``Any``, or one
    of ``aliases`` (the module's names for a type that names it)."""
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
    found = [(p.arg, p.annotation) for p in params] + [("return", fn.returns)]
    return [
        name for name, note in found if note is not None and names_in(note) & (aliases | {"Any"})
    ]


# The agent side's half of the call path, where a request meets its server asking its
# agent things: the modules that hand the ask-back driver a tools/call (``Call``), a
# prompts/get or a resources/read, the driver, and the rounds it runs. What passes
# through them is the request as its server is sent it and the servers' ``Outcome``.
CALL_PATH = (
    "mcpd.agents.askback.call_rounds",
    "mcpd.agents.beyond_tools.prompts",
    "mcpd.agents.beyond_tools.resources",
    "mcpd.agents.askback.driver",
    "mcpd.agents.askback.rounds",
    "mcpd.agents.askback.askers",
)


def seam_modules(edges: dict[str, set[str]]) -> set[str]:
    """The modules of the agents/servers seam: ``mcpd.servers.all_servers`` (the servers as
    the agent side is handed them), ``mcpd.agents.daemon_seam`` (the agent side's view of
    the rest of the daemon), each module of ``mcpd.servers`` that a module of
    ``mcpd.agents`` imports (for ``SHARED``, the modules its values come from too), and
    the agent side's half of the call path (``CALL_PATH``)."""
    found = {"mcpd.servers.all_servers", "mcpd.agents.daemon_seam", *CALL_PATH}
    for src, dsts in edges.items():
        if within(src, "mcpd.agents"):
            found |= {d for d in dsts if within(d, "mcpd.servers")}
    if SHARED in found:
        found |= {d for d in edges[SHARED] if within(d, "mcpd.servers")}
    return found


def area_of(name: str) -> str:
    """The area ``name`` belongs to: a package of mcpd's (``mcpd.servers``, its
    ``__init__`` included), mcpd's own top-level modules (``mcpd``), or ``protocol`` or
    ``transports`` whole."""
    parts = MODULES[name].relative_to(ROOT).parts
    return f"mcpd.{parts[1]}" if parts[0] == "mcpd" and len(parts) > 2 else parts[0]


def shared_modules(edges: dict[str, set[str]]) -> set[str]:
    """The modules a module of another area imports: what one area hands another."""
    return {dst for src, dsts in edges.items() for dst in dsts if area_of(dst) != area_of(src)}


def any_at_seam(source: str, where: str) -> list[str]:
    """``Any`` in a seam module's public interface: its public functions, and every
    public method (and ``__init__``) of its public classes; named outright, or through
    an alias of the module's own."""
    found = []
    tree = ast.parse(source)
    aliases = any_aliases(tree)
    for node in tree.body:
        defs: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defs = [(node.name, node)]
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            defs = [
                (f"{node.name}.{f.name}", f)
                for f in node.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                and (not f.name.startswith("_") or f.name == "__init__")
            ]
        for name, fn in defs:
            if not name.startswith("_"):
                found += [f"{where}.{name}:{p}" for p in any_at(fn, aliases)]
    return found


# What may stay ``Any`` where it crosses, each entry where -> why: nothing. JSON of the
# peers' making (an agent's capabilities, a server's result decoded to be rewritten) is
# ``protocol.jsonrpc.messages.JsonObject``, read by narrowing.
UNTYPED: dict[str, str] = {}


def test_no_any_crosses_the_seam() -> None:
    """A value that crosses between two areas (the agent side and the server side,
    protocol and the daemon, the config and the policy) has a type both can read: a
    struct, a named alias (``protocol.jsonrpc.messages.Json`` for JSON of a peer's making),
    ``object`` for what is only passed on or is checked where it is read. The seam is
    ``seam_modules`` and every module another area imports (``shared_modules``); in
    those, every public function, and every public method and ``__init__`` of a public
    class, is checked for ``Any`` in a parameter's annotation or the return's. What the
    check does not see: the fields of the structs that cross (``servers.calling.calls.Call``),
    and an alias of another module's that stands for ``Any``; one of the module's own
    (``protocol.mcp.core.Meta``) is seen."""
    edges = graph()
    hits = {
        hit
        for name in seam_modules(edges) | shared_modules(edges)
        for hit in any_at_seam(MODULES[name].read_text(), name)
    }
    found = sorted(hits - set(UNTYPED))
    assert not found, "Any where one area hands another a value:\n" + "\n".join(found)
    gone = sorted(set(UNTYPED) - hits)
    assert not gone, "no longer Any; strike from UNTYPED:\n" + "\n".join(gone)


# What the agent side and the servers both keep an agent's things under: one type
# (``servers.calling.agent_key.AgentKey``), never a bare ``object`` or ``Any`` that any value
# passes for.
AGENT_KEY_NAME = "owner"


def untyped_agent_keys(source: str, where: str) -> list[str]:
    """Each parameter, field or attribute named ``owner`` (an agent key) in ``source`` whose
    annotation is only ``object`` or ``Any`` (or one of them or None)."""
    loose = {"object", "Any"}
    found = []
    for node in ast.walk(ast.parse(source)):
        notes: list[tuple[str, ast.expr | None, int]] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
            notes = [(p.arg, p.annotation, p.lineno) for p in params]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.id if isinstance(target, ast.Name) else ""
            if isinstance(target, ast.Attribute):
                name = target.attr
            notes = [(name, node.annotation, node.lineno)]
        for name, note, line in notes:
            if name == AGENT_KEY_NAME and note is not None and names_in(note) - {"None"} <= loose:
                found.append(f"{where}:{line}")
    return found


def test_an_agent_key_has_its_type() -> None:
    found = [
        hit
        for name, path in MODULES.items()
        if within(name, "mcpd.agents") or within(name, "mcpd.servers")
        for hit in untyped_agent_keys(path.read_text(), name)
    ]
    assert not found, "an agent key typed loosely (use servers.shared.AgentKey):\n" + "\n".join(
        found
    )


def test_the_agent_key_checker_sees_an_untyped_one() -> None:
    source = """
from typing import Any
def gone(owner: object) -> None: ...
class Table:
    owner: Any | None = None
    def __init__(self, owner: AgentKey) -> None:
        self.owner: object = owner
def typed(owner: AgentKey, other: object) -> None: ...
"""
    assert untyped_agent_keys(source, "m") == ["m:3", "m:5", "m:7"]


# Interfaces (a Protocol, an abstract base) with one implementation that a layering
# rule needs: a layer declares what it uses of another it may not import, and that
# one implements it (the wiring hands it over). Each entry: interface -> the rule it
# serves.
LAYER_INTERFACES = {
    "protocol.lines.stdout.WaitingRequests": (
        "protocol/ is the sans-IO core: it imports nothing of ours"
    ),
    "transports.base.AuthHook": "transports move messages and know nothing of the daemon",
    "mcpd.servers.calling.calls.QueuedCheck": "servers never know about agents",
    "mcpd.agents.daemon_seam.DaemonForAgents": "the agent side never imports the daemon wiring it",
    "mcpd.agents.daemon_seam.LineSink": "the agent side never imports transports, whose it is",
}
# Interfaces of the daemon that stand for the one class behind them, most of them to
# break an import cycle between the module that uses it and the one that implements
# it. The list may only get shorter.
SINGLE_IMPLEMENTATION = {
    "mcpd.servers.calling.calls.Admitter",  # scheduler.CallScheduler
}


def test_no_interface_stands_for_a_single_class() -> None:
    tree = ClassTree({name: path.read_text() for name, path in MODULES.items()})
    single = tree.single_implementations()
    allowed = SINGLE_IMPLEMENTATION | set(LAYER_INTERFACES)
    new = sorted(f"{p} (only {c})" for p, c in single.items() if p not in allowed)
    assert not new, (
        "an interface (a Protocol, an abstract base) with one implementation is that "
        "class twice: use the class, or an interface an inner layer declares for an "
        "outer one (LAYER_INTERFACES):\n" + "\n".join(new)
    )
    gone = sorted(allowed - set(single))
    assert not gone, "no longer an interface of one class; strike from the list:\n" + "\n".join(
        gone
    )


def test_the_seam_checkers_see_probes_and_lone_protocols() -> None:
    probed = """
def status(up, record):
    pid = getattr(up.transport, "pid", None)
    if hasattr(record, "mcpd_event"):
        pass
    return record.mcpd_server
"""
    assert [(s, p.split(":")[1]) for s, p in probes(probed, "mcpd.servers.m")] == [
        ("up.transport", "3"),
        ("record", "4"),
    ]
    lone = """
from typing import Protocol
class Sink(Protocol):
    limit: int
    def put(self, line: bytes) -> None: ...
class Writer:
    def __init__(self) -> None:
        self.limit = 1
    def put(self, line: bytes) -> None: ...
class FasterWriter(Writer):
    pass
class Logger:
    def put(self) -> None: ...
class Hook(Protocol):
    def __call__(self) -> None: ...
class Pair(Protocol):
    def put(self, line: bytes) -> None: ...
class Other:
    def put(self, line: bytes, urgent: bool = False) -> None: ...
"""
    single = ClassTree({"m": lone}).single_implementations()
    # Writer's subclass is not a second implementation; Logger's put takes no line;
    # Other implements Pair (but not Sink: it has no limit), so Pair has two.
    assert single == {"m.Sink": "m.Writer"}
    bases = """
import abc
from abc import ABC, ABCMeta
class Host(abc.ABC):
    @abc.abstractmethod
    def outage(self) -> str: ...
class Parts(Host):
    def outage(self) -> str: ...
class LazyParts(Parts):
    pass
class Lookalike:
    def outage(self) -> str: ...
class Uses(ABC):
    def begin(self) -> None: ...
class Counted(ABC):
    def begin(self) -> None: ...
class Lazy(Uses):
    pass
class Eager(Uses):
    pass
class Seen(metaclass=ABCMeta):
    def sees(self) -> bool: ...
class Below(Seen, abc.ABC):
    pass
class View(Below):
    pass
"""
    # An abstract base is implemented by descent only: Lookalike has Host's shape and
    # is none of it, LazyParts descends from Parts, and Below is abstract itself.
    # Counted has none, and Uses has two.
    assert ClassTree({"m": bases}).single_implementations() == {
        "m.Host": "m.Parts",
        "m.Seen": "m.View",
        "m.Below": "m.View",
    }


def test_the_seam_checker_sees_any() -> None:
    source = """
from typing import Any
def send(params: Any, *, caps: dict[str, Any] | None = None) -> bytes: ...
def _inner(x: Any) -> Any: ...
class Front:
    def __init__(self, config: Any) -> None: ...
    async def request(self, alias: str) -> Any: ...
    def _private(self, x: Any) -> None: ...
class _Hidden:
    def open(self, x: Any) -> None: ...
def typed(raw: bytes) -> list[object]: ...
Outcome = Any
Upstream = Callable[[Any, Any], Awaitable[Outcome]]
Later: TypeAlias = dict[str, Upstream]
Typed: TypeAlias = Raw | None
async def rounds(call: Typed, upstream: Upstream) -> Outcome: ...
def later(hooks: Later, typed: Typed) -> None: ...
"""
    assert any_at_seam(source, "m") == [
        "m.send:params",
        "m.send:caps",
        "m.Front.__init__:config",
        "m.Front.request:return",
        "m.rounds:upstream",
        "m.rounds:return",
        "m.later:hooks",
    ]
    seam = seam_modules(graph())
    assert {
        "mcpd.servers.all_servers",
        "mcpd.servers.calling.calls",
        "mcpd.agents.daemon_seam",
    } <= seam
    assert {"mcpd.agents.askback.askers", "mcpd.agents.askback.driver"} <= seam
    agents = {m for m in seam if within(m, "mcpd.agents")}
    assert agents == {"mcpd.agents.daemon_seam", *CALL_PATH}
    # An area is a package of mcpd's, its __init__ too, or protocol or transports whole.
    assert [area_of(m) for m in ("mcpd.servers", "mcpd.servers.oauth.login")] == [
        "mcpd.servers",
        "mcpd.servers",
    ]
    assert [area_of(m) for m in ("mcpd.daemon", "protocol.oauth.http")] == ["mcpd", "protocol"]
    shared = shared_modules(graph())
    assert {
        "protocol.jsonrpc.messages",
        "mcpd.policy.redaction.guard",
        "mcpd.config.loading.load",
    } <= shared
    # Imported only from within its own area: protocol.oauth.jws by protocol.oauth.
    assert "protocol.oauth.jws" not in shared


# A function past this many lines (its def to its last line, docstring included) does
# more than one thing to hold in mind at once: split it where its meaning parts.
FUNCTION_LINES = 80


def long_functions(source: str, where: str) -> list[str]:
    """Each function and method in ``source``, nested ones too, longer than
    ``FUNCTION_LINES``: its qualified name and its length."""
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > FUNCTION_LINES:
                        found.append(f"{name}: {lines} lines")
                walk(child, name)
            else:
                walk(child, prefix)

    walk(ast.parse(source), where)
    return found


def test_no_function_is_past_its_length() -> None:
    long = sorted(
        hit for name, path in MODULES.items() for hit in long_functions(path.read_text(), name)
    )
    assert not long, f"functions past {FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_the_length_checker_sees_long_functions_and_methods() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES - 1))
    source = f"""
def fits():
{body}

class Parts:
    def __init__(self):
{body.replace("    ", "        ")}
        self.more = 1

    async def serve(self):
        def inner():
{body.replace("    ", "            ")}
            return 1
        return inner
"""
    assert long_functions(source, "m") == [
        "m.Parts.__init__: 81 lines",
        "m.Parts.serve: 83 lines",
        "m.Parts.serve.inner: 81 lines",
    ]


# A public class, function or type alias is one thing wherever it is named: two of one name in
# different modules make a reader, a traceback and an import ask which is meant.
# Names a protocol fixes may be had by more than one module, each for its reason.
PROTOCOL_NAMES = {
    "main": "what `python -m` runs of a module, and a console script of a package",
}


def type_alias_name(node: ast.stmt) -> str | None:
    """The name a module-level statement gives a type alias: ``Name: TypeAlias = ...``,
    or ``Name = ...`` of a subscripted type, a union or another type's name. Constants
    (UPPER_CASE) and private names are not aliases a reader meets elsewhere."""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        kind = node.annotation
        marked = isinstance(kind, ast.Name | ast.Attribute) and (
            (kind.id if isinstance(kind, ast.Name) else kind.attr) == "TypeAlias"
        )
        name = node.target.id if marked else None
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        [target] = node.targets
        value = node.value
        typed = isinstance(value, ast.Subscript | ast.Name | ast.Attribute) or (
            isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr)
        )
        name = target.id if typed and isinstance(target, ast.Name) else None
    else:
        return None
    if name is None or name.startswith("_") or name.isupper() or not name[0].isupper():
        return None
    return name


def same_names(sources: dict[str, str]) -> dict[str, list[str]]:
    """Each public top-level class, function or type alias name defined in more than
    one of ``sources`` (module name -> its source), with the modules that define it."""
    where: dict[str, list[str]] = {}
    for module, source in sources.items():
        for node in ast.parse(source).body:
            named = isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            name = node.name if named else type_alias_name(node)
            if name is not None and not name.startswith("_"):
                where.setdefault(name, []).append(module)
    return {name: sorted(mods) for name, mods in where.items() if len(mods) > 1}


def test_no_two_modules_define_one_public_name() -> None:
    twice = same_names({name: path.read_text() for name, path in MODULES.items()})
    allowed = set(PROTOCOL_NAMES)
    new = sorted(f"{n}: {', '.join(m)}" for n, m in twice.items() if n not in allowed)
    assert not new, (
        "a public class, function or type alias of a name another module has too: name each for "
        "what it is:\n" + "\n".join(new)
    )
    gone = sorted(allowed - set(twice))
    assert not gone, "no longer had twice; strike from the list:\n" + "\n".join(gone)


def test_the_name_checker_sees_one_name_in_two_modules() -> None:
    sources = {
        "a": "class Pending: ...\ndef answer(): ...\nclass _Own: ...\n",
        "b": "class Gate:\n    def answer(self): ...\nclass _Own: ...\n",
        "c": "async def answer(): ...\nGate = 1\n",
        "d": "Reply = Callable[[bytes], None]\nKey: TypeAlias = 'tuple[str, str]'\n",
        "e": "class Reply: ...\nKey = str | None\nLIMIT = Final[int]\n_Own = list[int]\n",
        "f": "Key = make_key()\nPending = Gate\n",
    }
    assert same_names(sources) == {
        "Key": ["d", "e"],
        "Pending": ["a", "f"],
        "Reply": ["d", "e"],
        "answer": ["a", "c"],
    }


def others_private_methods(source: str, where: str) -> list[str]:
    """Each use, inside a class, of a private method that class does not define, on
    an object not its own: ``self._up._renew()`` ties two classes by what one of
    them keeps to itself. (A module's own functions may use its classes' privates.)"""
    tree = ast.parse(source)
    private = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("_")
        and not node.name.startswith("__")
    }
    found = []
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private - own
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{where}.{cls.name}: {ast.unparse(node)}")
    return found


def test_no_class_uses_another_class_s_private_method() -> None:
    found = sorted(
        hit
        for name, path in MODULES.items()
        for hit in others_private_methods(path.read_text(), name)
    )
    assert not found, "a private method used by another class: give it a public name:\n" + (
        "\n".join(found)
    )


def test_the_private_method_checker_sees_a_class_reach_into_another() -> None:
    source = """
class Up:
    def _again(self): ...
    def _own(self, other): return other._own()

class Reply:
    def __call__(self): self._up._again()

def wire(up): return up._again
"""
    assert others_private_methods(source, "m") == ["m.Reply: self._up._again"]


# A module of ours is read under its own name, so that grepping the name finds every
# use; the two exceptions are conventions every module follows alike.
IMPORT_CONVENTIONS = {"protocol.jsonrpc.messages": "rpc", "protocol.mcp.core": "mcp"}


def modules_under_other_names(source: str, where: str, modules: set[str]) -> list[str]:
    """Each import in ``source`` (the module ``where``, a package's ``__init__`` when
    it ends in ``.__init__``) that binds one of ``modules`` to a name that is neither
    its own nor its convention's."""
    package = (
        where.removesuffix(".__init__") if where.endswith(".__init__") else where.rpartition(".")[0]
    )
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            prefix = ".".join([*base, node.module or ""] if node.level else [node.module or ""])
            named = [(f"{prefix.rstrip('.')}.{a.name}", a.asname) for a in node.names]
        elif isinstance(node, ast.Import):
            named = [(a.name, a.asname) for a in node.names]
        else:
            continue
        for module, bound in named:
            own = module.rpartition(".")[2]
            if module in modules and bound not in (None, own, IMPORT_CONVENTIONS.get(module)):
                found.append(f"{where}:{node.lineno}: {module} as {bound}")
    return found


def test_our_modules_are_imported_under_their_own_names() -> None:
    found = [
        hit
        for name, path in MODULES.items()
        for hit in modules_under_other_names(
            path.read_text(),
            f"{name}.__init__" if path.name == "__init__.py" else name,
            set(MODULES),
        )
    ]
    assert not found, "a module of ours under another name:\n" + "\n".join(found)


def test_the_import_name_checker_sees_a_module_under_another_name() -> None:
    source = """
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp, features as surface
from protocol.mcp import uri_templates
from . import uri_spellings as forms
from .uri_spellings import read_as as reading
import protocol.mcp.server_logs as loglevels
import protocol.mcp.core as core
from ..jsonrpc import messages as jsonrpc
"""
    modules = {
        "protocol.jsonrpc.messages",
        "protocol.mcp.core",
        "protocol.mcp.features",
        "protocol.mcp.uri_templates",
        "protocol.mcp.uri_spellings",
        "protocol.mcp.server_logs",
    }
    assert modules_under_other_names(source, "protocol.mcp.m", modules) == [
        "protocol.mcp.m:3: protocol.mcp.features as surface",
        "protocol.mcp.m:5: protocol.mcp.uri_spellings as forms",
        "protocol.mcp.m:7: protocol.mcp.server_logs as loglevels",
        "protocol.mcp.m:9: protocol.jsonrpc.messages as jsonrpc",
    ]
