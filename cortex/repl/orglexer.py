"""A Pygments lexer for Org text: headlines, TODO keywords, priorities, tags, drawers, keywords,
timestamps, links and blocks (Pygments ships none)."""

from __future__ import annotations

import re

from pygments.lexer import RegexLexer, bygroups, include
from pygments.token import Comment, Generic, Keyword, Name, Number, String, Text
from pygments.util import get_list_opt

__all__ = ["DEFAULT_DONE", "DEFAULT_TODO", "OrgLexer"]

DEFAULT_TODO = ("TODO", "NEXT", "WAITING", "HOLD")
DEFAULT_DONE = ("DONE", "CANCELLED", "CANCELED")

_HEADLINE_REST = re.compile(
    r"(?P<gap> *)(?P<priority>\[#[A-Za-z0-9]\])?(?P<title>.*?)(?P<tags>[ \t]+:[^ \t\n]+:)?(?P<trail>[ \t]*)$"
)


def _headline(lexer: OrgLexer, match: re.Match):
    """Split a headline into stars, TODO keyword, priority, title and tags."""
    stars, rest, offset = match.group(1), match.group(3), match.start(3)
    heading = Generic.Heading if len(stars) == 1 else Generic.Subheading
    yield match.start(1), heading, stars
    yield match.start(2), Text, match.group(2)
    word = rest.split(" ", 1)[0]
    if word in lexer.done_keywords or word in lexer.todo_keywords:
        yield offset, Generic.Inserted if word in lexer.done_keywords else Generic.Error, word
        rest, offset = rest[len(word):], offset + len(word)
    parts = _HEADLINE_REST.match(rest)
    for group, token in (("gap", Text), ("priority", Keyword.Type), ("title", heading), ("tags", Name.Tag),
                         ("trail", Text)):
        if parts[group]:
            yield offset + parts.start(group), token, parts[group]


class OrgLexer(RegexLexer):
    """Org mode text; options `todo_keywords` and `done_keywords` follow a file's `#+TODO:` line."""

    name = "Org"
    aliases = ["org", "orgmode"]
    filenames = ["*.org"]
    mimetypes = ["text/org"]
    flags = re.MULTILINE

    def __init__(self, **options):
        super().__init__(**options)
        self.todo_keywords = tuple(get_list_opt(options, "todo_keywords", DEFAULT_TODO))
        self.done_keywords = tuple(get_list_opt(options, "done_keywords", DEFAULT_DONE))

    tokens = {
        "root": [
            (r"^(\*+)( )(.*)$", _headline),
            (r"^([ \t]*)(:(?i:PROPERTIES|END|LOGBOOK):)([ \t]*)$", bygroups(Text, Comment, Text)),
            (r"^([ \t]*)(:[^ \t\n:]+:)([ \t]+)(.*)$", bygroups(Text, Name.Attribute, Text, String)),
            (r"^([ \t]*)(:[^ \t\n:]+:)([ \t]*)$", bygroups(Text, Name.Attribute, Text)),
            (r"^([ \t]*)((?:SCHEDULED|DEADLINE|CLOSED):)", bygroups(Text, Keyword), "planning"),
            (r"^([ \t]*)(#\+(?i:begin_)\S+)(.*)$", bygroups(Text, Comment.Preproc, Comment.Preproc), "block"),
            (r"^([ \t]*)(#\+[^:\s]+:)(.*)$", bygroups(Text, Comment.Preproc, String)),
            (r"^([ \t]*)(#(?: .*)?)$", bygroups(Text, Comment.Single)),
            (r"^([ \t]*)([-+]|\d+[.)])([ \t]+)", bygroups(Text, Keyword, Text)),
            include("inline"),
        ],
        "inline": [
            (r"<\d{4}-\d{2}-\d{2}[^>\n]*>(?:--<[^>\n]+>)?", Number),
            (r"\[\d{4}-\d{2}-\d{2}[^\]\n]*\](?:--\[[^\]\n]+\])?", Number),
            (r"\[\[[^\]\n]+\](?:\[[^\]\n]+\])?\]", Name.Namespace),
            (r"(?<![\w=~])([=~])[^\s=~](?:[^\n]*?[^\s])?\1(?![\w=~])", String),
            (r"[^\n<\[=~]+", Text),
            (r".|\n", Text),
        ],
        "planning": [
            (r"(?:SCHEDULED|DEADLINE|CLOSED):", Keyword),
            (r"\n", Text, "#pop"),
            include("inline"),
        ],
        "block": [
            (r"^([ \t]*)(#\+(?i:end_)\S+)(.*)$", bygroups(Text, Comment.Preproc, Comment.Preproc), "#pop"),
            (r".*\n", Text),
            (r".+", Text),
        ],
    }
