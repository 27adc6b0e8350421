# `make run` and `make test` set everything up on a fresh machine, then do the job.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench setup clean tmux

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/cortex repl org

# The REPL's terminal test drives the real program in tmux; install it where we can.
tmux:
	@command -v tmux >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && apt-get install -y -qq tmux >/dev/null; } || \
		echo "tmux is not installed: the terminal test will be skipped"

test: $(STAMP) tmux
	$(BIN)/python -m pytest

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) snapshots/*.mdb snapshots/*.lock snapshots/index
