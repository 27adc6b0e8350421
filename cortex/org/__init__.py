"""Org syntax in one place: reading Org text into object trees and writing it back, as Emacs's Org 9.5 reads it.

- `syntax`: the line grammar (headline, planning and property drawer lines) and the `Section` value
- `blocks`: where blocks, drawers, LaTeX environments and footnotes open and close; keywords outside them
- `inline`: objects within a line as org-element finds them: timestamps, bracket links
- `parser`: Org text -> document and headlines, incremental by subtree
- `layout`: re-parsing an edit from a parsed file's layout, and rendering an edited document as a splice
- `rendering`: object trees -> Org text, byte for byte
- `escape`: text put into Org as data (block contents, section bodies)
"""

from .escape import escape_block, escape_text, unescape_block, unescape_text
from .layout import Layout, Splice, common_children, common_ends, reparse
from .parser import PARSER_VERSION, Cached, Getter, Parsed, file_properties, file_tags, parse
from .rendering import render, render_headline
from .syntax import Section, split_blank_end

__all__ = ["PARSER_VERSION", "Cached", "Getter", "Layout", "Parsed", "Section", "Splice", "common_children",
           "common_ends", "escape_block", "escape_text", "file_properties", "file_tags", "parse", "render",
           "render_headline", "reparse", "split_blank_end", "unescape_block", "unescape_text"]
