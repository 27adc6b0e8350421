"""Forms to definitions: the one place where a (defmemory ...) or (defwebhook ...) is validated."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import hy
import jsonpath_rfc9535
import jwt
from hy.models import Dict, Expression, Float, FString, Integer, Keyword, List, String, Symbol

from cortex.dsl.definitions import (
    OPERATIONS,
    SECTIONS,
    Definition,
    Encoding,
    Fusion,
    HmacAlgorithm,
    JwtSettings,
    MemoryDefinition,
    MemorySearchConfig,
    Provider,
    ReviewPolicy,
    SignatureScheme,
    SourceLocation,
    StoreKind,
    WebhookDefinition,
    WebhookFilter,
)
from cortex.dsl.diagnostics import Problems, clip, did_you_mean
from cortex.dsl.duration import DurationError, parse_duration
from cortex.dsl.jsonpath import compile_query  # as the receiver runs it: RE2, linear time
from cortex.dsl.reader import SourceFile

__all__ = ["JWT_ALGORITHMS", "NAME", "Context", "Dialect", "Parsed", "check_unique", "interpret_form"]

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
JWT_ALGORITHMS = ("HS256", "HS384", "HS512", *sorted(jwt.algorithms.requires_cryptography))
_SEARCH_DEFAULTS = MemorySearchConfig()
_BAD = object()  # a value that was present but wrong, and already reported


@dataclass(frozen=True)
class Dialect:
    """How messages spell keys and form names, so brace-syntax files read in their own words."""

    key: Callable[[str], str]
    form: Callable[[str], str]


HY = Dialect(key=lambda k: f":{k}", form=lambda f: f)


@dataclass
class Context:
    """Where diagnostics of one source go while it is interpreted."""

    source: SourceFile
    dialect: Dialect = HY
    problems: Problems = field(default_factory=Problems)

    def error(self, model, message: str, shift: int = 0) -> None:
        """Report a problem at a model's position, `shift` columns to the right."""
        self.problems.add(self.source.at(model.start_line, model.start_column + shift, message))


@dataclass(frozen=True)
class Parsed:
    """A definition with the models its cross-form checks point at."""

    definition: Definition
    form: Expression
    name_model: object
    path_model: object = None


class _Invalid(Exception):
    """A value is wrong: what to say, and how far into the value the problem is."""

    def __init__(self, message: str, shift: int = 0):
        super().__init__(message)
        self.message = message
        self.shift = shift


@dataclass(frozen=True)
class _Field:
    value: object
    model: object
    key_model: Keyword


# -- values ------------------------------------------------------------------------------------

def show(model) -> str:
    """A model as its source text, shortened to fit in a message."""
    return clip(hy.repr(model).removeprefix("'"))


def describe(model) -> str:
    """A short phrase naming what a model is, for `found ...` messages."""
    text = show(model)
    kinds = [(Keyword, "keyword"), (Symbol, "symbol"), (String, "string"), (Integer, "number"),
             (Float, "number"), (FString, "f-string"), (List, "list"), (Dict, "map"), (Expression, "form")]
    kind = next((name for cls, name in kinds if isinstance(model, cls)), type(model).__name__.lower())
    return f"{kind} {text}"


def _string(model, key, ctx) -> str:
    if not isinstance(model, String):
        raise _Invalid(f"{key} takes a string, found {describe(model)}")
    return str(model)


def _text(model, key, ctx) -> str:
    value = _string(model, key, ctx)
    if not value.strip():
        raise _Invalid(f"{key} must not be empty")
    return value


def _endpoint(model, key, ctx) -> str:
    value = _text(model, key, ctx)
    if not value.startswith("/") or any(c.isspace() for c in value):
        raise _Invalid(f"{key} must be a URL path starting with / and without spaces, like \"/hooks/github\"")
    return value


def _name(model, key, ctx) -> str:
    if isinstance(model, (Symbol, String)) and NAME.match(str(model)):
        return str(model)
    raise _Invalid(f"{key} takes a name like code-review-agent, found {describe(model)}")


