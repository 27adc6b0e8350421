"""The PostgreSQL engine: one database holds the store, shared by every process on every machine.

Layout. Each engine table is a plain table `cortex_<name> (k bytea PRIMARY KEY, v bytea NOT NULL)`,
created on first open. Only plain SQL is used (primary keys, INSERT ... ON CONFLICT, conditional
UPDATE and DELETE; no advisory locks, no LISTEN/NOTIFY), so Postgres-compatible engines serve too.

Round trips. On a network every statement costs a round trip, so nothing costs one per object:
`get_many` is one `k = ANY(array)` query, `put_new` one `INSERT ... SELECT FROM unnest(...) ON
CONFLICT DO NOTHING` (chunked only when huge), `swap` one conditional statement checked by its row
count, and `scan` reads pages of rows by key (keyset pagination), lazily, so stopping early reads
little. Outside `reading()` each page is its own statement: a scan running beside writers sees,
in order and once, every key present throughout; `reading()` gives one state for the whole scan.

Transactions. Writers run SERIALIZABLE: code above this layer reads, decides and writes inside
`transact` and relies on writers being serialised, as LMDB's single writer does. Where LMDB
would block, PostgreSQL aborts one of two conflicting transactions (SQLSTATE 40001 or 40P01);
the engine runs it again after a jittered, growing pause, for up to RETRY_SECONDS. Concurrent
`transact` calls of one process share one transaction and one COMMIT (group commit, see
`group`), each under its own SAVEPOINT so that one that raises undoes only its own writes.

Connections. Each engine has a small psycopg_pool pool. A read outside any block borrows an
autocommit connection for that call; a thread inside `transact` or `reading()` keeps one for the
block (thread-local), `reading()` in a REPEATABLE READ READ ONLY transaction.

Failures. No psycopg error reaches the user raw: each becomes one line naming the database
(never its password). A connection lost before COMMIT was sent lost nothing, since the server rolls
back what the connection did: the group runs again on a fresh connection once the server answers,
and the engine says the server is unreachable if it does not. A connection lost during COMMIT
leaves the outcome unknown, and the engine says so rather than guess.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ..errors import UserError
from .base import ENGINE_TABLES, Engine, NoStore, StoreBusy, StoreDamaged, StoreFull, StoreLocked, StoreUnreachable
from .group import GroupCommit, Member

T = TypeVar("T")

POOL_SIZE = 8
CONNECT_TIMEOUT = 5  # seconds to reach the server before saying it cannot be reached
POOL_WAIT = 2.0  # a thread waiting this long for a pooled connection checks that the server still answers
BUSY_WAIT = 60.0  # ... and gives up after this long if it does but every connection stays in use
PAGE_ROWS = 1000  # rows per page of a scan
CHUNK_ROWS, CHUNK_BYTES = 10_000, 32 << 20  # the most one INSERT of put_new carries
GET_CHUNK = 50_000  # the most keys one get_many query asks for
RETRY_SECONDS = 30.0  # how long a transaction that keeps conflicting is tried again
RECONNECTS = 3  # how many lost connections in a row one call survives
TABLE_PREFIX = "cortex_"

SERIALIZATION = ("40001", "40P01")  # serialization failure, deadlock: run the transaction again
SHUTDOWN = ("57P01", "57P02", "57P03")  # the server ended the connection (or is starting or stopping)
CREATE_LOCK = 0x636F72746578  # the advisory lock held while creating tables: "cortex"
CREATE_RACE = ("23505", "42P07", "42710")  # another creator made the same table or row type at that moment
DISK_FULL = "53100"
SCHEMA_CHANGED = ("42P01", "42703", "42804")  # undefined table or column, wrong column type

ROLLED_BACK = "the transaction was rolled back, nothing was lost"
ABANDONED = "the compaction was abandoned, the store is unchanged"

__all__ = ["PostgresEngine", "StoreUnreachable", "redact"]


@dataclass(frozen=True)
class _Sql:
    """The statements for one engine table (built once: the table name is ours, never the user's)."""

    get: str
    put: str
    delete: str
    count: str
    get_many: str
    delete_many: str
    put_many: str
    put_new: str
    insert_new: str
    update_if: str
    delete_if: str
    scan: dict[tuple[bool, bool], str]  # keyed by (first page, bounded above)

    @classmethod
    def for_table(cls, name: str) -> "_Sql":
        t = TABLE_PREFIX + name
        scans = {}
        for first in (True, False):
            for bounded in (True, False):
                where = "k >= %s" if first else "k > %s"
                if bounded:
                    where += " AND k < %s"
                scans[first, bounded] = f"SELECT k, v FROM {t} WHERE {where} ORDER BY k LIMIT %s"
        return cls(
            get=f"SELECT v FROM {t} WHERE k = %s",
            put=f"INSERT INTO {t} (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            delete=f"DELETE FROM {t} WHERE k = %s",
            count=f"SELECT count(*) FROM {t}",
            get_many=f"SELECT k, v FROM {t} WHERE k = ANY(%s)",
            delete_many=f"DELETE FROM {t} WHERE k = ANY(%s)",
            put_many=f"INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], %s::bytea[]) "
                     "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            put_new=f"INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], %s::bytea[]) ON CONFLICT (k) DO NOTHING",
            insert_new=f"INSERT INTO {t} (k, v) VALUES (%s, %s) ON CONFLICT (k) DO NOTHING",
            update_if=f"UPDATE {t} SET v = %s WHERE k = %s AND v = %s",
            delete_if=f"DELETE FROM {t} WHERE k = %s AND v = %s",
            scan=scans,
        )


