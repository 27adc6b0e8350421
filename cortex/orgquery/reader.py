"""The query language, read: a query is data (Hy text, a Hy form, Python data such as `["tags", "x"]`) read
into a tree of predicates (`cortex.orgquery.predicates`); nothing is evaluated. An Org match string is read by
`cortex.orgquery.matchstrings`; `parse_query` takes either.

    (and (todo "TODO") (tags "security") (deadline :to "+7d"))

Names and arguments follow org-ql where it has them (`todo`, `done`, `tags`, `tags-all`, `tags-local`,
`tags-inherited`, `tags-regexp`, `property`, `priority`, `level`, `heading`, `heading-regexp`, `regexp`,
`path`, `category`, `ancestors`, `parent`, `children`, `descendants`, `scheduled`, `deadline`, `closed`,
`planning`, `ts`, `ts-active`, `ts-inactive`, `clocked`; a bare string is `(regexp "string")`), plus
`links-to`, `linked-from` and `valid`: `(valid)` a headline that holds now and was not replaced, `(valid :at
"2026-11-01")` one that held then (at some time of that day, or at "2026-11-01 14:00"), as its validity
properties say (`cortex.memory.validity`; one that says none always holds). Where they differ: regexps are RE2's syntax (what Python users write; Org
match strings translate Emacs's), always case-insensitive as in org-ql; `path` takes globs or folder
prefixes of the paths in the store, not regexps of absolute file names; dates are days (`:from` `:to` `:on`
take "today", "+7d", "-2w", "2026-11-23" or a number of days from today), and a range timestamp matches
when it overlaps the period; `(property NAME OP VALUE)` compares as Org's match strings do (a missing
property reads as "" or 0), and `:regexp` matches its value.

Every mistake is a QueryError quoting a short prefix of the form, at its line and column when it was read
from text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import hy

from ..errors import located
from ..words import QUOTED, quoted
from .dates import parse_moment, parse_when
from .errors import QueryError
from .matchstrings import compile_match
from .predicates import (
    COMPARATORS,
    DATE_KINDS,
    And,
    Category,
    Done,
    Heading,
    Level,
    Links,
    Not,
    Or,
    Path,
    Predicate,
    Priority,
    Property,
    Regexp,
    Related,
    Tags,
    TagsRegexp,
    Todo,
    Valid,
    When,
    regexp,
    time_value,
)

__all__ = ["ALIASES", "NAMES", "parse", "parse_query", "read"]

DEADLINE_WARNING_DAYS = 14  # Org's org-deadline-warning-days, for (deadline auto)


def parse_query(query, *, match: bool | None = None, today: date | None = None) -> Predicate:
    """The predicate of a query: a predicate form (Hy text, a Hy form, Python data) or, with `match` (by
    default: text not starting with "("), an Org match string. Relative dates count from `today`."""
    if isinstance(query, str) and match is None:
        match = not query.lstrip().startswith("(")
    if match:
        if not isinstance(query, str):
            raise QueryError(f"a match string is text, not {quoted(query)}")
        return compile_match(query)
    return parse(query, today)


@dataclass(frozen=True)
class _Call:
    """A predicate form as read: its name, positional and keyword arguments, and the form itself."""

    name: str
    args: list
    keywords: dict
    form: Any


def parse(query, today: date | None = None) -> Predicate:
    """The predicate tree of a query: Hy text, a Hy form, Python data (`["tags", "x"]`) or a predicate.

    Several top-level forms are all required (`and`). Relative dates count from `today` (default: today).
    """
    if isinstance(query, Predicate):
        return query
    today = today or date.today()
    if isinstance(query, str) and not isinstance(query, hy.models.Object):
        forms = read(query)
        return _build(forms[0], today) if len(forms) == 1 else And(tuple(_build(f, today) for f in forms))
    return _build(query, today)


def read(text: str) -> list:
    """The forms of a query written in Hy, read as data (nothing is evaluated)."""
    try:
        forms = list(hy.read_many(text))
    except hy.PrematureEndOfInput:
        raise QueryError(f"query: incomplete form (a parenthesis or quote is not closed): {text.strip()}") from None
    except Exception as exc:  # noqa: BLE001 - the reader's errors have many types; each is a user mistake
        raise QueryError(f"query: cannot read {quoted(text.strip())}: {str(exc).splitlines()[0]}") from None
    if not forms:
        raise QueryError("query: empty query; write a predicate form, e.g. (todo \"TODO\")")
    return forms


def show(form) -> str:
    """A form as Hy text, to quote it in a message: its first QUOTED characters and its length when longer."""
    text = _text(form)
    return text if len(text) <= QUOTED else f"{text[:QUOTED]}… ({len(text):,} characters)"


def _text(form) -> str:
    if isinstance(form, hy.models.Keyword):
        return f":{form.name}"
    if isinstance(form, hy.models.Symbol):
        return str(form)
    if isinstance(form, bool):
        return str(form)
    if isinstance(form, int):
        digits = form.bit_length() * 3 // 10
        return repr(int(form)) if digits < 300 else f"a number of about {digits} digits"
    if isinstance(form, float):
        return repr(float(form))
    if isinstance(form, str):
        return hy.repr(str(form)[:QUOTED + 1])
    if isinstance(form, (list, tuple)):
        return "(" + " ".join(_text(x) for x in form[:QUOTED]) + ")"
    if isinstance(form, Predicate):
        return repr(form)
    return str(form)


def error(form, message: str) -> QueryError:
    """A QueryError quoting `form`, at its line and column when it was read from text."""
    line = getattr(form, "start_line", None)
    column = getattr(form, "start_column", None)
    return QueryError(located("query", line, f"{message}", column) if line else f"query: {message}")


def _build(form, today: date) -> Predicate:
    if isinstance(form, Predicate):
        return form
    if isinstance(form, str) and not isinstance(form, (hy.models.Symbol, hy.models.Keyword)):
        return Regexp((str(form),))  # a bare string, as in org-ql
    call = _call(form)
    builder = _PREDICATES.get(call.name)
    if builder is None:
        raise error(form, f"unknown predicate {show(form)}; known: {', '.join(NAMES)}")
    predicate = builder(call, today)
    unused = set(call.keywords) - _KEYWORDS.get(call.name, set())
    if unused:
        raise error(form, f"{call.name} takes no :{sorted(unused)[0]} in {show(form)}")
    return predicate


def _call(form) -> _Call:
    """A form's name and arguments; `:name` keywords (Hy keywords, or ":name" strings in Python data) pair
    with the value after them."""
    if not isinstance(form, (list, tuple)) or not form or not isinstance(form[0], str) \
            or isinstance(form[0], hy.models.Keyword):
        raise error(form, f"expected a predicate form such as (todo \"TODO\"), got {show(form)}")
    name = ALIASES.get(str(form[0]), str(form[0]))
    plain = not isinstance(form, hy.models.Object)
    args, keywords, items = [], {}, [_value(item) for item in form[1:]]
    while items:
        item = items.pop(0)
        key = item.name if isinstance(item, hy.models.Keyword) else \
            item[1:] if plain and isinstance(item, str) and item.startswith(":") and len(item) > 1 else None
        if key is None:
            args.append(item)
        elif not items:
            raise error(form, f":{key} has no value in {show(form)}")
        else:
            keywords[key.replace("_", "-")] = items.pop(0)
    return _Call(name, args, keywords, form)


def _value(item):
    """A Hy number or string as the Python value (Hy's models compare unequal to them); symbols, keywords and
    forms stay models."""
    for model, kind in ((hy.models.Integer, int), (hy.models.Float, float), (hy.models.String, str)):
        if isinstance(item, model):
            return kind(item)
    return item


def _strings(call: _Call, at_least: int = 0) -> tuple[str, ...]:
    """The arguments as strings (numbers and symbols read as their text)."""
    for arg in call.args:
        if isinstance(arg, (list, tuple, bool)) or arg is None:
            raise error(call.form, f"{call.name} takes strings, not {show(arg)}, in {show(call.form)}")
    if len(call.args) < at_least:
        raise error(call.form, f"{call.name} needs {'an argument' if at_least == 1 else f'{at_least} arguments'}"
                               f" in {show(call.form)}")
    return tuple(str(arg) for arg in call.args)


def _no_args(call: _Call) -> None:
    if call.args:
        raise error(call.form, f"{call.name} takes no arguments, in {show(call.form)}")


def _flag(call: _Call, name: str) -> bool:
    value = call.keywords.get(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if str(value) in ("t", "True", "true", "yes"):
        return True
    if str(value) in ("nil", "False", "false", "no", "None"):
        return False
    raise error(call.form, f":{name} takes t or nil, not {show(value)}, in {show(call.form)}")


def _sub(call: _Call, today: date, optional: bool) -> Predicate | None:
    if not call.args and optional:
        return None
    if len(call.args) != 1:
        raise error(call.form, f"{call.name} takes {'at most ' if optional else ''}one query, in {show(call.form)}")
    return _build(call.args[0], today)


def _comparator(call: _Call, arg) -> str | None:
    text = str(arg) if isinstance(arg, str) else None
    return text if text in COMPARATORS else None


def _logic(call: _Call, today: date) -> Predicate:
    parts = tuple(_build(arg, today) for arg in call.args)
    if call.name == "not":
        if len(parts) != 1:
            raise error(call.form, f"not takes one query, in {show(call.form)}")
        return Not(parts[0])
    if not parts:
        raise error(call.form, f"{call.name} needs at least one query, in {show(call.form)}")
    return parts[0] if len(parts) == 1 else (And if call.name == "and" else Or)(parts)


def _todo(call: _Call, today: date) -> Predicate:
    return Todo(_strings(call))


def _done(call: _Call, today: date) -> Predicate:
    _no_args(call)
    return Done()


def _tags(mode: str) -> Callable[[_Call, date], Predicate]:
    return lambda call, today: Tags(_strings(call), mode)


def _tags_regexp(call: _Call, today: date) -> Predicate:
    patterns = _strings(call, 1)
    for p in patterns:
        _checked(call, p)
    return TagsRegexp(patterns)


def _checked(call: _Call, pattern: str) -> str:
    try:
        regexp(pattern)
    except QueryError as exc:
        raise error(call.form, f"{str(exc)} in {show(call.form)}") from None
    return pattern


def _property(call: _Call, today: date) -> Predicate:
    args = call.args
    if not args or not isinstance(args[0], str) or len(args) > 3:
        raise error(call.form, f"property takes a name, then a value or a comparator and a value, in {show(call.form)}")
    name, inherit = str(args[0]), _flag(call, "inherit")
    pattern = call.keywords.get("regexp")
    if pattern is not None:
        if len(args) > 1:
            raise error(call.form, f"property takes a value or a :regexp, not both, in {show(call.form)}")
        return Property(name, "~", _checked(call, str(pattern)), "regexp", inherit)
    if len(args) == 1:
        return Property(name, inherit=inherit)
    op = "=" if len(args) == 2 else _comparator(call, args[1])
    if op is None:
        raise error(call.form, f"{show(args[1])} is not a comparator (one of {' '.join(COMPARATORS)}) "
                               f"in {show(call.form)}")
    value = args[-1]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise error(call.form, f"property compares with a string or a number, not {show(value)}")
    if isinstance(value, (int, float)):
        return Property(name, op, float(value), "number", inherit)
    try:
        when = time_value(str(value))
    except QueryError as exc:
        raise error(call.form, f"{exc}, in {show(call.form)}") from None
    if when is not None:
        return Property(name, op, when, "time", inherit)
    return Property(name, op, str(value), "string", inherit)


def _priority(call: _Call, today: date) -> Predicate:
    args = _strings(call)
    op = _comparator(call, call.args[0]) if len(args) == 2 else None
    letters = args[1:] if op else args
    if op and len(letters) != 1 or any(len(x) != 1 for x in letters):
        raise error(call.form, f"priority takes letters, or a comparator and a letter, in {show(call.form)}")
    return Priority(letters, op)


def _level(call: _Call, today: date) -> Predicate:
    args = call.args
    numbers = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if len(args) == 1 and numbers:
        return Level(numbers[0])
    if len(args) == 2 and len(numbers) == 2:
        return Level(min(numbers), max(numbers))
    if len(args) == 2 and isinstance(args[1], int) and _comparator(call, args[0]):
        return Level(args[1], op=str(args[0]))
    raise error(call.form, f"level takes N, LOW HIGH, or a comparator and N, in {show(call.form)}")


def _heading(call: _Call, today: date) -> Predicate:
    return Heading(_strings(call, 1))


def _regexps(heading: bool) -> Callable[[_Call, date], Predicate]:
    def build(call: _Call, today: date) -> Predicate:
        return Regexp(tuple(_checked(call, p) for p in _strings(call, 1)), heading)

    return build


def _path(call: _Call, today: date) -> Predicate:
    return Path(_strings(call))


def _category(call: _Call, today: date) -> Predicate:
    return Category(_strings(call, 1))


def _related(call: _Call, today: date) -> Predicate:
    return Related(call.name, _sub(call, today, optional=True))


def _when(call: _Call, today: date) -> Predicate:
    kind, keys = call.name, call.keywords
    first, last = (_day(call, keys[k], today) if k in keys else None for k in ("from", "to"))
    if "on" in keys:
        if first or last:
            raise error(call.form, f":on takes the place of :from and :to, in {show(call.form)}")
        first = last = _day(call, keys["on"], today)
    if call.args:
        if len(call.args) != 1 or keys.keys() - {"min"}:
            raise error(call.form, f"{kind} takes one number of days or :from :to :on, in {show(call.form)}")
        arg = call.args[0]
        if kind == "deadline" and str(arg) == "auto":
            first, last = None, today + timedelta(days=DEADLINE_WARNING_DAYS)
        else:
            # org-ql: a number looks back for what was done (from), ahead for what is planned (to)
            day = _day(call, arg, today)
            first, last = (day, None) if kind in ("clocked", "closed") else (None, day)
    minutes = _minutes(call, keys["min"]) if "min" in keys and kind == "clocked" else 0
    return When(kind, first, last, minutes)


def _day(call: _Call, value, today: date) -> date:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return today + timedelta(days=value)
        except OverflowError:
            raise error(call.form, f"{show(value)} days from today lies past the years 1 to 9999 that a date can "
                                   f"have, in {show(call.form)}") from None
    if not isinstance(value, str):
        raise error(call.form, f"{show(value)} is not a date in {show(call.form)}")
    try:
        return parse_when(str(value), today)
    except QueryError as exc:
        raise error(call.form, f"{exc} in {show(call.form)}") from None


def _minutes(call: _Call, value) -> int:
    """A duration: minutes as a number, or H:MM."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    hours, colon, minutes = str(value).partition(":")
    if colon and hours.isdigit() and minutes.isdigit() and len(minutes) == 2:
        return int(hours) * 60 + int(minutes)
    raise error(call.form, f":min takes minutes or H:MM, not {show(value)}, in {show(call.form)}")


def _links(direction: str) -> Callable[[_Call, date], Predicate]:
    def build(call: _Call, today: date) -> Predicate:
        if len(call.args) != 1:
            raise error(call.form, f"{call.name} takes an :ID: or a query, in {show(call.form)}")
        target = call.args[0]
        if isinstance(target, str) and not isinstance(target, hy.models.Symbol):
            return Links(direction, str(target))
        return Links(direction, _build(target, today))

    return build


def _valid(call: _Call, today: date) -> Predicate:
    _no_args(call)
    if "at" not in call.keywords:
        return Valid()
    value = call.keywords["at"]
    if isinstance(value, int) and not isinstance(value, bool):
        return Valid(_day(call, value, today))
    if not isinstance(value, str):
        raise error(call.form, f"{show(value)} is not a moment in {show(call.form)}")
    try:
        return Valid(parse_moment(str(value), datetime.combine(today, datetime.now().time())))
    except QueryError as exc:
        raise error(call.form, f"{exc} in {show(call.form)}") from None


_PREDICATES: dict[str, Callable[[_Call, date], Predicate]] = {
    "and": _logic, "or": _logic, "not": _logic, "todo": _todo, "done": _done,
    "tags": _tags("any"), "tags-all": _tags("all"), "tags-local": _tags("local"),
    "tags-inherited": _tags("inherited"), "tags-regexp": _tags_regexp,
    "property": _property, "priority": _priority, "level": _level, "category": _category,
    "heading": _heading, "heading-regexp": _regexps(True), "regexp": _regexps(False), "path": _path,
    "ancestors": _related, "parent": _related, "children": _related, "descendants": _related,
    **{kind: _when for kind in DATE_KINDS},
    "links-to": _links("to"), "linked-from": _links("from"), "valid": _valid,
}
ALIASES = {"tags&": "tags-all", "local-tags": "tags-local", "tags-l": "tags-local", "ltags": "tags-local",
           "inherited-tags": "tags-inherited", "tags-i": "tags-inherited", "itags": "tags-inherited",
           "tags*": "tags-regexp", "h": "heading", "h*": "heading-regexp", "r": "regexp", "ts-a": "ts-active",
           "ts-i": "ts-inactive"}  # org-ql's
_KEYWORDS = {"property": {"inherit", "regexp"}, "clocked": {"from", "to", "on", "min"}, "valid": {"at"},
             **{kind: {"from", "to", "on"} for kind in DATE_KINDS if kind != "clocked"}}
NAMES = tuple(sorted(_PREDICATES))
