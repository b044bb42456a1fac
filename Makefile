# Two entry points for a fresh machine: `make demo` (main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/demo

.PHONY: demo test test-slow test-properties mutants lint bench docs clean clean-cache

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,deep,minatar,ray,docs,sb3]'
	touch $@

$(VENV)/.bench: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,deep,minatar,ray,docs,sb3,bench]'
	touch $@

demo: $(VENV)/.installed
	$(PY) -m prioritylab.demo --out $(OUT)

# The default suite runs on every core, 8 at most (pytest-xdist; each worker is a process of its own, 0.6-0.9 GB
# resident here); the tests sharing a module- or session-wide fixture stay on one worker (tests/conftest.py).
# A test still running after 10 minutes fails (pytest-timeout), so a hang ends the suite within CI's limit.
test: $(VENV)/.installed
	$(PY) -m ruff check .
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir site
	$(PY) -m pytest -q -n auto --maxprocesses 8 --dist loadgroup --timeout 600

# The documentation site (mkdocs-material + mkdocstrings) into site/; `.venv/bin/mkdocs serve` to browse it.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

test-slow: $(VENV)/.installed
	$(PY) -m pytest -q -m slow

# The files with property tests (Hypothesis), at the dev profile's 2,000 examples a property (the suite: 40).
test-properties: $(VENV)/.installed
	HYPOTHESIS_PROFILE=dev $(PY) -m pytest -q -n auto --maxprocesses 8 --dist loadgroup \
		$$(grep -l -E '^(from|import) hypothesis' tests/test_*.py)

# One-line mutations of the core maths, one at a time in a temporary copy: each must fail a test.
mutants: $(VENV)/.installed
	$(PY) scripts/mutants.py

bench: $(VENV)/.bench
	$(PY) -m prioritylab bench sumtree
	$(PY) -m prioritylab bench replay

# Numba's on-disk caches, removed altogether. An edited kernel needs no clean: `import prioritylab`
# empties the cached kernels' indexes when a kernel module's source changes (prioritylab/_kernel_cache.py).
clean-cache:
	find . -path ./$(VENV) -prune -o \( -name '*.nbi' -o -name '*.nbc' \) -print | xargs rm -f

clean: clean-cache
	rm -rf $(VENV) results site
