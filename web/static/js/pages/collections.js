// Collections: list with counts, create, edit, delete (with confirmation).

import { api, listCollections } from "../api.js";
import { announce, clear, confirmDialog, errorText, h, notice, pageHeader } from "../dom.js";

function chunkingFields(prefix, chunking = {}) {
  const id = (n) => `${prefix}-${n}`;
  const strategy = chunking.strategy ?? "fixed";
  return h(
    "fieldset",
    { class: "grid" },
    h("legend", {}, "Chunking"),
    h(
      "div",
      { class: "field" },
      h("label", { for: id("strategy") }, "Strategy"),
      h(
        "select",
        { id: id("strategy"), name: "strategy" },
        ["fixed", "recursive", "semantic"].map((s) => h("option", { value: s, selected: s === strategy }, s)),
      ),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: id("size") }, "Chunk size (tokens)"),
      h("input", { id: id("size"), name: "chunk_size", type: "number", min: 8, max: 8192, value: String(chunking.chunk_size ?? 256) }),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: id("overlap") }, "Overlap (tokens)"),
      h("input", { id: id("overlap"), name: "chunk_overlap", type: "number", min: 0, value: String(chunking.chunk_overlap ?? 32) }),
    ),
  );
}

function chunkingFrom(form) {
  return {
    strategy: form.elements.strategy.value,
    chunk_size: Number(form.elements.chunk_size.value),
    chunk_overlap: Number(form.elements.chunk_overlap.value),
  };
}

async function createForm(onCreated) {
  const models = await api("/v1/embedding-models");
  const status = h("div", { class: "form-status" });
  const form = h(
    "form",
    { class: "card", "aria-labelledby": "create-title" },
    h("h2", { id: "create-title" }, "New collection"),
    h(
      "div",
      { class: "grid" },
      h("div", { class: "field" }, h("label", { for: "c-name" }, "Name"), h("input", { id: "c-name", name: "name", required: true, maxlength: 200 })),
      h("div", { class: "field" }, h("label", { for: "c-desc" }, "Description"), h("input", { id: "c-desc", name: "description" })),
      h(
        "div",
        { class: "field" },
        h("label", { for: "c-model" }, "Embedding model"),
        h("select", { id: "c-model", name: "embedding_model" }, models.map((m) => h("option", { value: m.name, selected: m.default, title: m.description }, m.name))),
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "c-dim" }, "Index dimension"),
        h("input", { id: "c-dim", name: "index_dim", type: "number", min: 1, placeholder: "default" }),
      ),
    ),
    chunkingFields("c"),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Create collection")),
    status,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = form.elements;
    const body = {
      name: f.name.value.trim(),
      description: f.description.value,
      embedding_model: f.embedding_model.value,
      chunking: chunkingFrom(form),
    };
    if (f.index_dim.value) body.index_dim = Number(f.index_dim.value);
    try {
      const created = await api("/v1/collections", { method: "POST", json: body });
      form.reset();
      clear(status, notice("ok", `Created “${created.name}”.`));
      onCreated();
    } catch (err) {
      clear(status, notice("error", errorText(err)));
    }
  });
  return form;
}

function editDialog(collection, onSaved) {
  const status = h("div", { class: "form-status" });
  const form = h(
    "form",
    { method: "dialog" },
    h("h2", { id: "edit-title" }, `Edit “${collection.name}”`),
    h("div", { class: "field" }, h("label", { for: "e-desc" }, "Description"), h("input", { id: "e-desc", name: "description", value: collection.description })),
    h(
      "div",
      { class: "field" },
      h("label", { for: "e-dim" }, "Index dimension"),
      h("input", { id: "e-dim", name: "index_dim", type: "number", min: 1, max: collection.embedding_dim, value: String(collection.index_dim) }),
      h("small", {}, "Changing it rebuilds the index from stored vectors."),
    ),
    chunkingFields("e", collection.chunking),
    h("small", {}, "Chunking applies to documents ingested from now on."),
    status,
    h("div", { class: "actions" }, h("button", { value: "cancel", class: "secondary", formnovalidate: true }, "Cancel"), h("button", { value: "save", class: "primary" }, "Save")),
  );
  const dialog = h("dialog", { "aria-labelledby": "edit-title" }, form);
  form.addEventListener("submit", async (e) => {
    if (e.submitter?.value !== "save") return;
    e.preventDefault();
    const body = { description: form.elements.description.value, chunking: chunkingFrom(form) };
    const dim = Number(form.elements.index_dim.value);
    if (dim && dim !== collection.index_dim) body.index_dim = dim;
    try {
      await api(`/v1/collections/${collection.id}`, { method: "PATCH", json: body });
      dialog.close();
      onSaved();
    } catch (err) {
      clear(status, notice("error", errorText(err)));
    }
  });
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}

function table(collections, refresh) {
  if (!collections.length) return h("p", { class: "empty" }, "No collections yet. Create one below.");
  const rows = collections.map((c) =>
    h(
      "tr",
      { dataset: { name: c.name } },
      h("th", { scope: "row" }, h("a", { href: `#/documents?collection=${c.id}` }, c.name), c.description ? h("div", { class: "muted" }, c.description) : null),
      h("td", { class: "num" }, c.document_count),
      h("td", { class: "num" }, c.chunk_count),
      h("td", {}, c.embedding_model, h("div", { class: "muted" }, `${c.index_dim} of ${c.embedding_dim} dims indexed`)),
      h("td", {}, `${c.chunking.strategy ?? "fixed"}, ${c.chunking.chunk_size ?? "?"} tokens`),
      h(
        "td",
        { class: "row-actions" },
        h("a", { href: `#/upload?collection=${c.id}` }, "Upload"),
        h("a", { href: `#/search?collection=${c.id}` }, "Search"),
        h("button", { type: "button", class: "link", onclick: () => editDialog(c, refresh) }, "Edit"),
        h(
          "button",
          {
            type: "button",
            class: "link danger",
            onclick: async () => {
              const ok = await confirmDialog(
                `Delete “${c.name}”?`,
                `Its ${c.document_count} documents and ${c.chunk_count} chunks are deleted for good.`,
                "Delete collection",
              );
              if (!ok) return;
              let outcome = ["ok", `Collection “${c.name}” deleted.`];
              await api(`/v1/collections/${c.id}`, { method: "DELETE" }).catch((err) => (outcome = ["error", errorText(err)]));
              await refresh();
              announce(document.getElementById("collections-status"), ...outcome);
            },
          },
          "Delete",
        ),
      ),
    ),
  );
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "collections-table" },
      h("thead", {}, h("tr", {}, ["Name", "Documents", "Chunks", "Embedding", "Chunking", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows),
    ),
  );
}

export async function render(root) {
  const list = h("section", { "aria-label": "Collections" });
  const refresh = async () => {
    try {
      clear(list, table(await listCollections(), refresh));
    } catch (err) {
      clear(list, notice("error", errorText(err)));
    }
  };
  await refresh();
  root.append(pageHeader("Collections"), h("div", { id: "collections-status", "aria-live": "polite" }), list, await createForm(refresh));
}
