# Two commands on a fresh clone:  `make demo`  and  `make test`.
# Both create (or update) the virtualenv in .venv first: the demo the core package only, the tests the dev extra too.
#
# torch is installed only if the venv has none, so a build you chose stays. Pick another with
#   make demo TORCH="torch --index-url https://download.pytorch.org/whl/cu124"
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PY      = $(VENV)/bin/python

.PHONY: demo test test-busy lint typecheck venv dev clean

venv: $(VENV)/.installed
dev: $(VENV)/.installed-dev

# `sync` at the end: an install leaves up to a GB of files to write back (about 0.9 GB measured here),
# which on a small machine would run beside the first timed runs (the demo's, the tests' planted
# loops); it finishes before them.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e .
	sync
	touch $@

# the test tools and the frameworks the tests run (pyproject.toml's dev extra)
$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev]'
	sync
	touch $@

demo: venv
	$(VENV)/bin/trainspeed demo

test: dev
	$(PY) -m pytest

# The planted examples' tests beside two busy processes on the same cores, each planted verdict held first as alone
# where the busy processes are scheduling groups apart from the session (measured and said at the start and the end:
# tests/diagnose/busy_processes.py); a miss is measured once more and listed at the end (tests/conftest.py).
# .ci/run runs it after `make test`.
test-busy: dev
	$(PY) -m pytest -m planted --busy 2 tests

# A contributor's loop: ruff (the rule set in pyproject.toml) and mypy on src/; .ci/run runs both before the tests.
lint: dev
	$(VENV)/bin/ruff check src tests benchmarks examples

typecheck: dev
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
