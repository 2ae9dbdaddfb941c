# `make demo` and `make test` set everything up themselves: a fresh clone needs nothing else.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,vectors,mcp,otel]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/orchestrator run scenarios/flagship.yaml

test: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q
	$(BIN)/orchestrator check scenarios/

bench: $(STAMP)
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) build dist *.egg-info
