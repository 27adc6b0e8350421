"""LMDB-specific durability on real files (the store contract is tests/oracle/test_store_contract.py)."""

import subprocess
import sys
import textwrap

import threading

import pytest

from cortex.backends import open_store
from cortex.backends.base import META
from cortex.backends.lmdb import StoreLocked
from cortex.codec import encode
from cortex.errors import FormatError
from cortex.objects import Headline


def test_lmdb_persists_across_reopen(tmp_path):
    h = Headline(level=1, title="kept", raw="* kept\n")
    with open_store(tmp_path) as s:
        s.objects.add(h)
        s.refs.set_if_equals("HEAD", h.oid, None, "keep")
    with open_store(tmp_path) as s:
        assert s.objects[h.oid] == h and s.refs.get("HEAD") == h.oid
        assert s.refs.reflog("HEAD")[0].message == "keep"


def test_lmdb_map_grows_when_full(tmp_path):
    with open_store(tmp_path, map_size=1 << 20) as s:
        objs = [Headline(level=1, title=str(n), raw=f"* {n}\n" + "x" * 2000) for n in range(2000)]
        assert s.objects.add_many(objs) == 2000
        assert s.engine.env.info()["map_size"] > 1 << 20
        assert s.objects[objs[-1].oid] == objs[-1]


def test_lmdb_map_grows_under_a_group_of_writers(tmp_path):
    with open_store(tmp_path, map_size=1 << 20) as s:
        table, failed = s.table("t"), []

        def write(n: int) -> None:
            def half_done() -> None:
                table[f"{n}-bad".encode()] = b"x"
                raise RuntimeError("given up")

            try:
                for k in range(20):
                    table[f"{n}-{k}".encode()] = bytes([n]) * 20_000
                with pytest.raises(RuntimeError):  # a member that raises undoes only its own writes
                    s.transact(half_done)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failed.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failed == [] and len(table) == 160 and not any(k.endswith(b"bad") for k in table)
        assert s.engine.env.info()["map_size"] > 1 << 20


def test_same_store_cannot_open_twice_in_one_process(tmp_path):
    with open_store(tmp_path):
        with pytest.raises(StoreLocked, match="already open"):
            open_store(tmp_path)
    open_store(tmp_path).close()


def test_newer_format_is_refused(tmp_path):
    with open_store(tmp_path) as s:
        s.transact(lambda: s.engine.put(META, b"format", encode(99)))
    with pytest.raises(FormatError, match="format 99"):
        open_store(tmp_path)


def test_killed_writer_leaves_last_committed_state(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from cortex.backends import open_store
        from cortex.objects import Headline
        s = open_store({str(tmp_path)!r})
        first = Headline(level=1, title="committed", raw="* committed\\n")
        s.objects.add(first)
        s.refs.set_if_equals("HEAD", first.oid, None)
        def killed_midway():
            s.objects.add_many(Headline(level=1, title=str(n), raw=f"* {{n}}\\n") for n in range(1000))
            os.kill(os.getpid(), signal.SIGKILL)
        s.transact(killed_midway)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    with open_store(tmp_path) as s:
        assert len(s.objects) == 1
        assert s.objects[s.refs.get("HEAD")].title == "committed"
