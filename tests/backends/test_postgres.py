"""The PostgreSQL engine on a real server meets what a network database meets: other machines racing, many
writers at once, dropped connections, a server that is away, a full disk (the store contract is
tests/oracle/test_store_contract.py)."""

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from cortex.backends import StoreUnreachable, open_store
from cortex.backends import postgres
from cortex.backends.base import META, OBJECTS, REFS, TABLES, StoreDamaged, StoreFull, StoreLocked
from cortex.backends.postgres import PostgresEngine, redact
from cortex.codec import encode
from cortex.errors import CortexError, FormatError, RefConflict
from cortex.objects import Headline


def _headline(n: int, body: str = "") -> Headline:
    return Headline(level=1, title=f"item {n}", raw=f"* item {n}\n{body}")


def _with(url: str, *, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
    """`url` with another user, password or database."""
    parts = urlsplit(url)
    old_user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
    netloc = f"{user or old_user}:{password or ''}@{parts.netloc.rsplit('@', 1)[1]}"
    path = parts.path if database is None else "/" + database
    return urlunsplit(parts._replace(netloc=netloc, path=path))


def _database(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def admin(pg_server):
    """A superuser connection to the server's own `postgres` database."""
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def statements(monkeypatch):
    """Every SQL statement any psycopg connection of this process runs from now on (a connection hook)."""
    seen: list[str] = []
    original = psycopg.Connection.execute

    def execute(self, query, *args, **kwargs):
        seen.append(str(query))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    return seen


def _on(seen: list[str], table: str) -> list[str]:
    return [q for q in seen if f"cortex_{table}" in q]


# --- opening -----------------------------------------------------------------------------


def test_persists_across_reopen(pg_url):
    h = _headline(1)
    with open_store(pg_url) as s:
        s.objects.add(h)
        s.refs.set_if_equals("HEAD", h.oid, None, "keep")
    with open_store(pg_url) as s:
        assert s.objects[h.oid] == h and s.refs.get("HEAD") == h.oid
        assert s.refs.reflog("HEAD")[0].message == "keep"


def test_newer_format_is_refused(pg_url):
    with open_store(pg_url) as s:
        s.transact(lambda: s.engine.put(META, b"format", encode(99)))
    with pytest.raises(FormatError, match="format 99"):
        open_store(pg_url)


def test_schema_is_created_once_and_verified(pg_url):
    with open_store(pg_url) as s:
        assert s.engine.verify() == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = {row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'cortex%'")}
        assert tables == {"cortex_objects", "cortex_refs", "cortex_reflog", "cortex_meta", "cortex_tables"}
        conn.execute("ALTER TABLE cortex_refs ADD COLUMN extra int")
        conn.execute("ALTER TABLE cortex_meta ALTER COLUMN v DROP NOT NULL")
        conn.execute("ALTER TABLE cortex_reflog DROP CONSTRAINT cortex_reflog_pkey")
    engine = PostgresEngine(pg_url)
    try:
        assert engine.verify() == [
            "table cortex_refs has columns cortex did not make: extra",
            "table cortex_reflog does not have the primary key (k)",
            "column cortex_meta.v allows NULL",
        ]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TABLE cortex_tables")
        assert engine.verify()[-1] == "table cortex_tables is missing"
    finally:
        engine.close()


def test_opening_a_new_database_at_once_both_succeed(pg_url):
    # Another process is creating the same table, uncommitted: our CREATE TABLE IF NOT EXISTS cannot see
    # it, waits on the catalog's unique index, then fails once that commits: the engine looks again.
    other = psycopg.connect(pg_url)
    other.execute("CREATE TABLE cortex_objects (k bytea PRIMARY KEY, v bytea NOT NULL)")
    opened: list = []
    opener = threading.Thread(target=lambda: opened.append(open_store(pg_url)))
    opener.start()
    time.sleep(0.3)
    other.commit()
    other.close()
    opener.join(timeout=10)
    assert len(opened) == 1
    with opened[0] as s:
        assert s.engine.verify() == []
        s.objects.add(_headline(1))


def test_openers_of_a_new_database_create_its_tables_one_at_a_time(pg_url):
    # A cortex creator halfway through (lock held, one table made, uncommitted): another opener waits for
    # the lock rather than meeting it in the catalog's unique indexes (which can fail on the row type).
    creator = psycopg.connect(pg_url)
    creator.execute("SELECT pg_advisory_xact_lock(%s)", (postgres.CREATE_LOCK,))
    creator.execute("CREATE TABLE cortex_objects (k bytea PRIMARY KEY, v bytea NOT NULL)")
    opened: list = []
    opener = threading.Thread(target=lambda: opened.append(open_store(pg_url)))
    opener.start()
    waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    try:
        with psycopg.connect(pg_url, autocommit=True) as look:
            for _ in range(1000):
                if look.execute(waiting).fetchone()[0]:
                    break
                time.sleep(0.01)
            assert look.execute(waiting).fetchone()[0] == 1
    finally:
        creator.commit()
        creator.close()
        opener.join(timeout=10)
    with opened[0] as s:
        assert s.engine.verify() == []


def test_close_is_idempotent_and_final(pg_url):
    s = open_store(pg_url)
    s.close()
    s.close()
    with pytest.raises(RuntimeError, match="closed"):
        s.table("t")[b"k"] = b"v"


# --- bad input: each one clear line without the password ---------------------------------


def _one_line(err: pytest.ExceptionInfo, secret: str = "s3cret-pw") -> str:
    """The message of a raised cortex error, checked to be one line, without `secret`, with no psycopg error behind."""
    message = str(err.value)
    assert "\n" not in message and secret not in message
    assert isinstance(err.value, CortexError)
    assert err.value.__cause__ is None and err.value.__suppress_context__  # no psycopg traceback behind it
    return message


@pytest.mark.parametrize("url", [
    "postgresql://postgres:s3cret-pw@/cortex?host=/nonexistent-socket-dir",
    "postgresql://postgres:s3cret-pw@127.0.0.1:1/cortex",
    "postgres://postgres@/cortex?host=/nonexistent-socket-dir&password=s3cret-pw",
])
def test_unreachable_server_fails_fast_in_one_line(url):
    start = time.monotonic()
    with pytest.raises(StoreUnreachable) as err:
        open_store(url)
    assert time.monotonic() - start < 5
    message = _one_line(err)
    assert message.startswith("cannot reach PostgreSQL at postgres") and "check the URL and that the server" in message


def test_missing_database_and_role(pg_url):
    with pytest.raises(StoreUnreachable) as err:
        open_store(_with(pg_url, password="s3cret-pw", database="no_such_db"))
    assert 'database "no_such_db" does not exist' in _one_line(err)
    with pytest.raises(StoreUnreachable) as err:
        open_store(_with(pg_url, user="no_such_role", password="s3cret-pw"))
    assert 'role "no_such_role" does not exist' in _one_line(err)


def test_wrong_password_and_missing_rights(pg_database, admin):
    pg_url = pg_database
    role = f"cortex_pw_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'right-pw-1'")
    hba = Path(admin.execute("SHOW hba_file").fetchone()[0])
    rules = hba.read_text()
    hba.write_text(f"local all {role} scram-sha-256\nhost all {role} 127.0.0.1/32 scram-sha-256\n" + rules)
    admin.execute("SELECT pg_reload_conf()")
    try:
        wrong = _with(pg_url, user=role, password="s3cret-pw")
        deadline = time.monotonic() + 5
        while True:  # the server reloads its rules asynchronously
            try:
                psycopg.connect(wrong).close()
            except psycopg.OperationalError:
                break
            assert time.monotonic() < deadline, "the server does not enforce password authentication"
            time.sleep(0.05)
        with pytest.raises(StoreUnreachable) as err:
            open_store(wrong)
        message = _one_line(err)
        assert "password authentication failed" in message and "check the user name and password" in message
        # The right password gets in, but this role may not create tables in the database: one line too.
        with pytest.raises(StoreLocked) as err:
            open_store(_with(pg_url, user=role, password="right-pw-1"))
        assert "permission denied" in _one_line(err, "right-pw-1")
    finally:
        hba.write_text(rules)
        admin.execute("SELECT pg_reload_conf()")
        admin.execute(f"DROP ROLE {role}")


def test_tables_changed_behind_the_engine_are_reported(pg_url):
    with open_store(pg_url) as s:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TABLE cortex_refs")
        with pytest.raises(StoreDamaged) as err:
            s.refs.get("HEAD")
        assert "cortex tables are missing or altered" in _one_line(err)


def test_a_swallowed_statement_failure_does_not_commit(pg_url):
    with open_store(pg_url) as s:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP TABLE cortex_refs")

        def careless():
            s.table("t")[b"before"] = b"1"
            try:
                s.refs.get("HEAD")
            except StoreDamaged:
                pass
            return "done"

        with pytest.raises(StoreDamaged):
            s.transact(careless)  # PostgreSQL would turn its COMMIT into a silent ROLLBACK
        assert s.table("t").get(b"before") is None


def test_redact_hides_the_password():
    assert redact("postgresql://me:pw@db.example:5432/x?sslmode=require") == \
        "postgresql://me@db.example:5432/x?sslmode=require"
    assert redact("postgresql://me@/x?host=/tmp/s&password=pw") == "postgresql://me@/x?host=/tmp/s"
    assert "pw" not in redact("host=db user=me password=pw dbname=x")


# --- lost connections --------------------------------------------------------------------


def _terminate(url: str, where: str = "state = 'idle in transaction'") -> int:
    """End this database's backends matching `where`, waiting until they are gone; how many."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
            f"WHERE datname = current_database() AND pid <> pg_backend_pid() AND {where}").fetchall()
    return len(rows)


def test_dropped_connection_mid_transaction_is_retried_on_a_fresh_one(pg_url):
    with open_store(pg_url) as s:
        t = s.table("t")
        runs = []

        def fn():
            runs.append(len(runs))
            t[b"a"] = b"1"
            if len(runs) == 1:
                t[b"first-run-only"] = b"x"
                assert _terminate(pg_url) == 1  # our own transaction: its connection dies under it
            t[b"b"] = b"2"
            return len(runs)

        assert s.transact(fn) == 2
        assert t.items() == [(b"a", b"1"), (b"b", b"2")]  # the first run left nothing half-written


def test_server_staying_away_fails_in_one_line(pg_database, admin):
    pg_url = pg_database
    name = _database(pg_url)
    url = _with(pg_url, password="s3cret-pw")  # trust authentication ignores it; it must not show
    try:
        with open_store(url) as s:
            s.table("t")[b"kept"] = b"1"

            def fn():
                s.table("t")[b"a"] = b"1"
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                admin.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s",
                              (name,))
                s.table("t")[b"b"] = b"2"

            start = time.monotonic()
            with pytest.raises(StoreUnreachable) as err:
                s.transact(fn)
            assert time.monotonic() - start < 5
            message = _one_line(err)
            assert message.startswith("cannot reach PostgreSQL at postgresql://postgres@/")
            assert "is not currently accepting connections: the transaction was rolled back" in message
            with pytest.raises(StoreUnreachable) as err:  # reads say so too
                s.table("t").get(b"kept")
            _one_line(err)
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    with open_store(pg_url) as s:
        assert s.table("t").items() == [(b"kept", b"1")]


def test_a_restarted_server_is_read_again_on_fresh_connections(pg_url):
    with open_store(pg_url, pool_size=4) as s:
        s.table("t")[b"k"] = b"v"
        with ThreadsReading(s, 3):  # several pooled connections
            pass
        _terminate(pg_url, "true")  # every pooled connection dies, as when the server restarts
        assert s.table("t")[b"k"] == b"v"
        s.table("t")[b"k2"] = b"v2"
        with s.reading():
            assert s.table("t")[b"k2"] == b"v2"


class ThreadsReading:
    """`n` threads inside reading() blocks at once, so that the pool opens `n` connections."""

    def __init__(self, store, n: int):
        self.store, self.barrier = store, threading.Barrier(n + 1, timeout=5)
        self.threads = [threading.Thread(target=self._read) for _ in range(n)]

    def _read(self):
        with self.store.reading():
            self.store.table("t").get(b"k")
            self.barrier.wait()

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        self.barrier.wait()

    def __exit__(self, *exc):
        for thread in self.threads:
            thread.join()


# --- a full disk -------------------------------------------------------------------------


@pytest.fixture
def tiny_tablespace(pg_server, admin):
    """A tablespace on a 1 MiB tmpfs (needs root to mount: skipped where that is not permitted)."""
    owner = os.stat(pg_server.pgdata)
    mount = Path(tempfile.mkdtemp(prefix="cortex-pgdisk-"))
    mount.chmod(0o755)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,mode=0700,uid={owner.st_uid},gid={owner.st_gid}",
                           "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a 1 MiB tmpfs to fill (needs root): {done.stderr.strip()}")
    name = f"tiny_{uuid.uuid4().hex[:8]}"
    try:
        admin.execute(f"CREATE TABLESPACE {name} LOCATION '{mount}'")
        yield name
    finally:
        admin.execute(f"DROP TABLESPACE IF EXISTS {name}")
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        mount.rmdir()


def test_full_disk_is_store_full_and_rolled_back(pg_url, tiny_tablespace):
    with open_store(pg_url) as s, psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE cortex_objects SET TABLESPACE {tiny_tablespace}")
        try:
            items = [(os.urandom(32), os.urandom(100_000)) for _ in range(20)]  # 2 MB that does not compress
            with pytest.raises(StoreFull) as err:
                s.engine.put_new(OBJECTS, items)
            message = _one_line(err)
            assert "disk is full" in message and "rolled back, nothing was lost" in message
            assert s.engine.count(OBJECTS) == 0
            s.table("t")[b"k"] = b"v"  # the engine goes on where there is room
        finally:
            conn.execute("ALTER TABLE cortex_objects SET TABLESPACE pg_default")
        assert s.engine.put_new(OBJECTS, items) == 20 and s.table("t")[b"k"] == b"v"


# --- round trips -------------------------------------------------------------------------


def test_batches_are_one_statement_each(pg_url, statements, monkeypatch):
    with open_store(pg_url) as s:
        objs = [_headline(n) for n in range(500)]
        statements.clear()
        assert s.objects.add_many(objs) == 500
        assert len(_on(statements, "objects")) == 1 and "unnest" in _on(statements, "objects")[0]
        statements.clear()
        s.objects._cache.clear()
        assert s.objects.load_many([o.oid for o in reversed(objs)] + [objs[0].oid]) == [*reversed(objs), objs[0]]
        assert len(_on(statements, "objects")) == 1 and "ANY" in _on(statements, "objects")[0]
        assert s.engine.get_many(OBJECTS, [objs[3].oid, b"missing", objs[3].oid]) == [
            objs[3].encoded, None, objs[3].encoded]
        statements.clear()
        assert s.engine.swap(REFS, b"HEAD", None, b"a") and not s.engine.swap(REFS, b"HEAD", None, b"b")
        assert s.engine.swap(REFS, b"HEAD", b"a", b"b") and not s.engine.swap(REFS, b"HEAD", b"a", b"c")
        assert not s.engine.swap(REFS, b"HEAD", b"a", None) and s.engine.swap(REFS, b"HEAD", b"b", None)
        assert s.engine.swap(REFS, b"HEAD", None, None) and s.engine.get(REFS, b"HEAD") is None
        assert len(_on(statements, "refs")) == 8  # one statement per swap, and the final get
        # A huge batch goes in chunks, still counting each new key once.
        monkeypatch.setattr(postgres, "CHUNK_ROWS", 100)
        statements.clear()
        items = [(bytes([n % 256, n // 256]), b"v") for n in range(250)]
        assert s.engine.put_new(TABLES, items + items[:10]) == 250
        assert len(_on(statements, "tables")) == 3


def test_scan_pages_by_key_across_boundaries_and_0xff_prefixes(pg_url, statements):
    keys = [b"a", b"a\x00", b"a\xfe\xff", b"a\xff", b"a\xff\x00", b"a\xff\xff", b"a\xff\xff\x01", b"ab",
            b"b", b"\xfe", b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\xff\x05"]
    with open_store(pg_url) as s:
        e = s.engine
        e.transact(lambda: [e.put(TABLES, k, k[::-1] + b"!") for k in reversed(keys)])
        e.page_rows = 3
        for prefix in [b"", b"a", b"a\xff", b"a\xff\xff", b"ab", b"b", b"c", b"\xfe", b"\xff", b"\xff\xff",
                       b"\xff\xff\xff"]:
            expected = sorted((k, k[::-1] + b"!") for k in keys if k.startswith(prefix))
            assert list(e.scan(TABLES, prefix)) == expected, prefix
            with s.reading():
                assert list(e.scan(TABLES, prefix)) == expected, prefix
        statements.clear()
        first = next(iter(e.scan(TABLES)))  # lazily: one page read, not all of them
        assert first == (b"a", b"a!") and len(_on(statements, "tables")) == 1
        e.page_rows = 1000
        statements.clear()
        assert len(list(e.scan(TABLES))) == len(keys) and len(_on(statements, "tables")) == 1


# --- concurrency -------------------------------------------------------------------------


def test_two_engines_racing_compare_and_swap_have_one_winner(pg_url):
    with open_store(pg_url) as a, open_store(pg_url) as b:  # two connection pools, as two machines
        start = _headline(0).oid
        a.refs.set_if_equals("HEAD", start, None)
        barrier, outcomes = threading.Barrier(8, timeout=5), []

        def race(store, n):
            barrier.wait()
            try:
                store.refs.set_if_equals("HEAD", _headline(n).oid, start, f"writer {n}")
                outcomes.append(n)
            except RefConflict:
                outcomes.append(None)

        threads = [threading.Thread(target=race, args=((a, b)[n % 2], n)) for n in range(1, 9)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [n for n in outcomes if n is not None]
        assert len(outcomes) == 8 and len(winners) == 1
        assert b.refs.get("HEAD") == _headline(winners[0]).oid and len(a.refs.reflog("HEAD")) == 2


def test_concurrent_writes_share_commits_and_savepoints(pg_url, statements):
    with open_store(pg_url) as s:
        t, engine = s.table("t"), s.engine
        leading, release = threading.Event(), threading.Event()

        def slow():  # holds the lead while the others queue up behind it
            t[b"leader"] = b"1"
            leading.set()
            release.wait(5)

        def failing():
            t[b"bad"] = b"x"
            raise ValueError("changed my mind")

        errors = []

        def write(n):
            if n == 7:
                try:
                    s.transact(failing)
                except ValueError as exc:
                    errors.append(exc)
            else:
                t[b"w%02d" % n] = b"%d" % n

        leader = threading.Thread(target=lambda: s.transact(slow))
        leader.start()
        assert leading.wait(5)
        statements.clear()
        writers = [threading.Thread(target=write, args=(n,)) for n in range(20)]
        for w in writers:
            w.start()
        deadline = time.monotonic() + 5
        while len(engine._group._queue) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        release.set()
        leader.join()
        for w in writers:
            w.join()
        commits = [q for q in statements if q == "COMMIT"]
        assert len(errors) == 1 and t.get(b"bad") is None
        assert sorted(t) == [b"leader"] + [b"w%02d" % n for n in range(20) if n != 7]
        assert 1 <= len(commits) <= 2 < 21  # the leader's, then one for the queued group
        assert len([q for q in statements if q.startswith("ROLLBACK TO SAVEPOINT")]) == 1


def test_serialization_failures_are_retried_without_lost_updates(pg_url):
    with open_store(pg_url) as a, open_store(pg_url) as b:
        a.table("c")[b"n"] = b"0"
        barrier, runs = threading.Barrier(2, timeout=5), []

        def increment(store):
            attempts = []

            def fn():
                attempts.append(1)
                runs.append(1)
                n = int(store.table("c")[b"n"])
                if len(attempts) == 1 and len(runs) <= 2:
                    barrier.wait()  # both have read the same value before either writes
                store.table("c")[b"n"] = b"%d" % (n + 1)

            store.transact(fn)
            for _ in range(10):  # and then contend without being lined up
                store.transact(lambda: store.table("c").__setitem__(b"n", b"%d" % (int(store.table("c")[b"n"]) + 1)))

        threads = [threading.Thread(target=increment, args=(store,)) for store in (a, b)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert a.table("c")[b"n"] == b"22"
        assert len(runs) >= 3  # one of the lined-up pair ran again


def test_write_skew_is_refused_at_commit_and_retried(pg_url):
    # Each transaction reads both keys and writes a different one: no row lock meets, so SERIALIZABLE
    # refuses the second when it commits, and its rerun sees the first one's write.
    with open_store(pg_url) as a, open_store(pg_url) as b:
        a.table("on_call").update({b"alice": b"1", b"bob": b"1"})
        barrier, runs = threading.Barrier(2, timeout=5), []

        def leave(store, me):
            def fn():
                runs.append(me)
                duty = store.table("on_call")
                if sum(int(v) for _, v in duty.items()) >= 2:
                    duty[me] = b"0"
                    if runs.count(me) == 1:
                        barrier.wait()  # both have seen two on call and written before either commits

            store.transact(fn)

        threads = [threading.Thread(target=leave, args=(store, me)) for store, me in ((a, b"alice"), (b, b"bob"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(v for _, v in a.table("on_call").items()) == [b"0", b"1"] and len(runs) == 3


def test_a_conflict_inside_one_members_savepoint_reruns_the_group(pg_url):
    with open_store(pg_url) as a, open_store(pg_url) as b:
        t, engine = a.table("c"), a.engine
        t[b"n"] = b"0"
        leading, release, read, written = (threading.Event() for _ in range(4))
        runs = []

        def slow():
            leading.set()
            release.wait(5)

        def m1():
            runs.append("m1")
            t[b"x"] = b"1"

        def m2():
            runs.append("m2")
            n = int(t[b"n"])
            if runs.count("m2") == 1:
                read.set()
                assert written.wait(5)  # another machine moves n meanwhile: this member's write must fail
            t[b"n"] = b"%d" % (n + 1)
            return n + 1

        def other_machine():
            assert read.wait(5)
            b.table("c")[b"n"] = b"100"
            written.set()

        results = []
        threads = [threading.Thread(target=lambda: a.transact(slow)),
                   threading.Thread(target=lambda: a.transact(m1)),
                   threading.Thread(target=lambda: results.append(a.transact(m2))),
                   threading.Thread(target=other_machine)]
        threads[0].start()
        assert leading.wait(5)
        for n, thread in enumerate(threads[1:3], start=1):  # queue m1, then m2, behind the leader
            thread.start()
            while len(engine._group._queue) < n:
                time.sleep(0.005)
        threads[3].start()
        release.set()
        for thread in threads:
            thread.join()
        assert results == [101] and t[b"n"] == b"101" and t[b"x"] == b"1"
        # Whichever of the two leads the group runs first; either way the whole group ran again.
        assert runs in (["m1", "m2", "m1", "m2"], ["m2", "m2", "m1"])


def test_a_store_shared_by_two_processes(pg_url):
    script = textwrap.dedent(f"""
        import sys
        from cortex.backends import open_store
        from cortex.objects import Headline
        with open_store({pg_url!r}) as s:
            print("ready", flush=True)
            sys.stdin.readline()
            s.objects.add_many(Headline(level=1, title=f"child {{n}}", raw=f"* child {{n}}\\n") for n in range(50))
            counter = s.table("c")
            for _ in range(25):
                s.transact(lambda: counter.__setitem__(b"n", b"%d" % (int(counter.get(b"n", b"0")) + 1)))
    """)
    with open_store(pg_url) as s:
        child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline() == "ready\n", child.stderr.read()
            child.stdin.write("go\n")
            child.stdin.flush()
            s.objects.add_many(_headline(n) for n in range(50))
            counter = s.table("c")
            for _ in range(25):
                s.transact(lambda: counter.__setitem__(b"n", b"%d" % (int(counter.get(b"n", b"0")) + 1)))
            _, err = child.communicate(timeout=30)
            assert child.returncode == 0, err
        finally:
            child.kill()
        assert counter[b"n"] == b"50" and len(s.objects) == 100


# --- the rest of the interface -----------------------------------------------------------


def test_writing_inside_reading_raises(pg_url):
    with open_store(pg_url) as s:
        with s.reading():
            for write in (lambda: s.table("t").__setitem__(b"k", b"v"),
                          lambda: s.engine.put_new(OBJECTS, [(b"k", b"v")]),
                          lambda: s.engine.swap(REFS, b"HEAD", None, b"x"),
                          lambda: s.transact(lambda: None),
                          s.engine.compact):
                with pytest.raises(RuntimeError):
                    write()
        assert s.engine.count(OBJECTS) == 0 and s.refs.get("HEAD") is None


def test_nested_transact_runs_inline(pg_url, statements):
    with open_store(pg_url) as s:
        statements.clear()
        s.transact(lambda: s.transact(lambda: s.table("t").update({b"a": b"1", b"b": b"2"})))
        assert [q for q in statements if q in ("COMMIT",) or q.startswith("BEGIN")] == [
            "BEGIN ISOLATION LEVEL SERIALIZABLE", "COMMIT"]
        assert dict(s.table("t").items()) == {b"a": b"1", b"b": b"2"}


def test_local_folder_size_and_compaction(pg_url, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    url = _with(pg_url, password="s3cret-pw")
    with open_store(url) as s, open_store(pg_url) as again:
        folder = s.engine.local_folder
        assert folder.is_dir() and folder.parent == tmp_path / "cache" / "cortex"
        assert _database(pg_url) in folder.name and "s3cret" not in folder.name
        assert again.engine.local_folder == folder  # the same database, whatever the password
        empty = s.engine.size_bytes()
        objs = [_headline(n, os.urandom(8000).hex()) for n in range(100)]
        s.objects.add_many(objs)
        full = s.engine.size_bytes()
        assert full > empty + 500_000
        s.objects.delete_many(o.oid for o in objs[10:])
        s.engine.compact()
        assert s.engine.size_bytes() < full / 2 and len(s.objects) == 10 and s.objects[objs[9].oid] == objs[9]