def _choice(enum, noun: str):
    choices = [member.value for member in enum]

    def parse(model, key, ctx):
        if not isinstance(model, (Symbol, String)):
            raise _Invalid(f"{key} takes one of {', '.join(choices)}; found {describe(model)}")
        try:
            return enum(str(model))
        except ValueError:
            hint = did_you_mean(str(model), choices)
            raise _Invalid(f"unknown {noun} {clip(str(model))}{hint} (one of {', '.join(choices)})") from None

    return parse


def _retention(model, key, ctx):
    if not isinstance(model, (String, Symbol)):
        raise _Invalid(f"{key} takes a duration like \"90d\", found {describe(model)}")
    try:
        duration = parse_duration(str(model))
    except DurationError as error:
        raise _Invalid(f"bad duration {clip(str(model))!r}: {clip(str(error), 200)}",
                       _inner_shift(model, error.offset)) from None
    if not duration:
        raise _Invalid(f"{key} must be longer than zero")
    return duration


def _fraction(model, key, ctx) -> float:
    if not isinstance(model, (Integer, Float)) or isinstance(model, Float) and not math.isfinite(model):
        raise _Invalid(f"{key} takes a number between 0 and 1, found {describe(model)}")
    if not 0 <= model <= 1:  # compared as it is: an integer of hundreds of digits makes no float
        raise _Invalid(f"{key} must be between 0 and 1, found {show(model)}")
    return float(model)


def _scalar(model, key, ctx):
    if isinstance(model, String):
        return str(model)
    if isinstance(model, Integer):
        return int(model)
    if isinstance(model, Float):
        return float(model)
    if isinstance(model, Symbol) and str(model) in ("True", "False"):
        return str(model) == "True"
    raise _Invalid(f"{key} takes a string, a number, True or False; found {describe(model)}")


def _json_path(model, key, ctx) -> str:
    value = _text(model, key, ctx)
    try:
        compile_query(value)
    except jsonpath_rfc9535.JSONPathError as error:
        token = getattr(error, "token", None)
        message = (token.message if token else None) or str(error)  # a type error's token carries no message
        raise _Invalid(f"bad JSON path {clip(value)!r}: {clip(message, 200)}",
                       _inner_shift(model, token.index if token else 0)) from None
    return value


def _algorithms(model, key, ctx) -> tuple[str, ...]:
    items = list(model) if isinstance(model, List) else [model]
    names = []
    for item in items:
        if not isinstance(item, (Symbol, String)) or str(item) not in JWT_ALGORITHMS:
            hint = did_you_mean(str(item), JWT_ALGORITHMS)
            ctx.error(item, f"unknown JWT algorithm {clip(str(item))}{hint} (one of {', '.join(JWT_ALGORITHMS)})")
            return _BAD
        names.append(str(item))
    if not names:
        raise _Invalid(f"{key} needs at least one algorithm, like [\"RS256\"]")
    return tuple(names)


def _names_from(choices: tuple[str, ...] | None, noun: str):
    """A list of names (strings or symbols, at least one): each one of `choices` (None: any name)."""
    def parse(model, key, ctx) -> tuple[str, ...]:
        if not isinstance(model, List) or not model:
            raise _Invalid(f"{key} takes a list of {noun}s, like [{' '.join((choices or ('assistant',))[:2])}]; "
                           f"found {describe(model)}")
        names = []
        for item in model:
            text = str(item) if isinstance(item, (Symbol, String)) else None
            if text is None or (choices is None and not NAME.match(text)):
                ctx.error(item, f"{key} takes {noun}s like {(choices or ('assistant',))[0]}; found {describe(item)}")
                return _BAD
            if choices is not None and text.casefold() not in choices:
                hint = did_you_mean(text, choices)
                ctx.error(item, f"unknown {noun} {clip(text)}{hint} (one of {', '.join(choices)})")
                return _BAD
            names.append(text if choices is None else text.casefold())
        return tuple(dict.fromkeys(names))

    return parse


