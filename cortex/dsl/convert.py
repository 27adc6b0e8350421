"""Brace-block definitions of Symbiont-style agent DSLs converted to defmemory/defwebhook forms.

    memory "agent-memory" { store markdown  path "data/agents"  retention 90d
                            search { vector_weight 0.7  keyword_weight 0.3 } }
    webhook github_events { path "/hooks/github"  provider github  secret $GITHUB_SECRET
                            agent code_review_agent  filter { json_path "$.action"  equals "opened" } }

Blocks become Hy models placed at their brace-file positions and go through the same interpreter
as Hy files, so problems are reported at the line and column of the brace file.  Names become
kebab-case, `$VAR` becomes "secret://env/VAR", `store markdown` becomes `:store org` (cortex
keeps memory in Org files), and comments are carried over.  Other blocks (agent, policy, ...)
are skipped with a note.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass

from hy.models import Dict, Expression, Float, Integer, Keyword, List, String, Symbol

from cortex.dsl.diagnostics import DslError, clip, did_you_mean
from cortex.dsl.interpret import Context, Dialect, check_unique, interpret_form
from cortex.dsl.reader import MAX_DEPTH, MAX_SIZE, SourceFile, too_large
from cortex.dsl.render import render_definition

__all__ = ["convert_brace_syntax"]

BRACE = Dialect(key=lambda k: k.replace("-", "_"), form=lambda f: f.removeprefix("def"))
_CONVERTED = {"memory": "defmemory", "webhook": "defwebhook"}
_SKIPPED = ("metadata", "agent", "policy", "schedule", "channel", "type", "function", "tool", "with")
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*(?:.|\n)*?\*/)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<url>[A-Za-z][A-Za-z0-9+.-]*://[^\s,{}\[\]]+)
  | (?P<duration>\d+[A-Za-zµ]+(?:\d+[A-Za-zµ]+)*)
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<env>\$[A-Za-z_][A-Za-z0-9_]*)
  | (?P<word>[A-Za-z_][A-Za-z0-9_-]*)
  | (?P<open>/\*|")
  | (?P<punct>.)
""", re.X)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int
    column: int


@dataclass
class _Item:
    """One piece of output: comment lines, or a form with the comments found inside its block."""

    first_line: int
    last_line: int
    lines: list[str]
    form: Expression | None = None


class _Unexpected(Exception):
    """A block cannot be read on: where, why, and the token index to read on from (if known)."""

    def __init__(self, token: _Token, message: str, resume: int | None = None):
        super().__init__(message)
        self.token = token
        self.message = message
        self.resume = resume


def convert_brace_syntax(source: str, filename: str = "<string>") -> str:
    """Convert memory and webhook blocks to Hy forms; raise `DslError` listing every problem."""
    file = SourceFile(filename, source)
    if len(source) > MAX_SIZE:
        raise DslError([too_large(file, 1)])
    ctx = Context(file, BRACE)
    items = _Parser(file, ctx).items()
    parsed = []
    for item in items:
        if item.form is not None:
            results = interpret_form(item.form, ctx)
            parsed += results
            item.lines += [render_definition(p.definition) for p in results]
    check_unique(parsed, ctx)
    if ctx.problems:
        raise DslError(ctx.problems)
    out, previous = [], None
    for item in items:
        # Forms stand apart; comments stay next to what they were next to.
        if previous and (item.first_line > previous.last_line + 1 or previous.form is not None):
            out.append("")
        out += item.lines
        previous = item
    return "\n".join(out) + "\n" if out else ""


