// Connectors: a collection's sources (web, git, folder), their schedule, "sync now" and history.

import { api, listCollections } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader } from "../dom.js";

const EXAMPLES = {
  web: '{"start_url": "https://docs.example.org/", "max_depth": 2, "max_pages": 100}',
  git: '{"url": "https://git.example.org/team/handbook.git", "branch": "main", "include": ["docs/**"]}',
  folder: '{"path": "/mnt/share/policies"}',
};

export async function render(root) {
  const collections = await listCollections();
  const picker = h("select", { id: "connector-collection", onchange: () => load() },
    collections.map((c) => h("option", { value: c.name }, c.name)));
  const list = h("section", { "aria-label": "Connectors" });
  const history = h("section", { "aria-label": "Sync history" });
  const kind = h("select", { id: "connector-kind", onchange: () => { config.placeholder = EXAMPLES[kind.value]; } },
    Object.keys(EXAMPLES).map((k) => h("option", { value: k }, k)));
  const name = h("input", { id: "connector-name", required: true, placeholder: "name" });
  const config = h("textarea", { id: "connector-config", rows: 3, cols: 60, placeholder: EXAMPLES.web });
  const every = h("input", { id: "connector-every", type: "number", min: 0, placeholder: "seconds (empty: manual)" });
  const status = h("div", { role: "status" });

  async function create(event) {
    event.preventDefault();
    try {
      const body = { name: name.value, kind: kind.value, config: JSON.parse(config.value || "{}"),
        interval_s: every.value ? Number(every.value) : null };
      await api(`/v1/collections/${encodeURIComponent(picker.value)}/connectors`, { method: "POST", json: body });
      clear(status, notice("ok", `Connector ${body.name} added.`));
      load();
    } catch (err) {
      clear(status, notice("error", errorText(err)));
    }
  }

  async function showHistory(connector) {
    const syncs = await api(`/v1/connectors/${connector.id}/syncs`);
    clear(history, h("h2", {}, `History of ${connector.name}`), h("table", { id: "sync-table" },
      h("thead", {}, h("tr", {}, ["Started", "Trigger", "Status", "Added", "Changed", "Removed", "Unchanged", "Failed", "Duration", "Error"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, syncs.map((s) => h("tr", {},
        h("td", {}, fmt.time(s.started_at || s.created_at)), h("td", {}, s.trigger), h("td", {}, badge(s.status)),
        ["added", "changed", "removed", "unchanged", "failed"].map((k) => h("td", {}, s[k])),
        h("td", {}, fmt.duration(s.duration_s)), h("td", {}, s.error || ""))))));
  }

  async function syncNow(connector) {
    try {
      await api(`/v1/connectors/${connector.id}/sync`, { method: "POST" });
      clear(status, notice("ok", `Sync of ${connector.name} queued.`));
    } catch (err) {
      clear(status, notice("error", errorText(err)));
    }
    showHistory(connector);
  }

  async function load() {
    if (!picker.value) return clear(list, notice("info", "Create a collection first."));
    let rows;
    try {
      rows = await api(`/v1/collections/${encodeURIComponent(picker.value)}/connectors`);
    } catch (err) {
      return clear(list, notice("error", errorText(err)));
    }
    clear(list, rows.length ? h("table", { id: "connectors-table" },
      h("thead", {}, h("tr", {}, ["Name", "Kind", "Every", "Last sync", "Next sync", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((c) => h("tr", {},
        h("td", {}, c.name), h("td", {}, c.kind), h("td", {}, c.interval_s ? fmt.duration(c.interval_s) : "manual"),
        h("td", {}, c.last_sync ? badge(c.last_sync.status) : "never"), h("td", {}, fmt.time(c.next_sync_at)),
        h("td", {}, h("button", { type: "button", onclick: () => syncNow(c) }, "Sync now"), " ",
          h("button", { type: "button", onclick: () => showHistory(c) }, "History"))))))
      : notice("info", "No connector yet."));
  }

  root.append(
    pageHeader("Connectors"),
    h("p", {}, h("label", { for: "connector-collection" }, "Collection "), picker),
    list,
    h("form", { onsubmit: create, "aria-label": "Add a connector" }, h("h2", {}, "Add a connector"),
      h("p", {}, kind, " ", name), h("p", {}, config), h("p", {}, every, " ", h("button", { type: "submit", class: "primary" }, "Add"))),
    status,
    history,
  );
  load();
}
