"""Reading a state: walk its headlines, look up by :ID:, find, outline paths, show, stats."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import org
from .backends import Store
from .bounded import BoundedDict
from .errors import NotFound
from .hashing import Oid
from .objects import Document, Headline, Tree
from .words import brief


@dataclass(frozen=True)
class Node:
    """A headline in place: its file, outline path, position among siblings and first line."""

    path: str
    outline: tuple[str, ...]
    position: tuple[int, ...]
    line: int
    headline: Headline

    @property
    def oid(self) -> Oid:
        return self.headline.oid

    @property
    def id(self) -> str | None:
        return self.headline.id

    @property
    def title(self) -> str:
        return self.headline.title

    @property
    def key(self) -> str:
        """A name that survives edits: the :ID:, else file and outline position."""
        return self.id or f"{self.path}::{'.'.join(map(str, self.position))}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {' / '.join(self.outline)}"


def walk(store: Store, tree: Tree, paths=None) -> Iterator[Node]:
    """Every headline of the tree (or of `paths`), in file and document order."""
    for path in sorted(tree.entries if paths is None else paths):
        doc: Document = store.objects[tree.entries[path]]
        yield from walk_document(store, path, doc)


def walk_document(store: Store, path: str, doc: Document) -> Iterator[Node]:
    """Every headline of one document of the store, depth first, with line numbers."""
    return walk_headlines(store.objects.__getitem__, path, doc)


def walk_headlines(get: Callable[[bytes], object], path: str, doc: Document) -> Iterator[Node]:
    """Every headline of one document (its objects given by `get`), depth first, with line numbers."""
    line = 1 + doc.preamble.count("\n")
    levels = [(enumerate(doc.children), (), ())]  # a stack, not recursion: files may nest thousands deep
    while levels:
        children, outline, position = levels[-1]
        step = next(children, None)
        if step is None:
            levels.pop()
            continue
        index, oid = step
        headline: Headline = get(oid)
        node = Node(path, (*outline, headline.title), (*position, index), line, headline)
        line += headline.raw.count("\n")
        yield node
        if headline.children:
            levels.append((enumerate(headline.children), node.outline, node.position))


def lookup(store: Store, tree: Tree, org_id: str) -> Node:
    """The headline whose :ID: is `org_id`."""
    node = with_id(store, tree, org_id)
    if node is not None:
        return node
    path = file_ids(store, tree).get(org_id)
    if path is not None:
        raise FileIdNotHeadline(org_id, path)
    raise NotFound(f"no headline with :ID: {brief(org_id)}")


def with_id(store: Store, tree: Tree, org_id: str) -> Node | None:
    """The headline whose :ID: is `org_id`, or None; only the file that holds it is walked."""
    for path in sorted(tree.entries):
        if org_id in headline_ids(store, tree.entries[path]):
            return in_file(store, tree, path, org_id)
    return None


def in_file(store: Store, tree: Tree, path: str, org_id: str) -> Node:
    """The headline whose :ID: is `org_id` in the file `path`, which holds one (`headline_ids`)."""
    return next(node for node in walk(store, tree, [path]) if node.id == org_id)


# The headline :ID:s of each document read in this process, by document oid (content never changes).
_IDS: BoundedDict = BoundedDict(100_000)


def headline_ids(store: Store, doc_oid: Oid) -> frozenset[str]:
    """The :ID:s of a document's headlines (read once per document in a process)."""
    ids = _IDS.get(doc_oid)
    if ids is None:
        ids = _IDS[doc_oid] = frozenset(node.id for node in walk_document(store, "", store.objects[doc_oid])
                                        if node.id)
    return ids


class FileIdNotHeadline(NotFound):
    """An :ID: looked up as a headline's is a file's own."""

    def __init__(self, org_id: str, path: str):
        super().__init__(f"{org_id} is the :ID: of the file {path}, not of a headline; show it to see the file")
        self.path = path


def find(store: Store, tree: Tree, *, todo: str | None = None, tag: str | None = None,
         prop: tuple[str, str | None] | None = None, text: str | None = None) -> list[Node]:
    """Headlines matching every given criterion: TODO keyword, tag (its own or inherited, as `tagged` reads them),
    property (value optional), title text."""
    needle = text.casefold() if text else None
    found = []
    for node in walk(store, tree) if tag is None else tagged(store, tree, tag):
        h = node.headline
        if todo is not None and h.todo != todo:
            continue
        if prop is not None:
            value = h.get(prop[0])
            if value is None or (prop[1] is not None and value != prop[1]):
                continue
        if needle is not None and needle not in h.title.casefold():
            continue
        found.append(node)
    return found


def tagged(store: Store, tree: Tree, tag: str) -> Iterator[Node]:
    """The headlines that carry `tag` as Org's match strings and org-ql's `tags` read tags: their own, those of the
    headings above them and the file's (#+FILETAGS)."""
    for path in sorted(tree.entries):
        doc: Document = store.objects[tree.entries[path]]
        inherited = {0: org.file_tags(doc.preamble)}  # the tags of each level's headline, by depth
        for node in walk_document(store, path, doc):
            depth = len(node.position)
            inherited[depth] = inherited[depth - 1] + node.headline.tags
            if tag in inherited[depth]:
                yield node


def file_id(doc: Document) -> str | None:
    """The :ID: of a file's own property drawer, if it has one."""
    return next((value for key, value in org.file_properties(doc.preamble) if key.upper() == "ID"), None)


def file_ids(store: Store, tree: Tree) -> dict[str, str]:
    """Every file-level :ID: of a state, with the file it names."""
    found = {}
    for path in sorted(tree.entries):
        org_id = file_id(store.objects[tree.entries[path]])
        if org_id:
            found.setdefault(org_id, path)
    return found


def show(store: Store, node_or_headline) -> str:
    """A headline and its subtree rendered back as Org text."""
    headline = getattr(node_or_headline, "headline", node_or_headline)
    return org.render_headline(headline, store.objects.__getitem__)


def render_file(store: Store, tree: Tree, path: str) -> str:
    """A file's exact text as recorded in a tree."""
    if path not in tree.entries:
        raise NotFound(f"{path}: not in this state")
    return org.render(store.objects[tree.entries[path]], store.objects.__getitem__)


def stats(store: Store, tree: Tree) -> dict[str, int | list[str]]:
    """Counts a user checks: files, headlines, ids (and those named by more than one), objects, refs, bytes."""
    headlines = 0
    ids = Counter(filter(None, (file_id(store.objects[oid]) for oid in tree.entries.values())))
    for node in walk(store, tree):
        headlines += 1
        if node.id is not None:
            ids[node.id] += 1
    return {
        "files": len(tree.entries),
        "headlines": headlines,
        "ids": ids.total(),
        "duplicate ids": sorted(org_id for org_id, count in ids.items() if count > 1),  # Org expects each once
        "objects": len(store.objects),
        "refs": len(store.refs.names()),
        "bytes": store.engine.size_bytes(),
    }


