# Two entry points for a fresh machine:
#   make demo   - set up, install the model (offline), index a workspace and search it
#   make test   - set up, install the model and the tools (neovim), run every test
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
ROOT ?= .
QUERY ?= where is the index checked for a different embedding model?

.PHONY: setup model tools demo test lint bench clean

$(BIN)/rag-lsp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[test]'
	touch $@

setup: $(BIN)/rag-lsp model

model: $(BIN)/rag-lsp
	$(BIN)/rag-lsp model install

# System packages the tests need (Neovim, for tests/test_neovim_client.py).
SUDO := $(shell [ "$$(id -u)" = 0 ] || ! command -v sudo >/dev/null || echo sudo)
tools:
	command -v nvim >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q neovim; }

demo: setup
	$(BIN)/rag-lsp index $(ROOT)
	$(BIN)/rag-lsp search --root $(ROOT) "$(QUERY)"

lint: $(BIN)/rag-lsp
	$(BIN)/ruff check .

test: setup tools lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .rag-lsp models/all-MiniLM-L6-v2
