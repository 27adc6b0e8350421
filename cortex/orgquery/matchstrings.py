"""Org's own match strings, as org-agenda's tags view and `org-map-entries` read them, compiled to predicates.

    +work-home/TODO    PRIORITY="A"+Effort<"1:00"    LEVEL>1    TODO={NEXT\\|WAITING}/!    -ARCHIVE

This follows `org-make-tags-matcher` of Org 9.5 (the version tests/data/match_oracle.jsonl.gz was made
with): `|` separates alternatives, each a run of terms that must all hold, `-` negates a term and `+`, `:`
or `&` before one change nothing; a term is a tag (inherited ones and #+FILETAGS count), a `{regexp}`
matched against the tags, `LEVEL` compared with a number, or a property compared with a "string" (code
point order), a number (the value's leading number), a "<time>" or "[time]", or a {regexp}. TODO,
PRIORITY (B without a cookie), CATEGORY, ITEM, TAGS, ALLTAGS, SCHEDULED... are Org's special properties;
a missing property compares as "" (or 0). After the last `/` comes the TODO part: keywords or {regexps},
`-` and `|` as before; `/!` keeps only TODO keywords that are not done. Regexps are Emacs's, translated
for RE2 (which never backtracks), and ignore case as Org's matcher does; tags, keywords and strings do not.
RE2's `\\w` and word boundaries are ASCII's letters, digits and `_`, where an Org buffer's word characters
are every letter and digit and `'`: `{\\<Org\\>}` matches "Org's" here, not in Emacs.

Where Org 9.5 is wrong this is not: `<>` on times means unequal (`org-time<>` compares with `=`), a
`/{regexp}` skips headlines without a keyword (Emacs signals an error), and text the grammar cannot
read is an error that says where (Emacs ignores the rest of the term).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..words import quoted
from .errors import QueryError
from .predicates import And, Level, Not, Or, Predicate, Property, Tags, TagsRegexp, Todo, string_to_number, time_value

__all__ = ["compile_match", "emacs_regexp"]

_NUMBER = re.compile(r"-?[.0-9]+(?:[eE][-+]?[0-9]+)?")  # matched at one place, without alternatives to retry
_OPS = {"<": "<", ">": ">", "<=": "<=", "=<": "<=", ">=": ">=", "=>": ">=", "=": "=", "==": "=", "<>": "<>"}


def compile_match(text: str) -> Predicate:
    """The predicate an Org match string stands for (everything, for an empty one)."""
    tags, todo, todo_only = _split(text)
    parts: list[Predicate] = []
    if tags.strip():
        parts.append(_alternatives(tags, text, 0, todo=False))
    if todo is not None and todo.strip():
        parts.append(_alternatives(todo, text, len(text) - len(todo), todo=True))
    if todo_only:
        parts.insert(0, Todo())
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def _split(text: str) -> tuple[str, str | None, bool]:
    """The tags part, the TODO part (after the last run of `/`, unless a `"` follows it) and whether it
    started with `!`."""
    slashes = list(re.finditer("/+", text))
    if not slashes or '"' in text[slashes[-1].start():]:
        return text, None, False
    last = slashes[-1]
    todo = text[last.end():]
    only = todo.startswith("!")
    return text[:last.start()], todo[1:] if only else todo, only


def _alternatives(part: str, text: str, offset: int, todo: bool) -> Predicate:
    """The `|`-separated alternatives of a part (a `\\|` inside a regexp does not separate)."""
    pieces = part.split("|")
    if pieces and pieces[0] == "":
        pieces.pop(0)  # org-split-string ignores a separator at either end
    if pieces and pieces[-1] == "":
        pieces.pop()
    joined: list[list[str]] = []  # each term's pieces
    for piece in pieces:
        if joined and joined[-1][-1].endswith("\\"):
            joined[-1].append(piece)
        else:
            joined.append([piece])
    terms = ["|".join(parts) for parts in joined]
    found, at = [], offset
    for term in terms:
        found.append(_terms(term, text, at, todo))
        at += len(term) + 1
    return found[0] if len(found) == 1 else Or(tuple(found))


def _terms(term: str, text: str, offset: int, todo: bool) -> Predicate:
    """The terms of one alternative, all required."""
    found: list[Predicate] = []
    pos = 0
    while pos < len(term):
        m = _read_term(term, pos)
        if m is None:
            raise QueryError(f"match string {quoted(text)}: cannot read {quoted(term[pos:])} at column "
                             f"{offset + pos + 1}; "
                             "write tags, {regexps}, LEVEL>N, PROP=\"value\" or PROP<N joined by + - and |, "
                             "then /TODO keywords")
        predicate = _todo_term(m) if todo else _tag_term(m, text)
        found.append(Not(predicate) if m.sign == "-" else predicate)
        pos = m.end
    return found[0] if len(found) == 1 else And(tuple(found))


@dataclass(frozen=True)
class _Term:
    """One term as org-make-tags-matcher's regexp reads it: its sign, its text, and the parts of a LEVEL or
    property comparison (None for a tag or a {regexp})."""

    sign: str | None
    token: str
    end: int
    level_op: str | None = None
    level: str | None = None
    name: str | None = None
    op: str | None = None
    value: str | None = None


def _read_term(text: str, pos: int) -> _Term | None:
    """The term at `pos`, read as Org's term regexp reads it, in one pass (the regexp backtracks over every
    split of a word, which takes time exponential in its length): an optional `&` and sign, then a {regexp},
    LEVEL compared with digits, a property name (word characters and `\\-`) compared with a value, or a tag."""
    if text.startswith("&", pos):
        pos += 1
    sign = text[pos] if pos < len(text) and text[pos] in "-+:" else None
    start = pos = pos + (sign is not None)
    if text.startswith("{", pos) and (close := text.find("}", pos + 1)) > pos + 1:
        return _Term(sign, text[pos:close + 1], close + 1)
    if text.startswith("LEVEL", pos):
        op_end = _run(text, pos + 5, "<=>", 2)
        digits_end = _digits(text, op_end)
        if op_end > pos + 5 and digits_end > op_end:
            return _Term(sign, text[start:digits_end], digits_end, text[pos + 5:op_end], text[op_end:digits_end])
    name_end = _name_end(text, pos)
    if name_end > pos:
        op_end = _run(text, name_end, "<>=", 2)
        value_end = _value_end(text, op_end) if op_end > name_end else None
        if value_end is not None:
            return _Term(sign, text[start:value_end], value_end, name=text[pos:name_end],
                         op=text[name_end:op_end], value=text[op_end:value_end])
    end = pos
    while end < len(text) and (_word(text[end]) or text[end] in "@#%"):
        end += 1
    return _Term(sign, text[start:end], end) if end > pos else None


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _run(text: str, pos: int, chars: str, most: int) -> int:
    """Just past the longest run (of at most `most`) of `chars` at `pos`."""
    end = pos
    while end < len(text) and end - pos < most and text[end] in chars:
        end += 1
    return end


def _digits(text: str, pos: int) -> int:
    end = pos
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    return end


def _name_end(text: str, pos: int) -> int:
    """Just past a property name at `pos`: a word character, then word characters and `\\-` (pos: none)."""
    if pos >= len(text) or not _word(text[pos]):
        return pos
    end = pos + 1
    while end < len(text):
        if _word(text[end]):
            end += 1
        elif text.startswith("\\-", end):
            end += 2
        else:
            break
    return end


def _value_end(text: str, pos: int) -> int | None:
    """Just past a compared value at `pos`: a {regexp}, a "string" or a number; None when there is none."""
    if text.startswith("{", pos):
        close = text.find("}", pos + 1)
        return close + 1 if close > pos + 1 else None
    if text.startswith('"', pos):
        close = text.find('"', pos + 1)
        return close + 1 if close >= 0 else None
    number = _NUMBER.match(text, pos)
    return number.end() if number else None


def _todo_term(m: _Term) -> Predicate:
    token = m.token
    if token.startswith("{"):
        return Property("TODO", "~", emacs_regexp(token[1:-1]), "regexp")
    return Todo((token,))


def _tag_term(m: _Term, text: str) -> Predicate:
    token = m.token
    if token.startswith("{"):
        return TagsRegexp((emacs_regexp(token[1:-1]),))
    if m.level is not None:
        if len(m.level) > 9:  # no outline is that deep, and Python reads no more than 4,300 digits
            raise QueryError(f"match string {quoted(text)}: LEVEL {quoted(m.level)} is deeper than any outline")
        return Level(int(m.level), op=_op(m.level_op, text))
    if m.name is None:
        return Tags((token,))
    op, value = _op(m.op, text), m.value
    # Org 9.5 looks the property up by its name as written: `A\-B` names no property
    name = m.name
    if value.startswith("{"):
        return Property(name, "!~" if op == "<>" else "~", emacs_regexp(value[1:-1]), "regexp")
    if value.startswith('"'):
        inner = value[1:-1]
        if re.fullmatch(r"[\[<].*[\]>]", inner):
            try:
                return Property(name, op, time_value(inner), "time")
            except QueryError as exc:
                raise QueryError(f"match string {quoted(text)}: {exc}") from None
        return Property(name, op, inner, "string")
    return Property(name, op, string_to_number(value), "number")


def _op(op: str, text: str) -> str:
    found = _OPS.get(op)
    if found is None:
        raise QueryError(f"match string {quoted(text)}: {op!r} is no comparator; use one of < <= = >= > <>")
    return found


def emacs_regexp(pattern: str) -> str:
    """An Emacs regexp in RE2's syntax: `\\(` `\\|` `\\{` are groups, alternatives and counts, bare ones
    are characters; `\\<` `\\>` `\\_<` `\\_>` word boundaries; `\\s-` `\\sw` syntax classes; backslashes
    inside brackets are characters. Back-references have no RE2 equivalent and are refused."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 == n:
                raise QueryError(f"regexp {quoted(pattern)} ends with a lone backslash")
            d = pattern[i + 1]
            i += 2
            if d == "(" and pattern.startswith("?:", i):
                out.append("(?:")
                i += 2
            elif d in "(){}|":
                out.append(d)
            elif d in "<>":
                out.append(r"\b")
            elif d == "_" and pattern[i:i + 1] in ("<", ">"):
                out.append(r"\b")
                i += 1
            elif d in "bBwW":
                out.append("\\" + d)
            elif d == "`":
                out.append(r"\A")
            elif d == "'":
                out.append(r"\z")
            elif d in "sS" and i < n and pattern[i] in _SYNTAX:
                out.append(_SYNTAX[pattern[i]][d == "S"])
                i += 1
            elif d.isdigit():
                raise QueryError(f"regexp {quoted(pattern)}: back-references (\\{d}) cannot be matched here")
            else:
                out.append(re.escape(d))
        elif c == "[":
            end = _bracket_end(pattern, i)
            out.append(_bracket(pattern[i:end]))
            i = end
        elif c in "(){}|":
            out.append("\\" + c)
            i += 1
        elif c == "^" and out and out[-1] not in ("(", "(?:", "|"):
            out.append(r"\^")
            i += 1
        elif c == "$" and i + 1 < n and not pattern.startswith(("\\)", "\\|"), i + 1):
            out.append(r"\$")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Emacs's syntax classes (\sC, \SC): whitespace, word, symbol and punctuation characters
_SYNTAX = {"-": (r"\s", r"\S"), " ": (r"\s", r"\S"), "w": (r"\w", r"\W"),
           "_": (r"[\w$&*+\-/<=>_|]", r"[^\w$&*+\-/<=>_|]"), ".": ("[[:punct:]]", "[^[:punct:]]")}


def _bracket_end(pattern: str, start: int) -> int:
    """Just past the bracket expression starting at `start` (a `]` first in it is a character)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern):
        if pattern.startswith("[:", i):
            close = pattern.find(":]", i + 2)
            if close >= 0:
                i = close + 2
                continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    raise QueryError(f"regexp {quoted(pattern)}: a bracket is not closed")


def _bracket(text: str) -> str:
    """A bracket expression in RE2's syntax: its backslashes and lone `[` are characters."""
    body, out = text[1:-1], ["["]
    if body.startswith("^"):
        out.append("^")
        body = body[1:]
    i = 0
    while i < len(body):
        if body.startswith("[:", i) and (close := body.find(":]", i + 2)) >= 0:
            out.append(body[i:close + 2])
            i = close + 2
            continue
        out.append("\\" + body[i] if body[i] in "\\[]" else body[i])
        i += 1
    out.append("]")
    return "".join(out)