def _review(model, key, ctx):
    """`True` (every write waits), `False` (none does) or a map of the writes that wait."""
    if isinstance(model, Symbol) and str(model) in ("True", "False"):
        return ReviewPolicy() if str(model) == "True" else None
    if isinstance(model, Dict):
        return _mapping(REVIEW, _build_review)(model, key, ctx)
    spell = ctx.dialect.key
    raise _Invalid(f"{key} takes True, False or a map like {{{spell('agents')} [assistant] {spell('sections')} "
                   f"[facts]}}; found {describe(model)}")


def _inner_shift(model, index: int) -> int:
    """Columns from a model's start to character `index` of its text, when that is knowable."""
    if isinstance(model, Symbol):
        return index
    plain = (model.start_line == model.end_line
             and model.end_column - model.start_column + 1 == len(model) + 2)
    return index + 1 if plain else 0  # escapes or bracket strings: point at the string itself


def _mapping(schema, build):
    def parse(model, key, ctx):
        if not isinstance(model, Dict):
            example = " ".join(f"{ctx.dialect.key(k)} ..." for k in list(schema)[:2])
            raise _Invalid(f"{key} takes a map like {{{example}}}, found {describe(model)}")
        return build(_pairs(list(model), schema, key, ctx), model, key, ctx)

    return parse


def _pairs(items: list, schema: dict, owner: str, ctx: Context) -> dict[str, _Field]:
    """Read `:key value` pairs against a schema, reporting every problem and skipping past it."""
    found: dict[str, _Field] = {}
    spell = ctx.dialect.key
    i = 0
    while i < len(items):
        key = items[i]
        if not isinstance(key, Keyword):
            ctx.error(key, f"expected a keyword such as {spell(next(iter(schema)))}, found {describe(key)}")
            i += 1
            continue
        name = key.name
        label = spell(clip(name))
        if i + 1 == len(items) or isinstance(items[i + 1], Keyword):
            ctx.error(key, f"{label} has no value")
            i += 1
            continue
        model = items[i + 1]
        i += 2
        if name not in schema:
            # The closest key costs more than the rest of a problem: look for it only if it is shown.
            hidden = ctx.problems.hidden(key.start_line, key.start_column)
            ctx.error(key, f"unknown keyword {label} in {owner}{'' if hidden else did_you_mean(name, schema, spell)}")
        elif name in found:
            first = found[name].key_model
            ctx.error(key, f"{label} is given twice (first at {first.start_line}:{first.start_column})")
        else:
            try:
                value = schema[name](model, spell(name), ctx)
            except _Invalid as error:
                ctx.error(model, error.message, error.shift)
                value = _BAD
            found[name] = _Field(value, model, key)
    return found


def _value(found: dict[str, _Field], name: str, default=None):
    return found[name].value if name in found else default


# -- maps --------------------------------------------------------------------------------------

def _build_search(found, model, key, ctx):
    spell = ctx.dialect.key
    vector, keyword = _value(found, "vector-weight"), _value(found, "keyword-weight")
    fusion = _value(found, "fusion", _SEARCH_DEFAULTS.fusion)
    if _BAD in (vector, keyword, fusion):
        return _BAD
    if vector is None and keyword is None:
        vector, keyword = _SEARCH_DEFAULTS.vector_weight, _SEARCH_DEFAULTS.keyword_weight
    elif vector is None:
        vector = round(1 - keyword, 12)
    elif keyword is None:
        keyword = round(1 - vector, 12)
    elif not math.isclose(vector + keyword, 1, abs_tol=1e-9):
        ctx.error(model, f"{key}: {spell('vector-weight')} {vector:g} and {spell('keyword-weight')} "
                         f"{keyword:g} add up to {vector + keyword:g}; they must add up to 1")
        return _BAD
    return MemorySearchConfig(vector, keyword, fusion)


def _build_review(found, model, key, ctx):
    values = {name: f.value for name, f in found.items()}
    return _BAD if _BAD in values.values() else ReviewPolicy(**values)


