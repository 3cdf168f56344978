// Agent runs and evaluation runs: listed from their resources once the API offers them; until then
// (404) the page says so.

import { api } from "../api.js";
import { fmt, h, notice, pageHeader } from "../dom.js";

const KINDS = {
  agents: { title: "Agent runs", path: "/v1/agents/runs", what: "agent runs (POST /v1/agents/runs)" },
  evals: { title: "Evaluations", path: "/v1/evals", what: "evaluation runs (/v1/evals)" },
};

function rows(items) {
  const list = Array.isArray(items) ? items : (items.items ?? items.data ?? []);
  if (!list.length) return h("p", { class: "empty" }, "None yet.");
  const cols = ["id", "status", "kind", "agent", "created_at"].filter((c) => list.some((r) => c in r));
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      {},
      h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col" }, c.replace("_at", ""))))),
      h("tbody", {}, list.map((r) => h("tr", {}, cols.map((c) => h("td", {}, c.endsWith("_at") ? fmt.time(r[c]) : String(r[c] ?? "")))))),
    ),
  );
}

export async function render(root, ctx) {
  const kind = KINDS[ctx.page];
  root.append(pageHeader(kind.title));
  try {
    root.append(rows(await api(kind.path)));
  } catch (err) {
    if (err.status === 404 || err.status === 405) {
      root.append(h("div", { class: "card unavailable" }, h("h2", {}, "Not available yet"), h("p", {}, `This platform's API does not offer ${kind.what} yet. The page fills in once it does.`)));
    } else {
      root.append(notice("error", err.message));
    }
  }
}
