# `make run` and `make test` set everything up on a fresh machine, then do the job.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench setup clean examples tmux

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

test: $(STAMP) tmux
	$(BIN)/python -m pytest

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) snapshots/*.mdb snapshots/*.lock snapshots/index

# The tour edits org/ and makes it a working copy of the store in snapshots/: put the bundled examples back
# (and start the store afresh: it tracked the folder as it was).
examples:
	git checkout -- org && git clean -fdxq org
	rm -rf snapshots/*.mdb snapshots/*.lock snapshots/index
