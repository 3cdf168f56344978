// MCP: the endpoint MCP hosts connect to (and how), its tools, and the MCP servers agents may use.

import { api } from "../api.js";
import { h, notice, pageHeader } from "../dom.js";

function hostConfig(url) {
  // Claude Desktop, Cursor and other hosts read this shape; stdio hosts launch the command instead.
  const http = { mcpServers: { groundwork: { url, headers: { Authorization: "Bearer <your API key>" } } } };
  const stdio = {
    mcpServers: {
      groundwork: { command: "groundwork", args: ["mcp", "serve", "--stdio"], env: { GROUNDWORK_API_KEY: "<your API key>" } },
    },
  };
  return [JSON.stringify(http, null, 2), JSON.stringify(stdio, null, 2)];
}

function toolTable(id, tools) {
  if (!tools.length) return h("p", { class: "empty" }, "No tools.");
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Tool"), h("th", { scope: "col" }, "Description"))),
      h("tbody", {}, tools.map((t) => h("tr", {}, h("th", { scope: "row" }, h("code", {}, t.name)), h("td", {}, t.description)))),
    ),
  );
}

export async function render(root) {
  const info = await api("/v1/mcp");
  root.append(pageHeader("MCP"));
  const server = h("section", { "aria-labelledby": "mcp-endpoint" }, h("h2", { id: "mcp-endpoint" }, "This platform as an MCP server"));
  if (info.endpoint) {
    const url = new URL(info.endpoint, location.origin).href;
    const [http, stdio] = hostConfig(url);
    server.append(
      h("p", {}, "Streamable HTTP endpoint: ", h("code", { id: "mcp-url" }, url), ". Send an API key as for the REST API; it sees only its tenant."),
      h("p", {}, "A host that speaks HTTP:"),
      h("pre", {}, h("code", {}, http)),
      h("p", {}, "A host that launches a command (stdio):"),
      h("pre", {}, h("code", {}, stdio)),
      toolTable("mcp-tools", info.tools),
    );
  } else {
    server.append(notice("info", "The MCP server is switched off (mcp.server_enabled)."));
  }
  const servers = h("section", { "aria-labelledby": "mcp-servers" }, h("h2", { id: "mcp-servers" }, "MCP servers agents may use"));
  if (!info.servers.length) {
    servers.append(h("p", { class: "empty" }, "None configured (settings mcp.servers; GROUNDWORK_MCP__SERVERS)."));
  }
  for (const s of info.servers) {
    servers.append(
      h("h3", {}, h("code", {}, s.name), ` (${s.transport})`),
      s.error ? notice("error", s.error) : toolTable(`mcp-server-${s.name}`, s.tools),
    );
  }
  root.append(server, servers);
}
