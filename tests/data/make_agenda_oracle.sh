#!/usr/bin/env bash
# Rebuild tests/data/agenda/expected-NAME.txt: Emacs's own agenda of each sample tests/data/agenda/NAME.org,
# the expected data of tests/orgquery/test_agenda.py.  Each sample's first line says which days to list:
#   # agenda: today=YYYY-MM-DD start=YYYY-MM-DD span=N
# Needs Debian's emacs-nox (Emacs 28.2, Org 9.5.5, the version the data was made with).
# Run from anywhere:  tests/data/make_agenda_oracle.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for sample in "$here"/agenda/*.org; do
  name=$(basename "$sample" .org)
  header=$(head -1 "$sample")
  today=$(sed -n 's/.*today=\([0-9-]*\).*/\1/p' <<<"$header")
  start=$(sed -n 's/.*start=\([0-9-]*\).*/\1/p' <<<"$header")
  span=$(sed -n 's/.*span=\([0-9]*\).*/\1/p' <<<"$header")
  emacs --batch -Q -l "$here/agenda_oracle.el" "$sample" "$today" "$start" "$span" \
    "$here/agenda/expected-$name.txt" 2>/dev/null
  echo "wrote agenda/expected-$name.txt"
done