class _Parser:
    """A small recursive-descent reader of brace blocks that reports an error and reads on."""

    def __init__(self, file: SourceFile, ctx: Context):
        self.ctx = ctx
        self.i = 0
        self.depth = 0  # lists and maps open around the value being read
        self.end = _Token("end", "end of file", *file.position(len(file.text)))
        self.tokens: list[_Token] = []
        self.comments: list[_Token] = []
        self.cut_short = False  # an unclosed string or comment swallowed the rest of the file
        for match in _TOKEN.finditer(file.text):
            token = _Token(match.lastgroup, match.group(), *file.position(match.start()))
            if token.kind == "open":
                self._error(token, f"this {'comment' if token.text == '/*' else 'string'} is never closed")
                self.cut_short = True
                break
            if token.kind == "comment":
                self.comments.append(token)
            elif token.kind != "space":
                self.tokens.append(token)

    def items(self) -> list[_Item]:
        """Every block and every comment outside blocks, in source order."""
        blocks = []
        while self._peek().kind != "end":
            start = self.i
            try:
                blocks.append(self._block())
            except _Unexpected as error:
                self._error(error.token, error.message)
                if error.resume is None:
                    self.i = start
                    self._skip_block()
                else:
                    self.i = error.resume
        items = list(blocks)
        last_lines = [b.last_line for b in blocks]  # in order, as blocks follow one another
        for comment in self.comments:
            lines = _comment_lines(comment.text)
            i = bisect.bisect_left(last_lines, comment.line)  # the first block not over before the comment
            home = blocks[i] if i < len(blocks) and blocks[i].first_line <= comment.line else None
            if home is None:
                items.append(_Item(comment.line, comment.line + comment.text.count("\n"), lines))
            elif home.form is not None:
                home.lines += lines
        return sorted(items, key=lambda item: item.first_line)

    def _block(self) -> _Item:
        word = self._take()
        if word.kind != "word" or word.text not in (*_CONVERTED, *_SKIPPED):
            hint = did_you_mean(word.text, _CONVERTED) or f" (only {' and '.join(_CONVERTED)} blocks convert)"
            raise _Unexpected(word, f"unknown block {clip(word.text)}{hint}")
        if word.text in _SKIPPED:
            self.i -= 1
            self._skip_block()
            note = f"; skipped {word.text} block (line {word.line}): only memory and webhook blocks convert"
            return _Item(word.line, self.tokens[self.i - 1].line, [note])
        name = self._take()
        if name.kind not in ("word", "string"):
            raise _Unexpected(name, f"{word.text} needs a name: {word.text} NAME {{ ... }}")
        entries = self._entries(self._expect("{"))
        notes = []
        if word.text == "memory":
            entries, notes = _markdown_to_org(entries)
        head = [_at(Symbol(_CONVERTED[word.text]), word), _at(Symbol(_kebab(_text(name))), name)]
        form = _at(Expression([*head, *entries]), word)
        return _Item(word.line, self.tokens[self.i - 1].line, notes, form)

    def _entries(self, opening: _Token) -> list:
        models = []
        while (token := self._peek()).text != "}":
            if token.kind == "end":
                raise _Unexpected(opening, "this '{' is never closed")
            if token.column == 1 and token.text in (*_CONVERTED, *_SKIPPED):
                message = f"this '{{' is not closed before the next block at line {token.line}"
                raise _Unexpected(opening, message, resume=self.i)
            self.i += 1
            if token.text == ",":
                continue
            if token.kind != "word":
                self._error(token, f"expected a setting name such as path, found {_describe(token)}")
                self._skip_line(token)
                continue
            if self._peek().text in (":", "="):
                self.i += 1
            try:
                models += [_at(Keyword(_kebab(token.text)), token), self._value(token)]
            except _Unexpected as error:
                self._error(error.token, error.message)
                self._skip_line(error.token)
        self.i += 1
        return models

    def _value(self, key: _Token):
        token = self._take()
        if token.kind == "string":
            return _at(String(_unquote(token.text)), token)
        if token.kind in ("duration", "url"):
            return _at(String(token.text), token)
        if token.kind == "env":
            return _at(String(f"secret://env/{token.text[1:]}"), token)
        if token.kind == "number":
            return _at(Float(token.text) if "." in token.text else Integer(token.text), token)
        if token.kind == "word":
            return _at(Symbol({"true": "True", "false": "False"}.get(token.text, _kebab(token.text))), token)
        if token.text == "[":
            return self._nested(token, lambda: _at(List(self._items(token, key)), token))
        if token.text == "{":
            return self._nested(token, lambda: _at(Dict(self._entries(token)), token))
        self.i -= token.kind != "end"  # leave it for the caller: it may be the block's closing brace
        raise _Unexpected(token, f"{clip(key.text)} needs a value, found {_describe(token)}")

    def _items(self, opening: _Token, key: _Token) -> list:
        items = []
        while (item := self._peek()).text != "]":
            if item.kind == "end":
                raise _Unexpected(opening, "this '[' is never closed")
            if item.text == ",":
                self.i += 1
            else:
                items.append(self._value(key))
        self.i += 1
        return items

    def _nested(self, opening: _Token, read):
        """What `read()` returns, one level deeper: reading is recursive, so the levels are capped."""
        if self.depth == MAX_DEPTH:
            raise _Unexpected(opening, f"values nest more than {MAX_DEPTH} deep here")
        self.depth += 1
        try:
            return read()
        finally:
            self.depth -= 1

    def _peek(self) -> _Token:
        return self.tokens[self.i] if self.i < len(self.tokens) else self.end

    def _take(self) -> _Token:
        token = self._peek()
        self.i += token.kind != "end"
        return token

    def _expect(self, text: str) -> _Token:
        token = self._take()
        if token.text != text:
            raise _Unexpected(token, f"expected {text!r}, found {_describe(token)}")
        return token

    def _skip_line(self, bad: _Token) -> None:
        """Skip the rest of a bad setting: up to its line's end or the block's closing brace."""
        while (token := self._peek()).kind != "end" and token.line == bad.line and token.text != "}":
            self.i += 1

    def _skip_block(self) -> None:
        """Skip a block that does not convert, through the brace closing its first '{'.

        Without braces, stop at the next line that starts with a block's keyword."""
        depth, start = 0, self.i
        while (token := self._peek()).kind != "end":
            starts_line = self.i > start and self.tokens[self.i - 1].line < token.line
            if depth == 0 and starts_line and token.text in (*_CONVERTED, *_SKIPPED):
                return
            self.i += 1
            if token.text == "{":
                depth += 1
            elif token.text == "}" and depth:
                depth -= 1
                if depth == 0:
                    return

    def _error(self, token: _Token, message: str) -> None:
        if self.cut_short and self._peek().kind == "end":
            return  # a consequence of the unclosed string or comment, already reported
        self.ctx.problems.add(self.ctx.source.at(token.line, token.column, message))