class _Local(threading.local):
    """What one thread holds: the connection of its transact or reading block, and how that transaction fares."""

    conn: psycopg.Connection | None = None
    writing = False
    doomed: psycopg.Error | None = None  # a failure that lost the whole transaction (conflict, lost connection)
    failure: Exception | None = None  # the first failed statement, as the cortex error raised for it


class PostgresEngine(Engine):
    """The engine tables as PostgreSQL tables; writes group-commit in SERIALIZABLE transactions."""

    remote = True

    def __init__(self, url: str, pool_size: int = POOL_SIZE, connect_timeout: int = CONNECT_TIMEOUT,
                 create: bool = True):
        self.url = url
        self._closed = True  # until everything below is open
        self._where = self.location = redact(url)
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreUnreachable(f"cannot read the PostgreSQL URL {self._where}: {_first_line(exc)}") from None
        self._password = str(params.get("password") or "")
        self._params = params
        self._kwargs: dict = {"autocommit": True}
        if "connect_timeout" not in params:
            self._kwargs["connect_timeout"] = int(connect_timeout)
        self.page_rows = PAGE_ROWS
        self._sql = {name: _Sql.for_table(name) for name in ENGINE_TABLES}
        conn = self._connect()  # a clear error now, rather than a pool retrying in the background
        try:
            self._create_tables(conn, create)
        except psycopg.Error as exc:
            raise self._failure(exc, "nothing was written") from None
        finally:
            conn.close()
        self._pool_size = pool_size
        self._pool = ConnectionPool(url, kwargs=self._kwargs, min_size=1, max_size=pool_size, open=False,
                                    name="cortex", num_workers=2)
        self._pool.open(wait=False)
        self._local = _Local()
        self._group = GroupCommit(self._commit_group)
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresEngine({self._where!r})"

    # --- opening -------------------------------------------------------------------------

    def _connect(self, outcome: str | None = None) -> psycopg.Connection:
        """A new connection outside the pool, or StoreUnreachable saying why there is none."""
        try:
            return psycopg.connect(self.url, **self._kwargs)
        except psycopg.Error as exc:
            raise self._unreachable(exc, outcome) from None

    def _create_tables(self, conn: psycopg.Connection, create: bool = True) -> None:
        """Create the tables if missing (NoStore instead unless `create`); processes opening a new database at
        once all succeed."""
        names = [TABLE_PREFIX + name for name in ENGINE_TABLES]
        for attempt in range(10):
            # Look first: a user who may read and write the tables need not be allowed to create any.
            present = conn.execute("SELECT count(to_regclass(t)) FROM unnest(%s::text[]) t", (names,)).fetchone()
            if present[0] == len(names):
                return
            if not create:
                raise NoStore(f"{self._where}: no cortex store in this database (it has none of its tables)")
            try:
                # IF NOT EXISTS looks before it writes to the catalog, so two creators can both look, then
                # collide on its unique indexes (the table's name, its row type): one cortex creator at a time.
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (CREATE_LOCK,))
                    for name in names:
                        conn.execute(f"CREATE TABLE IF NOT EXISTS {name} (k bytea PRIMARY KEY, v bytea NOT NULL)")
                return
            except psycopg.Error as exc:
                # A creator that takes no lock (another tool, an older cortex) committed first: look again.
                if exc.sqlstate not in CREATE_RACE or attempt == 9:
                    raise
                time.sleep(random.uniform(0.01, 0.05))

    # --- errors --------------------------------------------------------------------------

    def _reason(self, exc: BaseException) -> str:
        """The gist of a psycopg error, on one line, without the password."""
        text = _first_line(exc)
        if len(self._password) >= 3:  # libpq does not echo passwords; this makes sure of it
            text = text.replace(self._password, "***")
        return text

    def _unreachable(self, exc: BaseException, outcome: str | None = None) -> StoreUnreachable:
        """The error for a server that cannot be connected to, with what to check."""
        reason = self._reason(exc)
        low = reason.lower()
        then = f": {outcome}" if outcome else ""
        if "password" in low or "authentication" in low:
            return StoreUnreachable(f"cannot connect to PostgreSQL at {self._where}: {reason}{then}; "
                                    "check the user name and password")
        if "does not exist" in low:
            return StoreUnreachable(f"cannot connect to PostgreSQL at {self._where}: {reason}{then}; "
                                    "check the URL, or create it on the server first")
        return StoreUnreachable(f"cannot reach PostgreSQL at {self._where}: {reason}{then}; "
                                "check the URL and that the server is running")

    def _failure(self, exc: psycopg.Error, outcome: str | None = None,
                 conn: psycopg.Connection | None = None) -> Exception:
        """The cortex error a failed statement stands for, one line naming the database."""
        state = exc.sqlstate or ""
        reason, where = self._reason(exc), self._where
        then = f": {outcome}" if outcome else ""
        if state == DISK_FULL:
            return StoreFull(f"PostgreSQL at {where}: the database server's disk is full ({reason}){then}; "
                             "free some space on it and try again")
        if state in SERIALIZATION:
            return StoreBusy(f"PostgreSQL at {where}: the transaction kept conflicting with other writers for "
                             f"{RETRY_SECONDS:g} s{then}; try again")
        if _lost(exc, conn) or (not state and isinstance(exc, psycopg.OperationalError)):
            return StoreUnreachable(f"lost the connection to PostgreSQL at {where} ({reason}){then}; "
                                    "check that the server is running and try again")
        if state.startswith("53"):  # out of memory, too many connections, a configured limit
            return StoreUnreachable(f"PostgreSQL at {where} is out of resources ({reason}){then}; try again later")
        if state == "42501":
            return StoreLocked(f"PostgreSQL at {where}: {reason}{then}; "
                               "grant this user access to the cortex_ tables (or let it create them)")
        if state in SCHEMA_CHANGED:
            return StoreDamaged(f"PostgreSQL at {where}: the cortex tables are missing or altered ({reason}){then}; "
                                "run `cortex fsck`, or restore the database from a backup")
        return UserError(f"PostgreSQL at {where} refused a statement ({reason}; SQLSTATE {state or 'none'}){then}")

    # --- connections ---------------------------------------------------------------------

    def _getconn(self) -> psycopg.Connection:
        """A pooled connection; StoreUnreachable at once if the server stops answering meanwhile."""
        if self._closed:
            raise RuntimeError("the store is closed")
        deadline = time.monotonic() + BUSY_WAIT
        while True:
            try:
                return self._pool.getconn(timeout=POOL_WAIT)
            except PoolClosed:
                raise RuntimeError("the store is closed") from None
            except PoolTimeout:
                self._connect().close()  # the pool retries quietly: ask the server directly why
                if time.monotonic() > deadline:
                    raise StoreBusy(f"PostgreSQL at {self._where}: all {self._pool_size} connections of this "
                                    f"process stayed in use for {BUSY_WAIT:g} s; try again") from None

    def _putconn(self, conn: psycopg.Connection) -> None:
        """Give a connection back to the pool, out of any transaction (a broken one is dropped by the pool)."""
        if not conn.closed and conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                pass  # the connection is broken: the pool discards it
        try:
            self._pool.putconn(conn)
        except Exception:  # noqa: BLE001 - the pool closed meanwhile: just drop the connection
            conn.close()

    def _recover(self, outcome: str | None = None) -> None:
        """After a lost connection: StoreUnreachable if the server is down, else drop the pool's dead connections."""
        self._connect(outcome).close()
        self._pool.check()

    def _pooled(self, op: Callable[[psycopg.Connection], T], outcome: str | None = None) -> T:
        """Run `op` on a pooled autocommit connection, again on a fresh one if the connection was lost."""
        attempt = 0
        while True:
            conn = self._getconn()
            try:
                return op(conn)
            except psycopg.Error as exc:
                attempt += 1
                if not _lost(exc, conn) or attempt == RECONNECTS:
                    raise self._failure(exc, outcome, conn) from None
            finally:
                self._putconn(conn)
            self._recover(outcome)  # the server restarted, say: every pooled connection is dead

    def _bound(self, conn: psycopg.Connection, op: Callable[[psycopg.Connection], T]) -> T:
        """Run `op` on this thread's transaction; a failure is remembered, so the transaction can be retried."""
        try:
            return op(conn)
        except psycopg.Error as exc:
            local = self._local
            failure = self._failure(exc, ROLLED_BACK if local.writing else None, conn)
            if local.writing:
                if local.doomed is None and (exc.sqlstate in SERIALIZATION or _lost(exc, conn)):
                    local.doomed = exc
                if local.failure is None:  # the first is the cause; later ones only say the transaction failed
                    local.failure = failure
            raise failure from None

    def _run(self, op: Callable[[psycopg.Connection], T]) -> T:
        """Run a read on this thread's transaction if it has one, else on a pooled connection."""
        conn = self._local.conn
        if conn is not None:
            return self._bound(conn, op)
        return self._pooled(op)

    def _in_write(self, op: Callable[[psycopg.Connection], T]) -> T:
        """Run a write in this thread's transaction, or in a transaction of its own."""
        if self._local.writing:
            return self._bound(self._local.conn, op)
        return self.transact(lambda: self._bound(self._local.conn, op))

    # --- reading and writing -------------------------------------------------------------

    def get(self, table: str, key: bytes) -> bytes | None:
        sql = self._sql[table].get
        row = self._run(lambda conn: conn.execute(sql, (bytes(key),), binary=True).fetchone())
        return None if row is None else row[0]

    def put(self, table: str, key: bytes, value: bytes) -> None:
        sql = self._sql[table].put
        self._in_write(lambda conn: conn.execute(sql, (bytes(key), bytes(value))))

    def delete(self, table: str, key: bytes) -> bool:
        sql = self._sql[table].delete
        return self._in_write(lambda conn: conn.execute(sql, (bytes(key),)).rowcount > 0)

    def scan(self, table: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Key-ordered (key, value) pairs under `prefix`, read a page at a time as they are taken."""
        queries, prefix = self._sql[table].scan, bytes(prefix)
        end = _prefix_end(prefix)
        last = None
        while True:
            rows_wanted = self.page_rows
            params: tuple = (prefix if last is None else last,) + (() if end is None else (end,)) + (rows_wanted,)
            sql = queries[last is None, end is not None]
            rows = self._run(lambda conn: conn.execute(sql, params, binary=True).fetchall())
            yield from rows
            if len(rows) < rows_wanted:
                return
            last = rows[-1][0]

    def count(self, table: str) -> int:
        sql = self._sql[table].count
        return self._run(lambda conn: conn.execute(sql).fetchone()[0])

    def get_many(self, table: str, keys: list[bytes]) -> list[bytes | None]:
        """The values under `keys`, in order (None where absent): one query (per GET_CHUNK keys, in one view)."""
        keys = [bytes(key) for key in keys]
        if not keys:
            return []
        sql = self._sql[table].get_many
        unique = list(dict.fromkeys(keys))
        found: dict[bytes, bytes] = {}
        with self.reading() if len(unique) > GET_CHUNK else nullcontext():
            for start in range(0, len(unique), GET_CHUNK):
                chunk = unique[start:start + GET_CHUNK]
                found.update(self._run(lambda conn: conn.execute(sql, (chunk,), binary=True).fetchall()))
        return [found.get(key) for key in keys]

    def delete_many(self, table: str, keys: list[bytes]) -> int:
        """Remove the keys in one statement (per GET_CHUNK keys); return how many there were."""
        keys = list(dict.fromkeys(bytes(key) for key in keys))
        if not keys:
            return 0
        sql = self._sql[table].delete_many
        return self._in_write(lambda conn: sum(conn.execute(sql, (keys[start:start + GET_CHUNK],)).rowcount
                                               for start in range(0, len(keys), GET_CHUNK)))

    def put_new(self, table: str, items: list[tuple[bytes, bytes]]) -> int:
        """Insert the pairs whose key is absent in one statement (per chunk of a huge batch); return how many were."""
        return self._insert(self._sql[table].put_new, items)

    def put_many(self, table: str, items: list[tuple[bytes, bytes]]) -> None:
        """Write the pairs in one statement (per chunk of a huge batch)."""
        self._insert(self._sql[table].put_many, list(dict(items).items()))  # a key once: an upsert touches a row once

    def _insert(self, sql: str, items: list[tuple[bytes, bytes]]) -> int:
        """Run an unnest insert over `items` in chunks; return the rows it wrote."""
        if not items:
            return 0

        def insert(conn: psycopg.Connection) -> int:
            rows = 0
            for chunk in _chunks(items):
                keys = [bytes(key) for key, _ in chunk]
                values = [bytes(value) for _, value in chunk]
                rows += conn.execute(sql, (keys, values)).rowcount
            return rows

        return self._in_write(insert)

    def swap(self, table: str, key: bytes, expected: bytes | None, new: bytes | None) -> bool:
        """Compare-and-swap in one conditional statement: True if `key` held `expected` and now holds `new`."""
        sql, key = self._sql[table], bytes(key)
        if expected is None and new is None:  # "absent stays absent": true if it is absent
            return self._in_write(lambda conn: conn.execute(sql.get, (key,)).fetchone() is None)
        if expected is None:
            statement, params = sql.insert_new, (key, bytes(new))
        elif new is None:
            statement, params = sql.delete_if, (key, bytes(expected))
        else:
            statement, params = sql.update_if, (bytes(new), key, bytes(expected))

        def move(conn: psycopg.Connection) -> bool:
            return conn.execute(statement, params).rowcount == 1

        return self._in_write(move)

    # --- transactions --------------------------------------------------------------------

    def transact(self, fn: Callable[[], T]) -> T:
        """Run `fn` in one SERIALIZABLE transaction, grouped with those other threads start meanwhile."""
        if self._local.writing:
            return fn()
        self.check_writable()
        if self._local.conn is not None:
            raise RuntimeError("cannot write inside a reading() block")
        if self._closed:
            raise RuntimeError("the store is closed")
        return self._group.run(fn)

    def _commit_group(self, members: list[Member]) -> None:
        """Run each member under a savepoint of one transaction and commit it once; run it all again on conflict."""
        deadline = time.monotonic() + RETRY_SECONDS
        conflicts = losses = 0
        while True:
            conn = self._getconn()
            local = self._local
            local.conn, local.writing, local.doomed, local.failure = conn, True, None, None
            committing = False
            try:
                conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                if len(members) == 1:  # alone: no savepoint needed
                    members[0].reset()
                    members[0].succeed(members[0].fn())
                    if conn.info.transaction_status == TransactionStatus.INERROR:
                        raise self._swallowed()  # COMMIT would roll back silently
                else:
                    for member in members:
                        self._run_member(conn, member)
                committing = True
                conn.execute("COMMIT")
                return
            except Exception as exc:  # noqa: BLE001 - sorted below: run again, translated, or the member's own
                cause = local.doomed if local.doomed is not None else exc
                if not isinstance(cause, psycopg.Error):
                    raise  # the single member's own error, or one already translated
                lost = _lost(cause, conn)
                if committing and lost:
                    raise StoreUnreachable(
                        f"lost the connection to PostgreSQL at {self._where} while committing "
                        f"({self._reason(cause)}): the transaction may or may not have been applied; "
                        "check the store and try again") from None
                if cause.sqlstate in SERIALIZATION and time.monotonic() < deadline:
                    conflicts += 1
                elif lost and losses < RECONNECTS - 1:
                    losses += 1
                else:
                    raise self._failure(cause, ROLLED_BACK, conn) from None
            finally:
                local.conn, local.writing, local.doomed, local.failure = None, False, None, None
                self._putconn(conn)
            if lost:
                self._recover(ROLLED_BACK)  # StoreUnreachable if the server stays down
            else:  # a conflict: let the other transaction finish first, at a random moment so as not to meet again
                time.sleep(min(0.5, 0.004 * 2 ** min(conflicts, 10)) * random.uniform(0.5, 1.5))

    def _run_member(self, conn: psycopg.Connection, member: Member) -> None:
        """Run one member under a savepoint: its error undoes its own writes only."""
        member.reset()
        conn.execute("SAVEPOINT member")
        self._local.failure = None
        try:
            value = member.fn()
        except Exception as exc:  # noqa: BLE001 - the member's own error, raised in its own thread
            if self._local.doomed is not None:
                raise  # the whole transaction is lost: the group runs again
            conn.execute("ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member")
            member.fail(exc)
            return
        if conn.info.transaction_status == TransactionStatus.INERROR:
            if self._local.doomed is not None:
                raise self._swallowed()  # the group runs again
            conn.execute("ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member")
            member.fail(self._swallowed())
            return
        conn.execute("RELEASE SAVEPOINT member")
        member.succeed(value)

    def _swallowed(self) -> Exception:
        """The error for a transaction function that caught a failed statement's error and went on."""
        return self._local.failure or UserError(
            f"PostgreSQL at {self._where}: a statement of the transaction failed: {ROLLED_BACK}")

    @contextmanager
    def reading(self):
        """Pin one REPEATABLE READ snapshot for every read of this thread in the block."""
        if self._local.conn is not None:
            yield
            return
        conn = self._pooled_begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self._local.conn = conn
        try:
            yield
        finally:
            self._local.conn = None
            self._putconn(conn)

    def _pooled_begin(self, begin: str) -> psycopg.Connection:
        """A pooled connection inside a transaction begun with `begin` (a fresh one if a pooled one was dead)."""
        attempt = 0
        while True:
            conn = self._getconn()
            try:
                conn.execute(begin)
                return conn
            except psycopg.Error as exc:
                self._putconn(conn)
                attempt += 1
                if not _lost(exc, conn) or attempt == RECONNECTS:
                    raise self._failure(exc, None, conn) from None
            self._recover()

    # --- maintenance ---------------------------------------------------------------------

    def compact(self) -> None:
        """VACUUM FULL the cortex tables: give the space of deleted rows back to the server's disk."""
        if self._local.conn is not None:
            raise RuntimeError("cannot compact inside a transaction or a reading() block")
        names = ", ".join(TABLE_PREFIX + name for name in ENGINE_TABLES)
        self._pooled(lambda conn: conn.execute(f"VACUUM FULL {names}"), ABANDONED)  # autocommit, as VACUUM needs

    def verify(self) -> list[str]:
        """Problems in the schema, one line each: missing tables, other columns, another primary key; [] when sound."""
        names = [TABLE_PREFIX + name for name in ENGINE_TABLES]
        columns_sql = """
            SELECT t, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
            FROM unnest(%s::text[]) t
            LEFT JOIN pg_attribute a ON a.attrelid = to_regclass(t) AND a.attnum > 0 AND NOT a.attisdropped"""
        keys_sql = """
            SELECT t, array(SELECT a.attname::text FROM unnest(i.indkey::int2[]) n
                            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = n)
            FROM unnest(%s::text[]) t JOIN pg_index i ON i.indrelid = to_regclass(t) AND i.indisprimary"""

        def read(conn: psycopg.Connection) -> tuple[list, dict]:
            return (conn.execute(columns_sql, (names,)).fetchall(),
                    dict(conn.execute(keys_sql, (names,)).fetchall()))

        rows, keys = self._run(read)
        columns: dict[str, dict[str, tuple[str, bool]]] = {name: {} for name in names}
        for table, column, kind, not_null in rows:
            if column is not None:
                columns[table][column] = (kind, not_null)
        wanted = {"k": ("bytea", True), "v": ("bytea", True)}
        problems = []
        for name in names:
            found = columns[name]
            if not found:
                problems.append(f"table {name} is missing")
                continue
            for column, (kind, _) in wanted.items():
                if column not in found:
                    problems.append(f"table {name} has no column {column}")
                elif found[column][0] != kind:
                    problems.append(f"column {name}.{column} is {found[column][0]}, not {kind}")
            if "v" in found and not found["v"][1]:
                problems.append(f"column {name}.v allows NULL")
            extra = sorted(set(found) - set(wanted))
            if extra:
                problems.append(f"table {name} has columns cortex did not make: {', '.join(extra)}")
            if keys.get(name) != ["k"]:
                problems.append(f"table {name} does not have the primary key (k)")
        return problems

    @property
    def local_folder(self) -> Path:
        """This machine's cache folder for the database: $XDG_CACHE_HOME (or ~/.cache)/cortex/<host-db>-<hash>."""
        cache = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(cache) if os.path.isabs(cache) else Path.home() / ".cache"
        host = str(self._params.get("host") or "localhost").split(",")[0]
        port = str(self._params.get("port") or "").split(",")[0]
        readable = "-".join(part for part in (host, port, str(self._params.get("dbname") or "")) if part)
        readable = re.sub(r"[^A-Za-z0-9._]+", "-", readable).strip("-.")[:60] or "postgres"
        digest = hashlib.sha256(self._where.encode()).hexdigest()[:12]  # the URL without its password
        folder = base / "cortex" / f"{readable}-{digest}"
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreLocked(f"cannot create the local cache folder {folder} for PostgreSQL at {self._where}: "
                              f"{exc.strerror}") from None
        return folder

    def size_bytes(self) -> int:
        """Bytes the cortex tables take on the server, indexes and TOAST included."""
        names = [TABLE_PREFIX + name for name in ENGINE_TABLES]
        sql = "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) FROM unnest(%s::text[]) t"
        return int(self._run(lambda conn: conn.execute(sql, (names,)).fetchone()[0]))

    def close(self) -> None:
        """Close the pool and its connections; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()


def redact(url: str) -> str:
    """`url` without its password (in the user part or as a parameter), to show in messages."""
    if "://" not in url:  # a key=value connection string
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error:
            return "<a connection string that cannot be read>"
        params.pop("password", None)
        return make_conninfo(**params)
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("://", 1)[0] + "://<a URL that cannot be read>"
    netloc = parts.netloc
    if "@" in netloc:
        user, hosts = netloc.rsplit("@", 1)
        netloc = user.split(":", 1)[0] + "@" + hosts
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"],
                      safe="/")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _first_line(exc: BaseException) -> str:
    """The first line of a psycopg message, its boilerplate trimmed ("connection failed:", "FATAL:")."""
    text = str(exc).strip() or type(exc).__name__
    text = re.sub(r"^(connection failed|connection is bad):\s*", "", text.splitlines()[0])
    return " ".join(text.replace("FATAL:", "").split())


def _lost(exc: psycopg.Error, conn: psycopg.Connection | None) -> bool:
    """Whether `exc` means the connection is gone (the server ended it, or the network did)."""
    state = exc.sqlstate or ""
    broken = conn is not None and (conn.broken or conn.closed)
    return broken or state in SHUTDOWN or state.startswith("08")


def _prefix_end(prefix: bytes) -> bytes | None:
    """The least key above every key starting with `prefix`; None when there is none (b"", b"\\xff\\xff")."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _chunks(items: list[tuple[bytes, bytes]]) -> Iterator[list[tuple[bytes, bytes]]]:
    """`items` in runs of at most CHUNK_ROWS pairs and about CHUNK_BYTES bytes."""
    chunk: list[tuple[bytes, bytes]] = []
    size = 0
    for key, value in items:
        if chunk and (len(chunk) >= CHUNK_ROWS or size + len(key) + len(value) > CHUNK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append((key, value))
        size += len(key) + len(value)
    if chunk:
        yield chunk

