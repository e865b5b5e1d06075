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
from collections.abc import Iterable
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


WORD: Final = re.compile(r"[a-z0-9_']++")
_SENTENCE_END: Final = re.compile(r"[.!?;](?=\s)|\n")
# Two words that read as one.
PAIRS: Final = {
    ("do", "not"): "don't",
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

# Files and stores no tool description has reason to send a model to, each with a word
# it is read as (a text without the word cannot name the file).
SENSITIVE_PATHS: Final = (
    ("~/.ssh", "ssh"),
    (".ssh/", "ssh"),
    ("id_rsa", "id_rsa"),
    ("id_dsa", "id_dsa"),
    ("id_ecdsa", "id_ecdsa"),
    ("id_ed25519", "id_ed25519"),
    ("authorized_keys", "authorized_keys"),
    (".aws/credentials", "aws"),
    (".aws/config", "aws"),
    (".azure/", "azure"),
    ("application_default_credentials", "application_default_credentials"),
    ("mcp.json", "mcp"),
    ("claude_desktop_config", "claude_desktop_config"),
    ("/etc/passwd", "passwd"),
    ("/etc/shadow", "shadow"),
    (".netrc", "netrc"),
    (".npmrc", "npmrc"),
    (".pypirc", "pypirc"),
    (".git-credentials", "credentials"),
    (".docker/config.json", "docker"),
    (".kube/config", "kube"),
    (".gnupg", "gnupg"),
    (".bash_history", "bash_history"),
    (".zsh_history", "zsh_history"),
    ("wallet.dat", "wallet"),
    ("cookies.sqlite", "sqlite"),
    ("login data", "login"),
    (".env", "env"),
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
BLANK_LINES: Final = 20  # blank lines in a row that push text out of view


Step = tuple[frozenset[str], int]  # (words, how many words may come before it)


class Pattern:
    """Words that follow each other in one sentence, each set's word within its gap of
    the last (``unless``: none of these in a gap)."""

    __slots__ = ("key", "steps", "unless")

    def __init__(self, *steps: Step, unless: frozenset[str] = frozenset(), key: int = 0) -> None:
        self.steps = steps
        self.unless = unless
        # The step whose words descriptions use least: a text without any of them is
        # passed over at once.
        self.key = steps[key][0]

    def possible(self, words: set[str]) -> bool:
        """Whether a text of these words could match at all (every step's words occur):
        most texts are ruled out here, without reading them sentence by sentence."""
        return all(not words.isdisjoint(wanted) for wanted, _ in self.steps)

    def found(self, words: list[str]) -> bool:
        """Whether the pattern is in one sentence's ``words`` (the first occurrence of
        each step's words after the last is taken)."""
        first = self.steps[0][0]
        for i, word in enumerate(words):
            if word not in first:
                continue
            at = i
            for wanted, gap in self.steps[1:]:
                nxt = -1
                for j in range(at + 1, min(len(words), at + gap + 2)):
                    if words[j] in wanted:
                        nxt = j
                        break
                    if words[j] in self.unless:
                        break
                if nxt < 0:
                    break
                at = nxt
            else:
                return True
        return False


SENTENCE_RULES: Final[tuple[tuple[str, tuple[Pattern, ...]], ...]] = (
    (
        CONCEAL,
        (
            Pattern((NEGATION, 0), (TELL, 2), (PERSON, 10)),
            Pattern((NEGATION, 0), (_words("mention reveal disclose"), 1), (THIS, 3)),
            Pattern((HIDE, 0), (_words("from"), 5), (PERSON, 2)),
            Pattern((PERSON, 0), (UNAWARE, 2), (NOTICE, 2), key=1),
            Pattern((PERSON, 0), (_words("won't wont"), 1), (_words("notice"), 1), key=1),
        ),
    ),
    (EXFILTRATION, (Pattern((READ, 0), (CREDENTIAL, 10), (PASS_ON, 10), key=1),)),
    (
        OTHER_TOOLS,
        (
            Pattern((NEGATION - {"without"}, 0), (USE, 2), (TOOL, 4), unless=_words("this")),
            Pattern((WHEN, 0), (USE, 3), (ANY_OTHER, 3), (TOOL, 3)),
            # "when this tool is available": how shadowing speaks of the others.
            Pattern(
                (_words("when whenever while if"), 0),
                (_words("this"), 0),
                (TOOL, 0),
                (_words("is are"), 1),
                (PRESENT, 1),
                key=4,
            ),
            Pattern((_words("side_effect"), 0), (_words("on"), 3), (TOOL, 6)),
            Pattern((ANY_OTHER, 0), (TRAFFIC, 1), (MUST, 3), (ROUTED, 4), key=3),
        ),
    ),
    (
        OVERRIDE,
        (
            Pattern((IGNORE, 0), (EARLIER, 3), (ORDERS, 2)),
            Pattern((SUPERSEDE, 0), (EARLIER, 3), (ORDERS, 2)),
        ),
    ),
)
PAIR_FIRSTS: Final = frozenset(first for first, _ in PAIRS)
_KEYS: Final = frozenset().union(*(p.key for _, ps in SENTENCE_RULES for p in ps))
# A text with none of these words (as written, before pairs are made one) matches no
# pattern: the keys, and the first word of each pair that makes one.
RAW_KEYS: Final = _KEYS | {first for (first, _), one in PAIRS.items() if one in _KEYS}
PATHS_BY_WORD: Final = {
    word: tuple(needle for needle, w in SENSITIVE_PATHS if w == word) for _, word in SENSITIVE_PATHS
}
PATH_WORDS: Final = frozenset(PATHS_BY_WORD)


def _merged(words: list[str]) -> list[str]:
    """Words with the pairs that read as one (``do not``) made one."""
    out: list[str] = []
    for word in words:
        pair = PAIRS.get((out[-1], word)) if out else None
        if pair is not None:
            out[-1] = pair
        else:
            out.append(word)
    return out


def _sentence_findings(
    where: str, lower: str, words: list[str], present: set[str]
) -> list[Finding]:
    if present.isdisjoint(RAW_KEYS):
        return []
    if not present.isdisjoint(PAIR_FIRSTS):
        present = present | set(_merged(words))  # every word, and every pair made one
    wanted = [
        (rule, viable)
        for rule, patterns in SENTENCE_RULES
        if (viable := [p for p in patterns if p.possible(present)])
    ]
    if not wanted:
        return []
    sentences = [
        w for w in (_merged(WORD.findall(part)) for part in _SENTENCE_END.split(lower)) if w
    ]
    out = []
    for rule, patterns in wanted:
        hit = next((s for s in sentences if any(p.found(s) for p in patterns)), None)
        if hit is not None:
            out.append(Finding(rule, where, _clip(" ".join(hit))))
    return out


def check(texts: Iterable[tuple[str, str]]) -> list[Finding]:
    """The findings of every rule in ``texts`` (``(where, text)``, cleaned), at most one
    per rule and text."""
    out: list[Finding] = []
    for where, text in texts:
        if not text:
            continue
        lower = text.lower().replace("\u2019", "'")
        hidden = _hidden_section(text, lower)
        if hidden is not None:
            out.append(Finding(HIDDEN_SECTION, where, _excerpt(text, hidden)))
        words = WORD.findall(lower)
        present = set(words)
        path = _sensitive_path(lower, present)
        if path is not None:
            out.append(Finding(SENSITIVE_FILE, where, _excerpt(text, path)))
        out += _sentence_findings(where, lower, words, present)
    return out


def _hidden_section(text: str, lower: str) -> int | None:
    """Where a long tagged block or a wall of blank lines starts, if there is one."""
    if lower.count("\n") >= BLANK_LINES:
        at = _after_blank_lines(text)
        if at is not None:
            return at
    if "<" not in lower and "[" not in lower:
        return None
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
    return None


def _after_blank_lines(text: str) -> int | None:
    """Where text resumes after a run of blank lines long enough to hide it."""
    run = 0
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            if run >= BLANK_LINES:
                return offset
            run = 0
        else:
            run += 1
        offset += len(line) + 1
    return None


def _sensitive_path(lower: str, present: set[str]) -> int | None:
    if present.isdisjoint(PATH_WORDS):
        return None
    for needle, word in SENSITIVE_PATHS:
        if word not in present:
            continue
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
    """The text around ``at``, from the start of a word a little before it."""
    start = max(0, at - 20)
    space = text.find(" ", start, at)
    if start > 0 and space >= 0:
        start = space + 1
    return _clip(" ".join(text[start : start + _EXCERPT].split()))


def _clip(text: str) -> str:
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 3] + "..."
