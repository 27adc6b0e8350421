import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

USEARCH_FIRST = textwrap.dedent("""
    import sys
    from pathlib import Path

    import usearch.index  # before cortex: onnxruntime loaded after it used to crash the process
    import cortex.api as cx

    root = Path(sys.argv[1])
    (root / "org").mkdir()
    (root / "org" / "notes.org").write_text("* Export to HTML\\nThe exporter writes pages.\\n* Groceries\\nmilk\\n")
    with cx.open(root / "store", root / "org") as c:
        c.ingest()
        print(c.search("export to HTML", limit=1)[0].outline[0])
""")


def test_usearch_imported_before_cortex_does_not_crash_the_search(tmp_path):
    done = subprocess.run([sys.executable, "-c", USEARCH_FIRST, str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr  # was -11 (a segfault)
    assert done.stdout.strip() == "Export to HTML"
    assert "import cortex (or onnxruntime) before usearch" in done.stderr
