"""Whether a summary keeps the facts of the turns it replaces (deterministic, no model).

A fact is what a follow-up question is likely to need verbatim, taken from the transcript the
summarizer was given:

- a number (``42``, ``3.5``, ``1,200``: compared without thousands separators);
- a proper name: a capitalized word that does not open a sentence or a message and is not a
  common word (``Paris``, ``Alice``; not ``The``);
- an identifier: a word joined by ``_``, ``-`` or ``.``, or mixing letters and digits
  (``ORD-1234``, ``calc.multiply``, ``gpt4``): tool names, order numbers, file names.

Only the :data:`MAX_FACTS` facts mentioned most often (then latest) are checked, so that a long
span's summary is held to what mattered in it. A summary keeps a number if it writes the same
number, a name or identifier if it writes it (any case) or, for an identifier, its last part
(``multiply`` for ``calc__multiply``, ``get_weather`` for ``weather.get_weather``). It passes when it loses at most :data:`MAX_LOST_SHARE` of
the facts checked.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

MAX_FACTS = 40
"""The most facts a summary is checked for."""

MAX_LOST_SHARE = 0.2
"""The share of the checked facts a summary may lose."""

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
_IDENTIFIER = re.compile(
    r"\b[A-Za-z][A-Za-z0-9]*(?:(?:__|[_.\-])[A-Za-z0-9]+)+\b|\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{3,}\b"
)
_NAME = re.compile(r"(?<=[^\s.!?:\[{(\"'])[ \t]+([^\W\d_]{2,})\b")
_ROLE = re.compile(r"^(?:user|assistant|system|tool): ", re.M)
_COMMON = frozenset(
    "The This That These Those It Its I A An In On At To Of For And But Or If So We You He She They "
    "My Your Our Their What When Where Why How Which Who Yes No Please Thanks Thank Hello Hi Ok Okay "
    "Sure Also Then Now Here There Is Are Was Were Do Does Did Can Could Would Should Will Let".split()
)
"""Capitalized words that are not names, mid-sentence too (a query written after a label)."""
_PARTS = re.compile(r"__|[.\-]")


@dataclass(frozen=True)
class Check:
    """The facts checked and those the summary lost."""

    facts: tuple[str, ...]
    lost: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return len(self.lost) <= MAX_LOST_SHARE * len(self.facts)


def facts(transcript: str) -> tuple[str, ...]:
    """The facts of ``transcript`` to check a summary for (see the module docstring), most
    mentioned first."""
    text = _ROLE.sub("\n", transcript)
    found: list[str] = []
    for match in _IDENTIFIER.finditer(text):
        found.append(match.group())
    words = _IDENTIFIER.sub(" _ ", text)
    for match in _NUMBER.finditer(words):
        found.append(_number(match.group()))
    found += (
        word
        for word in (match.group(1) for match in _NAME.finditer(words))
        if word[0].isupper() and word not in _COMMON
    )
    counts = Counter(found)
    last = {fact: index for index, fact in enumerate(found)}
    ranked = sorted(counts, key=lambda fact: (-counts[fact], -last[fact]))
    return tuple(ranked[:MAX_FACTS])


def check(summary: str, transcript: str) -> Check:
    """Which facts of ``transcript`` ``summary`` lost."""
    checked = facts(transcript)
    numbers = {_number(n) for n in _NUMBER.findall(summary)}
    lower = summary.lower()
    lost = tuple(fact for fact in checked if not _kept(fact, numbers, lower))
    return Check(checked, lost)


def _kept(fact: str, numbers: set[str], summary: str) -> bool:
    if _NUMBER.fullmatch(fact):
        return fact in numbers
    word = fact.lower()
    if re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", summary):
        return True
    last = _PARTS.split(word)[-1]
    return (
        last != word
        and len(last) > 2
        and re.search(rf"(?<![\w]){re.escape(last)}(?![\w])", summary) is not None
    )


def _number(text: str) -> str:
    return text.replace(",", "")
