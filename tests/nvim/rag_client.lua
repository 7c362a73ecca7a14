-- Drives rag-lsp from Neovim 0.7's built-in LSP client, headless.
--
--   nvim --headless --clean -u NONE -c "luafile tests/nvim/rag_client.lua"
--
-- Parameters (environment):
--   RAG_SERVER_CMD     JSON array: the server command, e.g. ["/repo/.venv/bin/rag-lsp", "serve"]
--   RAG_ROOT           workspace folder (absolute)
--   RAG_OUT            where to write the JSON report
--   RAG_SETTINGS       JSON object: initializationOptions, also served as settings.ragLsp
--   RAG_QUERY          natural-language query for a file that exists at start-up
--   RAG_EXPECT_PATH    path (relative to RAG_ROOT) the first result must have
--   RAG_NEW_PATH       file (relative to RAG_ROOT) this script writes once the index is ready
--   RAG_NEW_BODY       its contents
--   RAG_NEW_QUERY      query that should find it
--   RAG_READY_TIMEOUT_MS  (default 90000)  wait for rag/indexStatus state == "ready"
--   RAG_WATCH_TIMEOUT_MS  (default 10000)  wait for the new file to become searchable
--   RAG_POLL_MS           (default 200)    interval between searches while waiting
--   RAG_TOTAL_TIMEOUT_MS  (default 110000) hard limit for the whole run
--   RAG_LSP_LOG_LEVEL     (default "debug") vim.lsp log level; the log is stdpath('cache')/lsp.log
--
-- Exit code: 0 when every step passed, 1 when a step failed, 2 on a script error,
-- 3 when the hard timeout fired. The report is written in every case.

local uv = vim.loop
local t0 = uv.hrtime()

local function now_ms()
  return math.floor((uv.hrtime() - t0) / 1e6)
end

local function env(name, default)
  local value = os.getenv(name)
  if value == nil or value == "" then
    return default
  end
  return value
end

local function env_num(name, default)
  return tonumber(env(name, "")) or default
end

local report = {
  ok = false,
  nvim = vim.version(),
  steps = {},
  notifications = {}, -- every rag/indexStatus, in order
  messages = {}, -- window/showMessage and window/logMessage
  server_requests = {}, -- requests the server sent us (method + time)
  errors = {}, -- client-side errors reported by vim.lsp (on_error)
  failure = nil,
}

local out_path = env("RAG_OUT", nil)
local exited = false

local function encode(value)
  local ok, text = pcall(vim.json.encode, value)
  if ok then
    return text
  end
  return vim.json.encode({ ok = false, failure = "could not encode report: " .. tostring(text) })
end

local function write_report()
  if not out_path then
    io.stderr:write(encode(report) .. "\n")
    return
  end
  local handle = io.open(out_path, "w")
  if handle then
    handle:write(encode(report))
    handle:close()
  end
end

local function finish(code)
  if exited then
    return
  end
  exited = true
  report.total_ms = now_ms()
  write_report()
  if code == 0 then
    vim.cmd("qall!")
  else
    vim.cmd("cquit " .. code)
  end
end

-- Hard timeout: a libuv timer fires even while vim.wait() is blocking the script.
-- It runs in a fast callback, so only plain Lua and libuv here (no vim.fn / vim.cmd).
local total_timeout = env_num("RAG_TOTAL_TIMEOUT_MS", 110000)
local watchdog = uv.new_timer()
watchdog:start(total_timeout, 0, function()
  if exited then
    return
  end
  exited = true
  report.ok = false
  report.failure = report.failure or string.format("hard timeout after %d ms", total_timeout)
  report.total_ms = now_ms()
  write_report()
  os.exit(3)
end)

local Failure = {}

local function fail(message)
  error(setmetatable({ message = message }, Failure), 0)
end

local function step(name, data)
  data = data or {}
  data.name = name
  data.t_ms = now_ms()
  table.insert(report.steps, data)
  return data
end

local function remaining_ms()
  return total_timeout - now_ms() - 1000
end

-- vim.wait, never past the hard limit. Returns true when cond() became true.
local function wait_for(timeout_ms, cond, interval)
  local budget = math.max(0, math.min(timeout_ms, remaining_ms()))
  return vim.wait(budget, cond, interval or 20) == true
end

local function decode_env(name)
  local text = env(name, nil)
  if text == nil then
    fail(name .. " is not set")
  end
  local ok, value = pcall(vim.json.decode, text)
  if not ok then
    fail(name .. " is not valid JSON: " .. tostring(value))
  end
  return value
end

