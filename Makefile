# The everyday tasks, one entry point. CI runs the same checks (.ci/run); pre-commit runs lint and format-check.
VENV ?= .venv
PY := $(VENV)/bin/python
RUFF := $(VENV)/bin/ruff
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs

.PHONY: help install test test-fast lint deadcode format format-check docs docs-serve bench-quick check

help:
	@echo "make install       the venv with memclaw and its dev tools (torch first: the CPU build)"
	@echo "make test          the whole test suite (10+ minutes on 2 cores)"
	@echo "make test-fast     the tests not marked slow"
	@echo "make lint          ruff check"
	@echo "make deadcode      vulture: code nothing uses (reviewed exceptions: tools/vulture_whitelist.py)"
	@echo "make format        ruff format, in place"
	@echo "make format-check  ruff format --check"
	@echo "make docs          build the docs strictly into site/"
	@echo "make docs-serve    serve the docs on http://127.0.0.1:8000"
	@echo "make bench-quick   the small benchmarks that need no data file, results in BENCH_OUT"
	@echo "make check         lint, format-check and docs: what to run before a commit"

install:
	python3.11 -m venv $(VENV)
	$(VENV)/bin/pip install torch==2.13.0
	$(VENV)/bin/pip install -e '.[dev]'

test:
	$(PY) -m pytest -q

test-fast:
	$(PY) -m pytest -q -m "not slow"

lint:
	$(RUFF) check memclaw tests benchmarks tools

# The dead-code check CI runs; its settings are [tool.vulture] in pyproject.toml.
deadcode:
	$(VENV)/bin/vulture

format:
	$(RUFF) format memclaw tests benchmarks tools

format-check:
	$(RUFF) format --check memclaw tests benchmarks tools

docs:
	$(MKDOCS) build --strict --site-dir site

docs-serve:
	$(MKDOCS) serve

# The results go to BENCH_OUT (default: a new temp folder), never over the committed ones.
bench-quick:
	out=$${BENCH_OUT:-$$(mktemp -d)} && \
	$(VENV)/bin/memclaw bench perf --sizes 1000 --out $$out/perf && \
	$(PY) benchmarks/bench_context.py --iterations 200 --out $$out/context.md && \
	$(PY) benchmarks/bench_embedding.py --quick --out $$out/embedding.md && \
	echo "results in $$out"

check: lint deadcode format-check docs
