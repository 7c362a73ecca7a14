// Test only: from inside a real extension host, list the language model tools (the list agent
// mode picks from) and call rag-lsp's as agent mode does, through vscode.lm.invokeTool. The
// report goes to the file named by RAG_LSP_E2E_PROBE, for the scenario to check; the query is
// RAG_LSP_E2E_QUERY (a palette command takes no arguments).
const vscode = require("vscode");
const fs = require("fs");

async function invoke(name, input) {
  try {
    const result = await vscode.lm.invokeTool(name, { input, toolInvocationToken: undefined });
    return result.content.map((part) => part.value ?? "").join("");
  } catch (err) {
    return `threw: ${err && err.message}`;
  }
}

exports.activate = (context) => {
  context.subscriptions.push(vscode.commands.registerCommand("ragLspE2e.probeTools", async () => {
    const query = process.env.RAG_LSP_E2E_QUERY;
    const report = {
      version: vscode.version,
      tools: vscode.lm.tools.map((tool) => ({ name: tool.name, properties: Object.keys(tool.inputSchema?.properties ?? {}) })),
      search: await invoke("rag-lsp_searchCode", { query, snippet_lines: 3 }),
      badArgument: await invoke("rag-lsp_searchCode", { query, top_k: 0 }),
      context: await invoke("rag-lsp_getContext", { query, token_budget: 1000 }),
    };
    fs.writeFileSync(process.env.RAG_LSP_E2E_PROBE, JSON.stringify(report, null, 2));
  }));
};
