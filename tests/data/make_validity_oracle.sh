#!/usr/bin/env bash
# Rebuild tests/data/validity/: the memory.org the scripted agent life of tests/scenarios/test_facts_that_change.py
# writes, and Emacs's own reading of it (validity_oracle.el), the expected data of tests/oracle/test_emacs_validity.py.
# Needs Debian's emacs-nox (Emacs 28.2, Org 9.5.5, the version the data was made with).
# Run from the repository:  tests/data/make_validity_oracle.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
.venv/bin/python -c '
import sys, tempfile
from pathlib import Path
from tests.scenarios.test_facts_that_change import MEMORY, lived
with lived(Path(tempfile.mkdtemp())) as (script, c):
    Path(sys.argv[1]).write_bytes((script.org / MEMORY).read_bytes())
' "$here/validity/memory.org"
emacs --batch -Q -l "$here/validity_oracle.el" "$here/validity/memory.org" "$here/validity/emacs.json" 2>/dev/null
echo "wrote validity/memory.org and validity/emacs.json"
