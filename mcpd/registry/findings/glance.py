"""A first look at server text: whether any finding rule (``rules``) could find
something in it, so that most texts are never read sentence by sentence.

An item's texts are looked at together, in one pass in C for their words and a few
set operations: a text in which no rule has the words it needs (a word of each step
of one of its patterns, a file's word and name, a tag's name, an HTML comment, a run
of line feeds) cannot match, and the rules are run only on the others. Schemas are
looked at as the JSON they are, keys and all: more words can only make a text more
worth reading, never less.
"""

from __future__ import annotations

import re
from typing import Final

from .rules import (
    BLANK_LINES,
    HIDDEN_TAGS,
    PAIR_FIRSTS,
    PAIRS,
    PATH_WORDS,
    PATHS_BY_WORD,
    RAW_KEYS,
    SENTENCE_RULES,
    WORD,
)

# Each pattern's word sets, one per step: a text is worth reading sentence by sentence
# for a pattern only if it has a word of each.
_STEP_WORDS: Final = tuple(
    tuple(words for words, _ in p.steps) for _, ps in SENTENCE_RULES for p in ps
)
# Where a hidden section may start: an opener of a tagged block, or an HTML comment.
_OPENER: Final = re.compile("|".join([f"<{tag}[> ]|\\[{tag}\\]" for tag in HIDDEN_TAGS] + ["<!--"]))
# ASCII text with every byte that is in no word a space: its words are what split gives.
_WORDS_ONLY: Final = bytes(b if chr(b).isalnum() or b in b"_'" else 32 for b in range(128)) + (
    b" " * 128
)
_TAGS: Final = frozenset(HIDDEN_TAGS)
_PAIRS: Final = tuple(PAIRS.items())
# A text without any of these words, no HTML comment and few line feeds is ruled out.
_WORTH_READING: Final = RAW_KEYS | PATH_WORDS | _TAGS


def may_find(text: str) -> bool:
    """Whether ``check`` could find anything in texts (cleaned) whose characters are
    all in ``text`` in the same order, each text whole and set off from the next by a
    character that is in no word, no file name and no tag (a tab): a pass over the
    text in C for its words, then set operations, decide it for most texts.

    Every rule needs something here: a hidden section an HTML comment, a tag's opener
    or enough line feeds; a sensitive file its word and its name; a sentence rule a
    word of each of its steps (with two words made one wherever both are in the text,
    which is more than where they are in a row)."""
    lower = text.lower().replace("\u2019", "'")
    if "<!--" in lower or lower.count("\n") >= BLANK_LINES:
        return True
    return _may_match(lower, WORD.findall(lower))


def may_find_ascii(data: bytes) -> bool:
    """``may_find`` for ASCII text, its words split out by bytes operations."""
    lower = data.lower()
    if b"<!--" in lower or lower.count(b"\n") >= BLANK_LINES:
        return True
    words = lower.translate(_WORDS_ONLY).decode("ascii").split()
    if _WORTH_READING.isdisjoint(words):
        return False
    return _may_match(lower.decode("ascii"), words)


def _may_match(lower: str, words: list[str]) -> bool:
    if _WORTH_READING.isdisjoint(words):
        return False
    present = set(words)
    if not present.isdisjoint(_TAGS) and _OPENER.search(lower) is not None:
        return True
    for word in present & PATH_WORDS:
        if any(needle in lower for needle in PATHS_BY_WORD[word]):
            return True
    if present.isdisjoint(RAW_KEYS):
        return False
    if not present.isdisjoint(PAIR_FIRSTS):
        present.update([one for (a, b), one in _PAIRS if a in present and b in present])
    for steps in _STEP_WORDS:
        for words_of_step in steps:
            if present.isdisjoint(words_of_step):
                break
        else:
            return True
    return False
