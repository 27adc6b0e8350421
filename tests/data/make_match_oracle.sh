#!/usr/bin/env bash
# Rebuild match_oracle.jsonl.gz: Emacs's own answers (org-map-entries) to the Org match strings
# of match_oracle.el, over the hand-written files of orgquery/ and every file of the shared corpus,
# the expected data of tests/oracle/test_emacs_match_strings.py.
#
# Needs Debian's emacs-nox (Emacs 28.2 with Org 9.5.5, the version the data was made with) and,
# for the corpus part, the corpus at ../shared/corpus next to the repository (without it, only the
# hand-written files are dumped).  Paths are relative to tests/data (orgquery/...) or to the corpus.
# Run from anywhere:  tests/data/make_match_oracle.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LC_ALL=C  # string comparisons in match strings collate by code point
out=$(mktemp)
trap 'rm -f "$out"' EXIT
(cd "$here" && find orgquery -name '*.org' | sort | MATCH_ORACLE_TITLES=1 xargs -d '\n' emacs -Q --batch -l "$here/match_oracle.el") > "$out"
if [ -d "$here/../../../shared/corpus" ]; then
  corpus=$(cd "$here/../../../shared/corpus" && pwd)
  (cd "$corpus" && find . -name '*.org' -not -path './oracle/*' | sed 's|^\./||' | sort \
     | xargs -d '\n' emacs -Q --batch -l "$here/match_oracle.el" | grep -v '^{"matches":') >> "$out"
fi
gzip -9n < "$out" > "$here/match_oracle.jsonl.gz"
echo "wrote $here/match_oracle.jsonl.gz ($(zcat "$here/match_oracle.jsonl.gz" | wc -l) lines)"
