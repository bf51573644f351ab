# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of PyTorch; override (e.g. TORCH_SPEC=torch) to let pip choose a CUDA build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# Python keeps the bytecode of what it imports (an empty value unsets the variable for Python):
# where the environment sets PYTHONDONTWRITEBYTECODE, every process compiled torch's modules
# again (`import torch` 3.4 s against 1.3 s), and the tests start many processes.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: demo test lint format install clean

install: $(STAMP)

# torch is installed first and on its own: left to resolve `torch>=2.4` by itself, pip would pull
# the newest release with several GB of CUDA packages.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --no-compile "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --no-compile -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/vaswani demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

# Two workers (pytest-xdist), one per core of the smallest machine it must pass on: each runs its
# tests on one thread (tests/conftest.py), and an idle one takes tests from the other's queue
# (worksteal). TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .ruff_cache
