# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# letta-client 1.7.12 alone (the version Letta 0.16.8 locks): tests/test_server_letta17.py
# runs its walk with it; the main venv has 1.12.1.
LETTA17 := .venv-letta17
LETTA17_STAMP := $(LETTA17)/.installed

.PHONY: run demo chat test lint docs bench install clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

$(LETTA17_STAMP):
	$(PYTHON) -m venv $(LETTA17)
	$(LETTA17)/bin/pip install --quiet letta-client==1.7.12
	touch $(LETTA17_STAMP)

# The server on SQLite with a ready agent "assistant" (Ctrl-C stops it); PORT=, HOST=
# (else STATELOOP_PORT, STATELOOP_HOST, else 127.0.0.1:8283) and MODEL= pass through.
# With no provider: `make run MODEL=demo/echo` (a demo model that repeats what you say).
run: $(STAMP)
	$(BIN)/stateloop up $(if $(PORT),--port $(PORT)) $(if $(HOST),--host $(HOST)) \
		$(if $(MODEL),--model $(MODEL))

# An agent end to end in one script, no provider needed (a scripted model).
demo: $(STAMP)
	$(BIN)/python -m stateloop.examples.quickstart

# Talk to AGENT (else the "assistant" that `make run` made ready); while `make run` serves
# the database, the CLI talks to that server.
chat: $(STAMP)
	$(BIN)/stateloop chat $(AGENT)

# The docs site is built strictly (a broken link or a stale API name fails it; its examples
# run in tests/test_docs_examples.py). The real-path check sends a few messages through
# letta-client and `stateloop serve` and fails when the server adds over 25 ms to one (a
# stall such as a delayed ACK on every response). mypy and the docs build (one core each)
# run beside the tests, which leave cores idle while they wait on servers; their output
# follows pytest's, and any of the three failing fails the target.
test: $(STAMP) $(LETTA17_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/python bench/real_path.py --sizes 0 --rounds 10 --no-tools --check 25
	@mkdir -p build
	@$(BIN)/mypy > build/mypy.log 2>&1 & typed=$$!; \
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet > build/docs.log 2>&1 & built=$$!; \
	$(BIN)/pytest -n 2 --dist worksteal --durations=10; tests=$$?; \
	wait $$typed; typed=$$?; echo "mypy:"; cat build/mypy.log; \
	wait $$built; built=$$?; echo "mkdocs build --strict: exit $$built"; cat build/docs.log; \
	test $$tests = 0 && test $$typed = 0 && test $$built = 0

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# The documentation site from docs/ into build/site; --strict fails on a broken link or a
# stale API name. `$(BIN)/mkdocs serve` previews it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python bench/loop_overhead.py
	$(BIN)/python bench/tokens.py
	$(BIN)/python bench/persistence_overhead.py
	$(BIN)/python bench/postgres_store.py
	$(BIN)/python bench/vector_search.py
	$(BIN)/python bench/server_load.py
	$(BIN)/python bench/real_path.py
	$(BIN)/python bench/sandbox_start.py
	$(BIN)/python bench/sleeptime.py
	$(BIN)/python bench/multi_agent.py
	$(BIN)/python bench/files.py
	$(BIN)/python bench/uploads.py 60
	$(BIN)/python bench/fleet.py

clean:
	rm -rf $(VENV) $(LETTA17) build .pytest_cache .mypy_cache .ruff_cache
