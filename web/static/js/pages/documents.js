// Documents of a collection: filter by status, find by name, versions, failure reasons, delete,
// re-ingest (a failed one from its stored upload; any one by uploading a new version).

import { api } from "../api.js";
import { announce, badge, clear, collectionPicker, confirmDialog, errorText, fmt, h, notice, pageHeader } from "../dom.js";

const PAGE = 50;
const STATUSES = ["", "queued", "parsing", "chunking", "embedding", "indexed", "failed"];

export async function render(root, ctx) {
  let collection;
  let offset = 0;
  const list = h("section", { "aria-label": "Documents", "aria-live": "polite" });
  const status = h("div", { class: "form-status" });
  const picker = await collectionPicker(ctx.query.get("collection"), (c) => {
    collection = c;
    offset = 0;
    load();
  });
  collection = picker.collection;
  const statusSelect = h(
    "select",
    { id: "doc-status", onchange: () => ((offset = 0), load()) },
    STATUSES.map((s) => h("option", { value: s, selected: s === (ctx.query.get("status") ?? "") }, s || "any")),
  );
  const search = h("input", { id: "doc-q", type: "search", placeholder: "part of the name or title" });
  let debounce;
  search.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => ((offset = 0), load()), 250);
  });

  const newVersion = (doc) => {
    const input = h("input", { type: "file", class: "visually-hidden" });
    input.addEventListener("change", async () => {
      const form = new FormData();
      // Same name: the same source id, so the upload replaces this document as its next version.
      form.append("files", input.files[0], doc.source_id);
      try {
        const result = await api(`/v1/collections/${collection.id}/documents`, { method: "POST", form });
        const outcome = result.documents[0];
        clear(status, notice("ok", `${doc.source_id}: ${outcome.status}${outcome.reason ? ` (${outcome.reason})` : ""}. `), h("a", { href: `#/upload?job=${result.job_id}&collection=${collection.id}` }, "Follow the job"));
        load();
      } catch (err) {
        clear(status, notice("error", errorText(err)));
      }
    });
    input.click();
  };

  const act = async (fn, message) => {
    let outcome = ["ok", message];
    try {
      await fn();
    } catch (err) {
      outcome = ["error", errorText(err)];
    }
    await load();
    announce(status, ...outcome);
  };

  const row = (d) =>
    h(
      "tr",
      { dataset: { status: d.status, source: d.source_id } },
      h("th", { scope: "row" }, h("a", { href: `#/document/${d.id}` }, d.source_id), d.title && d.title !== d.source_id ? h("div", { class: "muted" }, d.title) : null),
      h("td", {}, badge(d.status)),
      h("td", { class: "num" }, `v${d.version}`),
      h("td", { class: "num" }, fmt.bytes(d.size_bytes)),
      h("td", {}, fmt.time(d.updated_at)),
      h("td", { class: "reason" }, d.error ?? "", d.retryable === false ? h("span", { class: "muted permanent" }, " (permanent: retrying cannot help; upload a fixed file)") : null),
      h(
        "td",
        { class: "row-actions" },
        // A permanent failure (corrupt, unsupported, empty) fails again: no Retry for it.
        d.status === "failed" && d.retryable !== false
          ? h("button", { type: "button", class: "link", onclick: () => act(() => api(`/v1/documents/${d.id}/requeue`, { method: "POST" }), `${d.source_id} queued again.`) }, "Retry")
          : null,
        h("button", { type: "button", class: "link", onclick: () => newVersion(d) }, "New version…"),
        h(
          "button",
          {
            type: "button",
            class: "link danger",
            onclick: async () => {
              if (await confirmDialog(`Delete “${d.source_id}”?`, "The document and its chunks are deleted.", "Delete document"))
                act(() => api(`/v1/documents/${d.id}`, { method: "DELETE" }), `${d.source_id} deleted.`);
            },
          },
          "Delete",
        ),
      ),
    );

  async function load() {
    if (!collection) return clear(list, h("p", { class: "empty" }, "No collection yet."));
    const params = new URLSearchParams({ limit: PAGE, offset });
    if (statusSelect.value) params.set("status", statusSelect.value);
    if (search.value.trim()) params.set("q", search.value.trim());
    try {
      const page = await api(`/v1/collections/${collection.id}/documents?${params}`);
      const last = Math.min(offset + PAGE, page.total);
      clear(
        list,
        page.items.length
          ? h(
              "div",
              { class: "table-wrap" },
              h(
                "table",
                { id: "documents-table" },
                h("thead", {}, h("tr", {}, ["Document", "Status", "Version", "Size", "Updated", "Reason", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
                h("tbody", {}, page.items.map(row)),
              ),
            )
          : h("p", { class: "empty" }, "No documents match."),
        h(
          "div",
          { class: "pager" },
          h("span", {}, page.total ? `${offset + 1}–${last} of ${page.total}` : ""),
          h("button", { type: "button", class: "secondary", disabled: offset === 0, onclick: () => ((offset -= PAGE), load()) }, "Previous"),
          h("button", { type: "button", class: "secondary", disabled: last >= page.total, onclick: () => ((offset += PAGE), load()) }, "Next"),
        ),
      );
    } catch (err) {
      clear(list, notice("error", errorText(err)));
    }
  }

  await load();
  root.append(
    pageHeader("Documents"),
    h(
      "div",
      { class: "toolbar" },
      picker.el,
      h("div", { class: "field inline" }, h("label", { for: "doc-status" }, "Status"), statusSelect),
      h("div", { class: "field inline" }, h("label", { for: "doc-q" }, "Find"), search),
    ),
    status,
    list,
  );
}