def _build_filter(found, model, key, ctx):
    spell = ctx.dialect.key
    if "json-path" not in found:
        ctx.error(model, f"{key} needs {spell('json-path')}, the value to test, like \"$.action\"")
    if "equals" in found and "contains" in found:
        ctx.error(found["contains"].key_model, f"{key} takes {spell('equals')} or {spell('contains')}, not both")
    elif "equals" not in found and "contains" not in found:
        ctx.error(model, f"{key} needs {spell('equals')} or {spell('contains')}")
    values = {name.replace("-", "_"): f.value for name, f in found.items()}
    if _BAD in values.values() or len(values) != 2 or "json_path" not in values:
        return _BAD
    return WebhookFilter(**values)


SEARCH = {"vector-weight": _fraction, "keyword-weight": _fraction, "fusion": _choice(Fusion, "fusion")}
FILTER = {"json-path": _json_path, "equals": _scalar, "contains": _scalar}
REVIEW = {"agents": _names_from(None, "agent"), "sections": _names_from(SECTIONS, "section"),
          "operations": _names_from(OPERATIONS, "operation")}
MEMORY = {
    "store": _choice(StoreKind, "store"),
    "path": _text,
    "retention": _retention,
    "search": _mapping(SEARCH, _build_search),
    "review": _review,
}
WEBHOOK = {
    "path": _endpoint,
    "provider": _choice(Provider, "provider"),
    "secret": _text,
    "agent": _name,
    "filter": _mapping(FILTER, _build_filter),
    "header": _text,
    "prefix": _string,
    "encoding": _choice(Encoding, "encoding"),
    "algorithm": _choice(HmacAlgorithm, "HMAC algorithm"),
    "algorithms": _algorithms,
    "issuer": _text,
    "audience": _text,
    "public-key": _text,
    "body-hash-claim": _text,
    "max-lifetime": _retention,
}
# Provider options a webhook may only give with the provider they configure.
_ONLY_FOR = {"header": Provider.CUSTOM, "prefix": Provider.CUSTOM, "encoding": Provider.CUSTOM,
             "algorithm": Provider.CUSTOM, "algorithms": Provider.JWT, "issuer": Provider.JWT, "audience": Provider.JWT,
             "public-key": Provider.JWT, "body-hash-claim": Provider.JWT, "max-lifetime": Provider.JWT}


# -- forms -------------------------------------------------------------------------------------

def _memory(name: str, found, form, ctx):
    return dict(name=name, **{key: f.value for key, f in found.items()})  # keys are field names


def _webhook(name: str, found, form, ctx):
    spell, here = ctx.dialect.key, f"{ctx.dialect.form('defwebhook')} {clip(name)}"
    for required in ("path", "provider"):
        if required not in found:
            ctx.error(form, f"{here} needs {spell(required)}")
    provider = _value(found, "provider")
    if not isinstance(provider, Provider):
        return None
    for option, owner in _ONLY_FOR.items():
        if option in found and provider is not owner:
            ctx.error(found[option].key_model, f"{spell(option)} only applies to {spell('provider')} {owner.value}")
    secret = _value(found, "secret")
    signature = jwt = None
    if provider is Provider.JWT:
        jwt = _jwt_settings(found, form, here, ctx)
    elif "secret" not in found:
        ctx.error(form, f"{here} needs {spell('secret')} to verify {provider.value} signatures, "
                        f"like \"secret://env/{clip(name).upper().replace('-', '_')}_SECRET\"")
    if provider is Provider.CUSTOM:
        if "header" not in found:
            ctx.error(form, f"{here} needs {spell('header')}, the request header that carries the signature")
        signature = SignatureScheme(_value(found, "header"), _value(found, "prefix", ""),
                                    _value(found, "encoding", Encoding.HEX),
                                    _value(found, "algorithm", HmacAlgorithm.SHA256))
    return dict(name=name, path=_value(found, "path"), provider=provider, secret=secret,
                agent=_value(found, "agent"), filter=_value(found, "filter"), signature=signature, jwt=jwt)


