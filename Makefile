# Two entry points for a fresh machine:
#   make demo   - set up, install the model (offline), index a workspace and search it
#   make test   - set up, install the model and the tools (neovim, chromium, strace, code-server's
#                 build tools), run every test (the last one in a real VS Code: make client-e2e)
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
ROOT ?= .
QUERY ?= where is the index checked for a different embedding model?

.PHONY: setup model tools demo test lint client-test client-e2e client-package bench clean

$(BIN)/rag-lsp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[test]'
	touch $@

setup: $(BIN)/rag-lsp model

model: $(BIN)/rag-lsp
	$(BIN)/rag-lsp model install

# System packages the tests need: Neovim (a real LSP client, tests/test_neovim_client.py),
# Chromium (drives a real VS Code, vscode-client/e2e), strace (proof that the server opens no
# internet socket, tests/test_no_network.py), and what code-server's native modules are built
# with (vscode-client/e2e/install-code-server.mjs), Debian's rg included. apt runs only when one
# of them is missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || ! command -v sudo >/dev/null || echo sudo)
APT_TOOLS := neovim chromium strace build-essential pkg-config python3 libx11-dev libxkbfile-dev \
  libsecret-1-dev libkrb5-dev ripgrep
tools:
	command -v nvim >/dev/null && command -v chromium >/dev/null && command -v strace >/dev/null \
	  && command -v g++ >/dev/null && command -v make >/dev/null && command -v rg >/dev/null \
	  && command -v pkg-config >/dev/null && pkg-config --exists x11 xkbfile libsecret-1 krb5-gssapi || { \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q $(APT_TOOLS); }

# The VS Code client: dependencies exactly as locked, then typecheck + unit + browser tests.
CLIENT := vscode-client
$(CLIENT)/node_modules/.package-lock.json: $(CLIENT)/package-lock.json
	cd $(CLIENT) && npm ci --no-audit --no-fund

client-test: $(CLIENT)/node_modules/.package-lock.json tools setup
	cd $(CLIENT) && npm test && npm run smoke
	$(MAKE) client-e2e

# A real VS Code: the packaged extension in code-server (installed once from the npm registry
# into ~/.cache/rag-lsp/, its native modules built with the tools above), driven in headless
# Chromium against .venv's server. Screenshots and logs: vscode-client/test-results/e2e/.
client-e2e: $(CLIENT)/node_modules/.package-lock.json tools setup
	cd $(CLIENT) && npm run package && node e2e/install-code-server.mjs && node e2e/scenario.mjs

client-package: $(CLIENT)/node_modules/.package-lock.json
	cd $(CLIENT) && npm run package

demo: setup
	$(BIN)/rag-lsp index $(ROOT)
	$(BIN)/rag-lsp search --root $(ROOT) "$(QUERY)"

lint: $(BIN)/rag-lsp
	$(BIN)/ruff check .

test: setup tools lint
	$(BIN)/pytest
	$(MAKE) client-test

clean:
	rm -rf $(VENV) .rag-lsp models/all-MiniLM-L6-v2 $(CLIENT)/node_modules $(CLIENT)/dist
