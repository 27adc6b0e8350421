"""emacs/cortex.el in batch Emacs: it byte-compiles without a warning, and its ERT tests (emacs/cortex-tests.el)
pass through eglot connected to a real `cortex lsp` over a copy of the bundled examples (a working copy under no
version control, the project `cortex-project` finds) with two pending proposals: an id link followed, references
listed, search, snapshot and log, diff, history, and review, one proposal rejected and one accepted."""

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import cortex.api as cx

from tests.conftest import EXAMPLES
from tests.lsp_client import CORTEX

EMACS_DIR = Path(__file__).resolve().parents[2] / "emacs"
# Debian's elpa-eglot (eglot and the newer xref and project it needs), which batch Emacs does not load by itself
ELPA = [d for d in sorted(glob.glob("/usr/share/emacs/site-lisp/elpa/*")) if os.path.isdir(d)]
LOAD_PATH = "(dolist (d '(%s)) (push d load-path))" % " ".join(f'"{d}"' for d in ELPA)


def _has_eglot() -> bool:
    if shutil.which("emacs") is None:
        return False
    found = subprocess.run(["emacs", "-Q", "--batch", "--eval", LOAD_PATH, "--eval", "(require 'eglot)"],
                           capture_output=True, timeout=60)
    return found.returncode == 0


pytestmark = pytest.mark.skipif(not _has_eglot(), reason="no emacs with eglot on this machine (make test installs them)")


def emacs(*forms: str, env=None) -> subprocess.CompletedProcess:
    arguments = ["emacs", "-Q", "--batch", "--eval", LOAD_PATH, "-L", str(EMACS_DIR)]
    for form in forms:
        arguments += ["--eval", form]
    return subprocess.run(arguments, capture_output=True, text=True, timeout=180, env=env)


def test_it_byte_compiles_without_a_warning(tmp_path):
    compiled = tmp_path / "cortex.elc"
    done = emacs("(setq byte-compile-error-on-warn t)",
                 f'(setq byte-compile-dest-file-function (lambda (_) "{compiled}"))',
                 f'(kill-emacs (if (byte-compile-file "{EMACS_DIR / "cortex.el"}") 0 1))')
    assert done.returncode == 0 and compiled.exists(), done.stderr


def test_its_commands_through_eglot_and_cortex_lsp(tmp_path):
    org, store = tmp_path / "org", tmp_path / "store"
    shutil.copytree(EXAMPLES, org)
    with cx.open(store, org) as c:
        c.ingest()
        c.snapshot("start")
    with cx.open(store, org, review=True) as c:
        c.memory.add_item("assistant", "fact", "Likes green tea.")
        c.memory.add_item("assistant", "fact", "Reads on Sundays.")
    env = {**os.environ, "CORTEX_TEST_ORG": str(org), "CORTEX_TEST_STORE": str(store), "CORTEX_TEST_PROGRAM": CORTEX}
    done = emacs("(load \"cortex-tests\")",
                 "(let ((stats (ert-run-tests-batch t))) (eglot-shutdown-all)"
                 " (kill-emacs (if (zerop (ert-stats-completed-unexpected stats)) 0 1)))", env=env)
    assert done.returncode == 0, done.stderr[-6000:]
    assert "Ran 9 tests, 9 results as expected" in done.stderr