def _jwt_settings(found, form, here, ctx):
    spell = ctx.dialect.key
    secret, public_key = _value(found, "secret"), _value(found, "public-key")
    if secret is None and public_key is None:
        ctx.error(form, f"{here} needs {spell('public-key')} (or {spell('secret')} for HS256 tokens)")
        return None
    if secret is not None and public_key is not None:
        ctx.error(found["public-key"].key_model, f"give {spell('public-key')} or {spell('secret')}, not both")
        return None
    algorithms = _value(found, "algorithms", ("HS256",) if secret is not None else ("RS256",))
    if algorithms is not _BAD:
        keyed = "secret" if secret is not None else "public-key"
        wrong = [a for a in algorithms if a.startswith("HS") != (keyed == "secret")]
        if wrong:
            needs = "secret" if keyed == "public-key" else "public-key"
            ctx.error(found["algorithms"].model,
                      f"{', '.join(wrong)} verifies with {spell(needs)}, but this webhook gives {spell(keyed)}")
    return JwtSettings(algorithms, _value(found, "issuer"), _value(found, "audience"), public_key,
                       _value(found, "body-hash-claim"), _value(found, "max-lifetime"))


FORMS = {
    "defmemory": (MEMORY, _memory, MemoryDefinition),
    "defwebhook": (WEBHOOK, _webhook, WebhookDefinition),
}


def interpret_form(form, ctx: Context) -> list[Parsed]:
    """Turn one top-level form into its definition, reporting every problem instead."""
    before = ctx.problems.count
    if not isinstance(form, Expression) or not form:
        ctx.error(form, f"expected a (defmemory NAME ...) or (defwebhook NAME ...) form, found {describe(form)}")
        return []
    head = form[0]
    if not isinstance(head, Symbol) or str(head) not in FORMS:
        names = [ctx.dialect.form(f) for f in FORMS]
        hint = did_you_mean(show(head), names) or f"; a definitions file holds {' and '.join(names)} forms"
        ctx.error(head, f"unknown form {show(head)}{hint}")
        return []
    schema, build, kind = FORMS[str(head)]
    form_name = ctx.dialect.form(str(head))
    if len(form) < 2 or isinstance(form[1], Keyword):
        ctx.error(form[1] if len(form) > 1 else form,
                  f"{form_name} needs a name first, like ({form_name} NAME {ctx.dialect.key('path')} ...)")
        return []
    try:
        name = _name(form[1], "the name", ctx)
    except _Invalid as error:
        ctx.error(form[1], f"{form_name} {error.message.removeprefix('the name ')}")
        return []
    # A definition inside a definition means a closing parenthesis is missing before it.
    nested = [item for item in form[2:] if _is_definition(item)]
    if nested:
        ctx.error(form, f"this ({form_name} {clip(name)} ...) is not closed before the "
                        f"({nested[0][0]} ...) at line {nested[0].start_line}")
    found = _pairs([item for item in form[2:] if not _is_definition(item)], schema, f"{form_name} {clip(name)}", ctx)
    values = build(name, found, form, ctx)
    inner = [p for item in nested for p in interpret_form(item, ctx)]
    if values is None or ctx.problems.count > before:
        return inner
    location = SourceLocation(ctx.source.name, form.start_line, form.start_column)
    path_model = found["path"].model if kind is WebhookDefinition else None
    return [Parsed(kind(**values, location=location), form, form[1], path_model)]


def _is_definition(model) -> bool:
    # Only a symbol's str is its name: a form's would print the whole form, however large.
    return isinstance(model, Expression) and len(model) > 0 and isinstance(model[0], Symbol) and str(model[0]) in FORMS


def check_unique(parsed: list[Parsed], ctx: Context) -> None:
    """Report names defined twice and webhook paths served twice."""
    seen: dict[tuple, Parsed] = {}
    for p in parsed:
        d = p.definition
        kind = "memory" if isinstance(d, MemoryDefinition) else "webhook"
        first = seen.setdefault((kind, "name", d.name), p)
        if first is not p:
            ctx.error(p.name_model, f"{kind} {clip(d.name)} is already defined at {_where(first)}")
        if isinstance(d, WebhookDefinition):
            first = seen.setdefault(("webhook", "path", d.path), p)
            if first is not p:
                ctx.error(p.path_model, f"path {clip(d.path)} is already served by webhook "
                                        f"{clip(first.definition.name)} (defined at {_where(first)})")


def _where(parsed: Parsed) -> str:
    return f"{parsed.form.start_line}:{parsed.form.start_column}"
