"""A few precise rules for text that speaks to the model instead of describing a tool.

Published attacks on MCP hide orders in descriptions: to keep something from the user,
to read a credential file and pass it along as an argument, to send another server's
mail elsewhere or avoid its tools, often inside a long ``<IMPORTANT>`` block the user
never unfolds. A description that describes its tool does none of that, so each rule
looks for one such order, as words in one sentence near each other, never as a
single word: real servers say "read", "token" and "do not" all the time.

The rules are matched on words (one pass with a single-class pattern), each word set
tried at each word with a bounded gap: the cost is linear in the text whatever it
holds. Findings are advice for a person (``mcpd tools --findings``); a server can
always write something no rule sees, which is why changed definitions are held.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

# Rules' names, as findings, the journal and `mcpd tools --findings` show them.
HIDDEN_CHARACTERS: Final = "hidden-characters"  # found by cleaning, not by a rule here
HIDDEN_SECTION: Final = "hidden-section"
CONCEAL: Final = "conceal-from-user"
SENSITIVE_FILE: Final = "sensitive-file"
EXFILTRATION: Final = "credential-exfiltration"
OTHER_TOOLS: Final = "other-tools"
OVERRIDE: Final = "override-instructions"

_EXCERPT: Final = 120  # characters of the text shown around what a rule found


class Finding(msgspec.Struct, frozen=True):
    rule: str
    where: str  # "description", "title", "inputSchema: query.description", ...
    excerpt: str


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WORD: Final = re.compile(r"[a-z0-9_']++")
_SENTENCE_END: Final = re.compile(r"[.!?;](?=\s)|\n")
# Two words that read as one.
_PAIRS: Final = {
    ("do", "not"): "don't",
    ("does", "not"): "doesn't",
    ("must", "not"): "mustn't",
    ("should", "not"): "shouldn't",
    ("will", "not"): "won't",
    ("private", "key"): "private_key",
    ("private", "keys"): "private_key",
    ("ssh", "key"): "ssh_key",
    ("ssh", "keys"): "ssh_key",
    ("secret", "key"): "secret_key",
    ("secret", "keys"): "secret_key",
    ("api", "key"): "api_key",
    ("api", "keys"): "api_key",
    ("access", "key"): "access_key",
    ("access", "keys"): "access_key",
    ("access", "token"): "access_token",
    ("access", "tokens"): "access_token",
    ("auth", "token"): "auth_token",
    ("bearer", "token"): "bearer_token",
    ("session", "token"): "session_token",
    ("refresh", "token"): "refresh_token",
    ("seed", "phrase"): "seed_phrase",
    ("side", "effect"): "side_effect",
    ("side", "effects"): "side_effect",
}

NEGATION: Final = _words("don't dont never without mustn't shouldn't avoid")
TELL: Final = _words(
    "tell telling mention mentioning inform informing reveal revealing disclose disclosing "
    "alert alerting let letting"
)
PERSON: Final = _words("user user's users human anyone anybody")
THIS: Final = _words("this that it these them")
HIDE: Final = _words("hide hiding hidden conceal concealing secret keep keeping")
UNAWARE: Final = _words("mustn't shouldn't never")
NOTICE: Final = _words("know notice suspect learn see find be")
READ: Final = _words(
    "read reading cat open retrieve fetch get collect gather extract dump find grab copy look"
)
CREDENTIAL: Final = _words(
    "private_key ssh_key secret_key api_key access_key access_token auth_token bearer_token "
    "session_token refresh_token seed_phrase password passwords passwd credential "
    "credentials cookie cookies mnemonic"
)
PASS_ON: Final = _words(
    "pass include send attach append add put insert forward upload exfiltrate leak paste "
    "embed parameter param argument field sidenote"
)
USE: Final = _words("use using call calling invoke invoking run running trust trusting rely")
TOOL: Final = _words("tool tools server servers function functions")
WHEN: Final = _words("before after when whenever instead")
ANY_OTHER: Final = _words("any every all other another")
PRESENT: Final = _words("available present installed loaded enabled active connected")
TRAFFIC: Final = _words(
    "email emails message messages mail mails payment payments transfer transfers"
)
MUST: Final = _words("must should shall have")
ROUTED: Final = _words("sent forwarded redirected routed go cc bcc copied addressed delivered")
IGNORE: Final = _words("ignore disregard forget")
EARLIER: Final = _words("previous prior above earlier all any other system your the")
ORDERS: Final = _words(
    "instructions instruction rules prompt prompts guidelines directions directives"
)
SUPERSEDE: Final = _words("supersede supersedes overrule overrules")

# Files and stores no tool description has reason to send a model to.
SENSITIVE_PATHS: Final = (
    "~/.ssh",
    ".ssh/",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "authorized_keys",
    ".aws/credentials",
    ".aws/config",
    ".azure/",
    "application_default_credentials",
    "mcp.json",
    "claude_desktop_config",
    "/etc/passwd",
    "/etc/shadow",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    ".gnupg",
    ".bash_history",
    ".zsh_history",
    "wallet.dat",
    "cookies.sqlite",
    "login data",
    ".env",
)
# Blocks that a UI folds away or a model takes for the system's voice.
HIDDEN_TAGS: Final = (
    "important",
    "system",
    "instructions",
    "secret",
    "hidden",
    "critical",
    "admin",
    "override",
)
# Files named like a secret one that are meant to be shared.
_SHARED_SUFFIXES: Final = (".example", ".sample", ".template", ".dist")
_LONG_BLOCK: Final = 80  # characters inside such a block that make it a hidden section
_BLANK_LINES: Final = 20  # blank lines in a row that push text out of view


Step = tuple[frozenset[str], int]  # (words, how many words may come before it)
# "when this tool is available": the shadowing attack's way of speaking of others.
_WHILE_PRESENT: Final = [
    (_words("when whenever while if"), 0),
    (_words("this"), 0),
    (TOOL, 0),
    (_words("is are"), 1),
    (PRESENT, 1),
]


class _Sentence:
    __slots__ = ("words",)

    def __init__(self, words: list[str]) -> None:
        self.words = words

    def find(self, steps: Sequence[Step], unless: frozenset[str] = frozenset()) -> bool:
        """Whether the words of ``steps`` follow each other, each within its gap of the
        last (first occurrence each time), with none of ``unless`` in the gaps."""
        words = self.words
        first = steps[0][0]
        for i, word in enumerate(words):
            if word not in first:
                continue
            at = i
            for wanted, gap in steps[1:]:
                nxt = -1
                for j in range(at + 1, min(len(words), at + gap + 2)):
                    if words[j] in wanted:
                        nxt = j
                        break
                    if words[j] in unless:
                        break
                if nxt < 0:
                    break
                at = nxt
            else:
                return True
        return False

    def has(self, *sets: frozenset[str]) -> bool:
        present = set(self.words)
        return all(not present.isdisjoint(s) for s in sets)


def _sentences(text: str) -> list[_Sentence]:
    out = []
    for part in _SENTENCE_END.split(text.lower().replace("\u2019", "'")):
        words = _WORD.findall(part)
        merged: list[str] = []
        for word in words:
            pair = _PAIRS.get((merged[-1], word)) if merged else None
            if pair is not None:
                merged[-1] = pair
            else:
                merged.append(word)
        if merged:
            out.append(_Sentence(merged))
    return out


def _conceals(s: _Sentence) -> bool:
    return (
        s.find([(NEGATION, 0), (TELL, 2), (PERSON, 10)])
        or s.find([(NEGATION, 0), (frozenset({"mention", "reveal", "disclose"}), 1), (THIS, 3)])
        or s.find([(HIDE, 0), (frozenset({"from"}), 5), (PERSON, 2)])
        or s.find([(PERSON, 0), (UNAWARE, 2), (NOTICE, 2)])
        or s.find([(PERSON, 0), (frozenset({"won't", "wont"}), 1), (frozenset({"notice"}), 1)])
    )


def _exfiltrates(s: _Sentence) -> bool:
    return s.find([(READ, 0), (CREDENTIAL, 10), (PASS_ON, 10)])


def _redirects(s: _Sentence) -> bool:
    return (
        s.find([(NEGATION - {"without"}, 0), (USE, 2), (TOOL, 4)], unless=_words("this"))
        or s.find([(WHEN, 0), (USE, 3), (ANY_OTHER, 3), (TOOL, 3)])
        or s.find(_WHILE_PRESENT)
        or s.find([(frozenset({"side_effect"}), 0), (frozenset({"on"}), 3), (TOOL, 6)])
        or s.find([(ANY_OTHER, 0), (TRAFFIC, 1), (MUST, 3), (ROUTED, 4)])
    )


def _overrides(s: _Sentence) -> bool:
    return s.find([(IGNORE, 0), (EARLIER, 3), (ORDERS, 2)]) or s.find(
        [(SUPERSEDE, 0), (EARLIER, 3), (ORDERS, 2)]
    )


_SENTENCE_RULES: Final = (
    (CONCEAL, _conceals),
    (EXFILTRATION, _exfiltrates),
    (OTHER_TOOLS, _redirects),
    (OVERRIDE, _overrides),
)


def check(texts: Iterable[tuple[str, str]]) -> list[Finding]:
    """The findings of every rule in ``texts`` (``(where, text)``, cleaned), at most one
    per rule and text."""
    out: list[Finding] = []
    for where, text in texts:
        if not text:
            continue
        lower = text.lower()
        hidden = _hidden_section(text, lower)
        if hidden is not None:
            out.append(Finding(HIDDEN_SECTION, where, _excerpt(text, hidden)))
        path = _sensitive_path(lower)
        if path is not None:
            out.append(Finding(SENSITIVE_FILE, where, _excerpt(text, path)))
        sentences = _sentences(text)
        for rule, matches in _SENTENCE_RULES:
            hit = next((s for s in sentences if matches(s)), None)
            if hit is not None:
                out.append(Finding(rule, where, _clip(" ".join(hit.words))))
    return out


def _hidden_section(text: str, lower: str) -> int | None:
    """Where a long tagged block or a wall of blank lines starts, if there is one."""
    for tag in HIDDEN_TAGS:
        for opener in (f"<{tag}>", f"<{tag} ", f"[{tag}]"):
            at = lower.find(opener)
            if at < 0:
                continue
            body = at + len(opener)
            end = lower.find(f"</{tag}", body)
            if (end if end >= 0 else len(lower)) - body >= _LONG_BLOCK:
                return at
    at = lower.find("<!--")
    if at >= 0:
        end = lower.find("-->", at)
        if (end if end >= 0 else len(lower)) - at >= _LONG_BLOCK:
            return at
    return _after_blank_lines(text)


def _after_blank_lines(text: str) -> int | None:
    """Where text resumes after a run of blank lines long enough to hide it."""
    run = 0
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            if run >= _BLANK_LINES:
                return offset
            run = 0
        else:
            run += 1
        offset += len(line) + 1
    return None


def _sensitive_path(lower: str) -> int | None:
    for needle in SENSITIVE_PATHS:
        start = 0
        while True:
            at = lower.find(needle, start)
            if at < 0:
                break
            end = at + len(needle)
            if _bounded(lower, at, end) and not lower.startswith(_SHARED_SUFFIXES, end):
                return at
            start = at + 1
    return None


def _bounded(lower: str, start: int, end: int) -> bool:
    """Not part of a longer name: ``.env`` is a file, ``process.env.x`` is not."""
    before = lower[start - 1] if start > 0 else " "
    after = lower[end] if end < len(lower) else " "
    if before.isalnum() or before == "_":
        return False
    return not (lower[end - 1].isalnum() and (after.isalnum() or after == "_"))


def _excerpt(text: str, at: int) -> str:
    start = max(0, at - 20)
    return _clip(" ".join(text[start : start + _EXCERPT].split()))


def _clip(text: str) -> str:
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."