def _markdown_to_org(entries: list) -> tuple[list, list[str]]:
    for i in range(0, len(entries) - 1, 2):
        if entries[i].name == "store" and entries[i + 1] == Symbol("markdown"):
            org = _at_model(Symbol("org"), entries[i + 1])
            note = "; store markdown became org: cortex keeps memory in Org files"
            return [*entries[: i + 1], org, *entries[i + 2 :]], [note]
    return entries, []


def _at(model, token: _Token):
    model.start_line, model.start_column = token.line, token.column
    model.end_line, model.end_column = token.line, token.column + len(token.text) - 1
    return model


def _at_model(model, like):
    model.start_line, model.start_column = like.start_line, like.start_column
    model.end_line, model.end_column = like.end_line, like.end_column
    return model


def _kebab(word: str) -> str:
    return word.replace("_", "-")


def _text(token: _Token) -> str:
    return _unquote(token.text) if token.kind == "string" else token.text


def _unquote(text: str) -> str:
    try:
        return json.loads(text)
    except ValueError:
        return text[1:-1]


def _describe(token: _Token) -> str:
    return token.text if token.kind == "end" else repr(clip(token.text))


def _comment_lines(text: str) -> list[str]:
    body = text[2:-2] if text.startswith("/*") else text[2:]
    return [f"; {line.strip()}".rstrip() for line in body.strip().splitlines()] or [";"]
