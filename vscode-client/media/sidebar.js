// The search sidebar page. Plain browser JS (no build step). It only renders and posts
// `{type, ...}` messages (src/messages.ts); the extension talks to the server.
(function () {
  "use strict";

  const vscode = acquireVsCodeApi();
  const DEBOUNCE_MS = 250;
  const MIN_CHARS = 2;
  const SNIPPET_LINES = 12;

  const form = document.getElementById("search-form");
  const input = document.getElementById("query");
  const statusLine = document.getElementById("status");
  const rebuildButton = document.getElementById("rebuild");
  const notices = document.getElementById("notices");
  const summary = document.getElementById("summary");
  const list = document.getElementById("results");

  // What survives hide/show: the query, the last answer (or error) and the last status.
  let state = vscode.getState() || { query: "", results: null, error: null, status: null };
  let timer = undefined;
  let lastSent = state.results ? state.results.query : "";
  let rows = [];
  let active = -1;

  // ---- searching ---------------------------------------------------------------------------

  function send(query) {
    clearTimeout(timer);
    lastSent = query;
    list.setAttribute("aria-busy", "true");
    vscode.postMessage({ type: "search", query });
  }

  input.addEventListener("input", () => {
    const query = input.value.trim();
    save({ query: input.value });
    clearTimeout(timer);
    if (query === "") {
      lastSent = "";
      save({ results: null, error: null });
      render();
      return;
    }
    if (query.length < MIN_CHARS || query === lastSent) return;
    timer = setTimeout(() => send(query), DEBOUNCE_MS);
  });

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = input.value.trim();
    if (query) send(query);
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" && rows.length > 0) {
      event.preventDefault();
      focusRow(active >= 0 ? active : 0);
    }
  });

  rebuildButton.addEventListener("click", () => {
    vscode.postMessage({ type: "rebuild" });
    statusLine.textContent = "Rebuild requested…";
  });

  // ---- messages from the extension ---------------------------------------------------------

  window.addEventListener("message", (event) => {
    const message = event.data;
    switch (message && message.type) {
      case "searching":
        list.setAttribute("aria-busy", "true");
        return;
      case "results":
        save({ results: message, error: null });
        active = -1;
        render();
        return;
      case "error":
        save({ error: message.message });
        render();
        return;
      case "status":
        save({ status: message.status });
        renderStatus();
        return;
    }
  });

  function save(patch) {
    state = Object.assign({}, state, patch);
    vscode.setState(state);
  }

  // ---- rendering ---------------------------------------------------------------------------

  function render() {
    list.removeAttribute("aria-busy");
    renderNotices();
    renderResults();
  }

  function renderStatus() {
    const status = state.status;
    statusLine.className = "status";
    rebuildButton.disabled = Boolean(status && status.state === "disabled");
    if (!status) {
      statusLine.textContent = "Waiting for the language server…";
      return;
    }
    // Files on the line (it is narrow), chunks in the tooltip.
    const counts = `${status.files.toLocaleString()} files`;
    statusLine.title = `${status.files.toLocaleString()} files, ${status.chunks.toLocaleString()} chunks`;
    const reason = status.message ? `: ${status.message}` : "";
    switch (status.state) {
      case "starting":
        statusLine.textContent = "Starting…";
        break;
      case "indexing": {
        // `percentage` is in the rag/indexStatus schema (null when unknown).
        const percent = typeof status.percentage === "number" ? ` ${status.percentage}%` : "";
        statusLine.textContent = `Indexing${percent} · ${counts}`;
        break;
      }
      case "ready":
        statusLine.textContent = `Ready · ${counts}`;
        break;
      case "degraded":
        statusLine.className = "status warning";
        statusLine.textContent = `Lexical search only${reason}`;
        break;
      case "error":
        statusLine.className = "status error";
        statusLine.textContent = `Indexing failed${reason}`;
        break;
      case "disabled":
        statusLine.textContent = status.message || "Indexing is disabled in settings (ragLsp.enabled).";
        break;
      default:
        statusLine.textContent = status.state;
    }
  }

  function renderNotices() {
    notices.replaceChildren();
    const answer = state.results;
    if (state.error) notices.append(notice("error", state.error));
    if (!answer) return;
    if (answer.response.partial) {
      notices.append(notice("info", "Indexing is still running: results may be incomplete."));
    }
    for (const warning of answer.response.warnings) notices.append(notice("warning", warning));
  }

  function notice(kind, text) {
    const p = document.createElement("p");
    p.className = `notice ${kind}`;
    p.textContent = text;
    return p;
  }

  function renderResults() {
    list.replaceChildren();
    rows = [];
    const answer = state.results;
    if (!answer) {
      summary.textContent = "";
      return;
    }
    const { groups, response } = answer;
    if (groups.length === 0) {
      summary.className = "summary empty";
      summary.textContent = `Nothing relevant for “${answer.query}”.`;
      return;
    }
    const files = groups.length === 1 ? "1 file" : `${groups.length} files`;
    summary.className = "summary";
    summary.textContent = `${files} · ${Math.round(response.tookMs)} ms · ${response.mode}`;
    groups.forEach((group, index) => list.append(renderGroup(group, index)));
    rows = Array.from(list.querySelectorAll('[role="option"]'));
    setActive(Math.min(Math.max(active, 0), rows.length - 1));
  }

  function renderGroup(group, index) {
    const section = document.createElement("div");
    section.setAttribute("role", "group");
    section.className = "group";
    const header = document.createElement("div");
    header.className = "group-header";
    header.id = `group-${index}`;
    header.title = group.path;
    const slash = group.path.lastIndexOf("/");
    header.append(span("file", group.path.slice(slash + 1)));
    if (slash > 0) header.append(span("dir", group.path.slice(0, slash)));
    if (group.folderName) header.append(span("folder", group.folderName));
    section.setAttribute("aria-labelledby", header.id);
    section.append(header);
    group.rows.forEach((row, rowIndex) => section.append(renderRow(group, row, rowIndex === 0)));
    return section;
  }

  function renderRow(group, row, best) {
    const option = document.createElement("div");
    option.setAttribute("role", "option");
    option.className = "row";
    option.tabIndex = -1;
    const score = row.score.toPrecision(2);
    const symbol = best && group.symbol ? group.symbol : "";
    option.setAttribute("aria-label", `${group.path} ${row.label} ${symbol} score ${score}`.replace(/\s+/g, " "));
    const line = document.createElement("div");
    line.className = "row-line";
    line.append(span("range", row.label), span("symbol", symbol), span("score", score));
    option.append(line);
    if (best && group.snippet) {
      const pre = document.createElement("pre");
      pre.className = "snippet";
      pre.textContent = shortSnippet(group.snippet);
      option.append(pre);
    }
    option.addEventListener("click", () => {
      setActive(rows.indexOf(option));
      open(group.uri, row.range);
    });
    return option;
  }

  function span(className, text) {
    const el = document.createElement("span");
    el.className = className;
    el.textContent = text;
    return el;
  }

  /** The first lines of a chunk, with the indentation they share removed. */
  function shortSnippet(text) {
    let lines = text.replace(/\s+$/, "").split("\n");
    const cut = lines.length > SNIPPET_LINES;
    lines = lines.slice(0, SNIPPET_LINES);
    const indents = lines.filter((l) => l.trim()).map((l) => l.match(/^[ \t]*/)[0].length);
    const common = indents.length ? Math.min(...indents) : 0;
    return lines.map((l) => l.slice(common)).join("\n") + (cut ? "\n…" : "");
  }

  // ---- keyboard: roving focus over the result rows -----------------------------------------

  function setActive(index) {
    rows.forEach((row, i) => {
      row.tabIndex = i === index ? 0 : -1;
      row.setAttribute("aria-selected", String(i === index));
    });
    active = index;
  }

  function focusRow(index) {
    if (rows.length === 0) return;
    setActive(Math.min(Math.max(index, 0), rows.length - 1));
    rows[active].focus();
  }

  list.addEventListener("keydown", (event) => {
    const keys = {
      ArrowDown: () => focusRow(active + 1),
      ArrowUp: () => (active <= 0 ? input.focus() : focusRow(active - 1)),
      Home: () => focusRow(0),
      End: () => focusRow(rows.length - 1),
      Enter: () => rows[active] && rows[active].click(),
      " ": () => rows[active] && rows[active].click(),
      Escape: () => input.focus(),
    };
    const action = keys[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });

  list.addEventListener("focusin", (event) => {
    const index = rows.indexOf(event.target);
    if (index >= 0 && index !== active) setActive(index);
  });

  function open(uri, range) {
    vscode.postMessage({ type: "open", uri, range });
  }

  // ---- start -------------------------------------------------------------------------------

  input.value = state.query || "";
  renderStatus();
  render();
  vscode.postMessage({ type: "ready" });
})();