local function summarize_results(result)
  local rows = {}
  for i, item in ipairs((type(result) == "table" and result.results) or {}) do
    if i > 5 then
      break
    end
    local range = type(item.range) == "table" and item.range or {}
    table.insert(rows, {
      path = item.path,
      uri = item.uri,
      score = item.score,
      kind = item.kind,
      symbol = item.symbol,
      language = item.language,
      start_line = range.start and range.start.line or nil,
      end_line = range["end"] and range["end"].line or nil,
      has_snippet = type(item.snippet) == "string" and #item.snippet > 0,
      n_ranges = type(item.ranges) == "table" and #item.ranges or nil,
    })
  end
  return rows
end

local function main()
  local cmd = decode_env("RAG_SERVER_CMD")
  local root = env("RAG_ROOT", nil) or fail("RAG_ROOT is not set")
  root = vim.fn.fnamemodify(root, ":p"):gsub("/$", "")
  local settings = decode_env("RAG_SETTINGS")
  if next(settings) == nil then
    settings = vim.empty_dict() -- an empty object, not []
  end
  local query = env("RAG_QUERY", nil) or fail("RAG_QUERY is not set")
  local expect_path = env("RAG_EXPECT_PATH", nil) or fail("RAG_EXPECT_PATH is not set")
  local new_path = env("RAG_NEW_PATH", nil)
  local new_body = env("RAG_NEW_BODY", "")
  local new_query = env("RAG_NEW_QUERY", nil)
  local ready_timeout = env_num("RAG_READY_TIMEOUT_MS", 90000)
  local watch_timeout = env_num("RAG_WATCH_TIMEOUT_MS", 10000)
  local poll_ms = env_num("RAG_POLL_MS", 200)

  vim.lsp.set_log_level(env("RAG_LSP_LOG_LEVEL", "debug"))
  report.lsp_log = vim.lsp.get_log_path()
  report.root = root
  report.cmd = cmd

  local state = { status = nil, exit = nil, init_result = nil }

  local handlers = {
    ["rag/indexStatus"] = function(_, params, _)
      params = params or {}
      table.insert(report.notifications, {
        t_ms = now_ms(),
        state = params.state,
        files = params.files,
        chunks = params.chunks,
        message = params.message,
        folders = params.folders,
      })
      state.status = params
    end,
    ["window/showMessage"] = function(_, params, _)
      table.insert(report.messages, { t_ms = now_ms(), kind = "show", params = params })
    end,
    ["window/logMessage"] = function(_, params, _)
      table.insert(report.messages, { t_ms = now_ms(), kind = "log", params = params })
    end,
  }
  -- Record the server->client requests Neovim answers with its default handlers.
  for _, method in ipairs({
    "window/workDoneProgress/create",
    "workspace/configuration",
    "client/registerCapability",
    "workspace/workspaceFolders",
  }) do
    local default = vim.lsp.handlers[method]
    handlers[method] = function(err, params, ctx, config)
      local entry = { t_ms = now_ms(), method = method, params = params }
      table.insert(report.server_requests, entry)
      local result, rerr = default(err, params, ctx, config)
      entry.answer = result
      entry.answer_error = rerr
      return result, rerr
    end
  end
  local progress_default = vim.lsp.handlers["$/progress"]
  report.progress = {}
  handlers["$/progress"] = function(err, params, ctx, config)
    local value = params and params.value or {}
    table.insert(report.progress, {
      t_ms = now_ms(),
      token = params and params.token,
      kind = type(value) == "table" and value.kind or nil,
      title = type(value) == "table" and value.title or nil,
      message = type(value) == "table" and value.message or nil,
    })
    return progress_default(err, params, ctx, config)
  end

  local s = step("start")
  local client_id = vim.lsp.start_client({
    name = "rag-lsp",
    cmd = cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ":t") } },
    init_options = settings,
    settings = { ragLsp = settings },
    handlers = handlers,
    on_init = function(_, result)
      state.init_result = result
    end,
    on_error = function(code, err)
      table.insert(report.errors, {
        t_ms = now_ms(),
        code = vim.lsp.client_errors[code] or code,
        err = vim.inspect(err),
      })
    end,
    on_exit = function(code, signal)
      state.exit = { code = code, signal = signal, t_ms = now_ms() }
    end,
    flags = { exit_timeout = 2000 },
  })
  if not client_id then
    fail("vim.lsp.start_client returned nil (could not spawn " .. vim.inspect(cmd) .. ")")
  end
  s.client_id = client_id

  -- initialize / initialized
  s = step("initialize")
  local inited = wait_for(30000, function()
    return state.init_result ~= nil or state.exit ~= nil
  end)
  s.t_done_ms = now_ms()
  if not inited or state.init_result == nil then
    s.exit = state.exit
    fail("no initialize result" .. (state.exit and " (server exited)" or " within 30 s"))
  end
  local init = state.init_result
  s.server_info = init.serverInfo
  s.capabilities = init.capabilities
  local client = vim.lsp.get_client_by_id(client_id)
  if not client then
    fail("initialized, but vim.lsp.get_client_by_id returned nil")
  end

  -- background indexing until rag/indexStatus says ready
  s = step("wait_ready", { timeout_ms = ready_timeout })
  -- "starting" and "indexing" are transient; the others are where indexing ends up.
  local settled = { ready = true, degraded = true, error = true, disabled = true }
  local ready = wait_for(ready_timeout, function()
    return state.exit ~= nil or (state.status ~= nil and settled[state.status.state] == true)
  end, 50)
  s.t_done_ms = now_ms()
  s.last_status = state.status
  if not ready then
    fail(string.format("no rag/indexStatus state \"ready\" within %d ms", ready_timeout))
  end
  if state.exit then
    fail("server exited while indexing")
  end
  if state.status.state ~= "ready" then
    fail("index state is " .. tostring(state.status.state) .. ": " .. tostring(state.status.message))
  end
  s.files = state.status.files
  s.chunks = state.status.chunks

  local function search(params, timeout_ms)
    local response
    local sent = uv.hrtime()
    local ok = client.request("rag/search", params, function(err, result)
      response = { err = err, result = result }
    end)
    if not ok then
      return { err = "client.request returned false (client stopped)" }
    end
    if not wait_for(timeout_ms or 10000, function()
      return response ~= nil
    end, 10) then
      return { err = "no response within " .. tostring(timeout_ms or 10000) .. " ms" }
    end
    response.rtt_ms = (uv.hrtime() - sent) / 1e6
    return response
  end

  -- A query for a file that was there at start-up.
  s = step("search", { query = query, expect_path = expect_path })
  local response = search({ query = query, topK = 5 })
  s.rtt_ms = response.rtt_ms
  if response.err then
    s.err = vim.inspect(response.err)
    fail("rag/search failed: " .. s.err)
  end
  local result = response.result
  if type(result) ~= "table" or type(result.results) ~= "table" then
    s.result = result
    fail("rag/search result has no results array")
  end
  s.took_ms = result.tookMs
  s.mode = result.mode
  s.partial = result.partial
  s.results = summarize_results(result)
  local first = result.results[1]
  if first == nil then
    fail("rag/search returned no results")
  end
  s.first_uri_fname = first.uri and vim.uri_to_fname(first.uri) or nil
  if first.path ~= expect_path then
    fail(string.format("first result is %s, expected %s", tostring(first.path), expect_path))
  end

  -- A file written on disk becomes searchable (the server's own watcher).
  if new_path and new_query then
    s = step("watch", { path = new_path, query = new_query, timeout_ms = watch_timeout })
    local full = root .. "/" .. new_path
    vim.fn.mkdir(vim.fn.fnamemodify(full, ":h"), "p")
    local handle = assert(io.open(full, "w"))
    handle:write(new_body)
    handle:close()
    local written = uv.hrtime()
    local polls, found, last = 0, nil, nil
    local deadline = now_ms() + watch_timeout
    while now_ms() < deadline and remaining_ms() > 0 do
      polls = polls + 1
      local r = search({ query = new_query, topK = 5 }, 5000)
      last = r
      if not r.err and type(r.result) == "table" and type(r.result.results) == "table" then
        for rank, item in ipairs(r.result.results) do
          if item.path == new_path then
            found = { rank = rank, item = item, results = summarize_results(r.result) }
            break
          end
        end
      end
      if found then
        break
      end
      -- 200 ms between polls, while still serving notifications
      wait_for(poll_ms, function()
        return state.exit ~= nil
      end, 20)
      if state.exit then
        break
      end
    end
    s.polls = polls
    s.t_done_ms = now_ms()
    if not found then
      s.last_err = last and last.err and vim.inspect(last.err) or nil
      s.last_results = last and summarize_results(last.result) or nil
      fail(string.format("%s did not become searchable within %d ms", new_path, watch_timeout))
    end
    s.elapsed_ms = (uv.hrtime() - written) / 1e6
    s.rank = found.rank
    s.results = found.results
  end

  -- shutdown + exit (Neovim sends both from client.stop()).
  s = step("shutdown")
  client.stop()
  local stopped = wait_for(10000, function()
    return state.exit ~= nil
  end, 20)
  s.t_done_ms = now_ms()
  s.exit = state.exit
  if not stopped then
    client.stop(true)
    fail("server did not exit within 10 s of shutdown/exit")
  end
  if state.exit.code ~= 0 then
    fail(string.format("server exited with code %s signal %s", state.exit.code, state.exit.signal))
  end
end

local ok, err = xpcall(main, function(e)
  if getmetatable(e) == Failure then
    return e
  end
  return { message = tostring(e), traceback = debug.traceback(nil, 2) }
end)
if ok then
  report.ok = true
  finish(0)
else
  report.failure = err.message
  report.traceback = err.traceback
  -- never leave the server running
  for _, c in ipairs(vim.lsp.get_active_clients()) do
    pcall(c.stop, true)
  end
  finish(err.traceback and 2 or 1)
end
