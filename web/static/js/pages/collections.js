// Collections: list with counts, create, edit, delete (with confirmation).

import { api, listCollections } from "../api.js";
import { announce, clear, confirmDialog, errorText, h, notice, pageHeader } from "../dom.js";
import { showErrors } from "../forms.js";

const pick = (id, label, options, current, defaultLabel) =>
  h(
    "div",
    { class: "field" },
    h("label", { for: id }, label),
    h("select", { id, name: id }, h("option", { value: "" }, `server default (${defaultLabel})`), options.map(([v, t, disabled]) => h("option", { value: v, selected: v === current, disabled }, t))),
  );

/** The collection's search settings (PATCH retrieval): mode, fusion, rerank; empty = the server's.
 * Only rerankers that run here are offered: a cross-encoder without a model is skipped silently. */
function retrievalFields(stored, defaults) {
  const crossOk = defaults.rerankers.includes("cross-encoder");
  const rerank = stored.rerank?.enabled === false ? "off" : stored.rerank?.enabled ? stored.rerank.kind ?? defaults.rerank.kind : "";
  return h(
    "fieldset",
    { class: "grid", id: "e-retrieval" },
    h("legend", {}, "Search"),
    pick("e-mode", "Mode", [["hybrid", "hybrid"], ["bm25", "bm25"], ["dense", "dense"]], stored.mode, defaults.mode),
    pick("e-fusion", "Fusion", [["convex", "convex (weighted scores)"], ["rrf", "reciprocal rank (rrf)"]], stored.fusion?.method, defaults.fusion.method),
    h("div", { class: "field" }, h("label", { for: "e-alpha" }, "Dense weight (convex alpha)"), h("input", { id: "e-alpha", name: "e-alpha", type: "number", min: 0, max: 1, step: 0.05, placeholder: String(defaults.fusion.alpha), value: stored.fusion?.alpha ?? "" })),
    pick("e-rerank", "Rerank", [["off", "off"], ["llm", "LLM judge"], ["cross-encoder", crossOk ? "cross-encoder" : "cross-encoder (no model on this server)", !crossOk]], rerank, defaults.rerank.enabled ? defaults.rerank.kind : "off"),
  );
}

/** The stored retrieval with the dialog's choices applied (unset ones removed: the server's apply). */
function retrievalFrom(form, stored) {
  const out = structuredClone(stored ?? {});
  const f = form.elements;
  const set = (obj, key, value) => (value === "" || value === undefined ? delete obj[key] : (obj[key] = value));
  set(out, "mode", f["e-mode"].value);
  out.fusion = { ...(out.fusion ?? {}) };
  set(out.fusion, "method", f["e-fusion"].value);
  set(out.fusion, "alpha", f["e-alpha"].value === "" ? "" : Number(f["e-alpha"].value));
  if (!Object.keys(out.fusion).length) delete out.fusion;
  const rerank = f["e-rerank"].value;
  if (rerank === "") delete out.rerank;
  else out.rerank = rerank === "off" ? { ...(out.rerank ?? {}), enabled: false } : { ...(out.rerank ?? {}), enabled: true, kind: rerank };
  return out;
}

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
      showErrors(form, status, err, { name: f.name, "chunking.chunk_size": f.chunk_size, "chunking.chunk_overlap": f.chunk_overlap, chunking: f.chunk_overlap, index_dim: f.index_dim, embedding_model: f.embedding_model });
    }
  });
  return form;
}

async function editDialog(listed, onSaved) {
  // The stored collection, not the list's copy: the list may not have reloaded since the last save.
  const [collection, defaults] = await Promise.all([api(`/v1/collections/${listed.id}`), api("/v1/retrieval/defaults")]);
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
    retrievalFields(collection.retrieval ?? {}, defaults),
    status,
    h("div", { class: "actions" }, h("button", { value: "cancel", class: "secondary", formnovalidate: true }, "Cancel"), h("button", { value: "save", class: "primary" }, "Save")),
  );
  const dialog = h("dialog", { "aria-labelledby": "edit-title" }, form);
  form.addEventListener("submit", async (e) => {
    if (e.submitter?.value !== "save") return;
    e.preventDefault();
    const body = { description: form.elements.description.value, chunking: chunkingFrom(form), retrieval: retrievalFrom(form, collection.retrieval) };
    const dim = Number(form.elements.index_dim.value);
    if (dim && dim !== collection.index_dim) body.index_dim = dim;
    try {
      await api(`/v1/collections/${collection.id}`, { method: "PATCH", json: body });
      dialog.close();
      onSaved();
    } catch (err) {
      const f = form.elements;
      showErrors(form, status, err, { "chunking.chunk_size": f.chunk_size, "chunking.chunk_overlap": f.chunk_overlap, chunking: f.chunk_overlap, index_dim: f.index_dim, retrieval: form.querySelector("#e-retrieval") });
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
