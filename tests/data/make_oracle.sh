#!/usr/bin/env bash
# Rebuild emacs_oracle.jsonl.gz: Emacs's own view (org-element) of every headline of the
# shared corpus, the expected data of tests/org/test_parser.py.
#
# Needs Debian's emacs-nox (Emacs 28.2 with Org 9.5.5, the version the data was made with)
# and the corpus at ../shared/corpus next to the repository.  Each output line is one headline:
#   {"file": path relative to the corpus, "line": 1-based, "level": reduced level,
#    "title": raw title, "todo", "priority", "tags": own tags,
#    "properties": [[NAME, value], ...] (names upper-cased, duplicates kept), "id"}
# Run from anywhere:  tests/data/make_oracle.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus=$(cd "$here/../../../shared/corpus" && pwd)
cd "$corpus"
find . -name '*.org' -not -path './oracle/*' | sed 's|^\./||' | LC_ALL=C sort \
  | xargs -d '\n' oracle/org_oracle.sh \
  | python3 -c '
import json, sys
fields = ("line", "level", "title", "todo", "priority", "tags", "properties", "id")
for raw in sys.stdin:
    record = json.loads(raw)
    if record["type"] == "file":
        if record.get("error"):
            sys.exit("%s: %s" % (record["file"], record["error"]))
        path = record["file"]
        continue
    out = {"file": path, **{k: record[k] for k in fields}}
    print(json.dumps(out, ensure_ascii=False, separators=(",", ":")))
' | gzip -9n > "$here/emacs_oracle.jsonl.gz"
echo "wrote $here/emacs_oracle.jsonl.gz ($(zcat "$here/emacs_oracle.jsonl.gz" | wc -l) headlines)"
