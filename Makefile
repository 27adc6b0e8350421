# `make run` and `make test` set everything up on a fresh machine, then do the job.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench setup clean examples tmux emacs

$(STAMP): pyproject.toml
	@echo "setting up $(VENV): cortex and its libraries (the first time takes a few minutes)"
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@echo "set up: $(VENV) holds everything cortex needs"
	touch $(STAMP)

setup: $(STAMP)

# EXAMPLE secrets, so that the bundled webhooks (org/definitions.hy, the README's tour) run as shown;
# a secret already set in the environment is kept. Never use these for a real webhook.
EXAMPLE_SECRETS := \
	GITHUB_WEBHOOK_SECRET=$${GITHUB_WEBHOOK_SECRET:-example-github-secret} \
	STRIPE_WEBHOOK_SECRET=$${STRIPE_WEBHOOK_SECRET:-whsec_ZXhhbXBsZS1zdHJpcGUtc2VjcmV0} \
	DEPLOY_WEBHOOK_SECRET=$${DEPLOY_WEBHOOK_SECRET:-whsec_ZXhhbXBsZS1kZXBsb3ktc2VjcmV0}

run: $(STAMP)
	env $(EXAMPLE_SECRETS) $(BIN)/cortex repl org

# The REPL's terminal test drives the real program in tmux; install it where we can.
tmux:
	@command -v tmux >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && apt-get install -y -qq tmux >/dev/null; } || \
		echo "tmux is not installed: the terminal test will be skipped"

# The Emacs package's tests run it in batch Emacs with eglot (built in from Emacs 29; Debian packages it for 28).
emacs:
	@emacs -Q --batch --eval "(progn (dolist (d (file-expand-wildcards \"/usr/share/emacs/site-lisp/elpa/*\")) \
		(push d load-path)) (require 'eglot))" 2>/dev/null || \
		{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq && \
		apt-get install -y -qq emacs-nox elpa-eglot >/dev/null; } || \
		echo "emacs or eglot is not installed: the Emacs package's tests will be skipped"

# The tests run in parallel, one process per core (pytest-xdist), each idle one taking tests from the busiest;
# `make test TEST_WORKERS=4` asks for more. One file alone runs serially: .venv/bin/python -m pytest tests/x.py
TEST_WORKERS ?= auto
test: $(STAMP) tmux emacs
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) snapshots/*.mdb snapshots/*.lock snapshots/index

# The tour edits org/ and makes it a working copy of the store in snapshots/: put the bundled examples back
# (and start the store afresh: it tracked the folder as it was).
examples:
	git checkout -- org && git clean -fdxq org
	rm -rf snapshots/*.mdb snapshots/*.lock snapshots/index
