// Start an evaluation run from the browser: upload a dataset (POST /v1/evals/datasets), choose the
// kind, collection and a sweep grid of retrieval settings, then POST /v1/evals and open the run.

import { api, listCollections } from "../api.js";
import { clear, h, notice } from "../dom.js";
import { clearErrors, fieldError, showErrors } from "../forms.js";

const FORMATS = { retrieval: ["beir"], answer: ["jsonl", "pubmedqa"] };
const SWEEP_KEYS = ["mode", "top_k", "fusion.method", "fusion.alpha", "dense.candidates", "bm25.candidates", "rerank.enabled", "neighbors"];
const MAX_VARIANTS = 64; // evals/sweep.py refuses more

/** "0.5, 0.8, rrf" -> [0.5, 0.8, "rrf"]: JSON where a value parses as JSON, text otherwise. */
function parseValues(text) {
  return text
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean)
    .map((v) => {
      try {
        return JSON.parse(v);
      } catch {
        return v;
      }
    });
}

/** A file's path inside the dataset: a folder's own name is dropped (corpus.jsonl, qrels/test.tsv);
 * a lone .tsv chosen as a file is a BEIR qrels file. */
function datasetPath(file) {
  const rel = file.webkitRelativePath || file.name;
  const inside = rel.includes("/") ? rel.split("/").slice(1).join("/") : rel;
  return !inside.includes("/") && inside.endsWith(".tsv") ? `qrels/${inside}` : inside;
}

function sweepRow(rows, onChange) {
  const i = rows.children.length;
  const key = h("input", { id: `sweep-key-${i}`, list: "sweep-keys", placeholder: "setting, e.g. fusion.alpha", class: "sweep-key", oninput: onChange });
  const values = h("input", { id: `sweep-values-${i}`, placeholder: "values, comma separated: 0.5, 0.8", class: "sweep-values", oninput: onChange });
  const row = h(
    "div",
    { class: "grid sweep-row" },
    h("div", { class: "field" }, h("label", { for: key.id }, `Setting ${i + 1}`), key),
    h("div", { class: "field" }, h("label", { for: values.id }, `Values of setting ${i + 1}`), values),
  );
  rows.append(row);
  return row;
}

export async function evalForm() {
  const collections = await listCollections();
  const name = h("input", { id: "eval-name", maxlength: 200, placeholder: "e.g. alpha sweep" });
  const kind = h("select", { id: "eval-kind" }, Object.keys(FORMATS).map((k) => h("option", { value: k }, k)));
  const format = h("select", { id: "eval-format" });
  const syncFormats = () => clear(format, FORMATS[kind.value].map((f) => h("option", { value: f }, f)));
  kind.addEventListener("change", syncFormats);
  syncFormats();
  const files = h("input", { id: "eval-files", type: "file", multiple: true });
  const folder = h("input", { id: "eval-folder", type: "file", webkitdirectory: true });
  const split = h("input", { id: "eval-split", value: "test" });
  const collection = h("select", { id: "eval-collection" }, h("option", { value: "" }, "a throwaway collection of the dataset's corpus"), collections.map((c) => h("option", { value: c.id }, c.name)));
  const keepAs = h("input", { id: "eval-keep", maxlength: 200, placeholder: "optional: keep the corpus in a new collection of this name" });
  const maxItems = h("input", { id: "eval-max", type: "number", min: 1, placeholder: "all" });
  const rows = h("div", { class: "sweep-rows" });
  const count = h("p", { class: "muted", id: "sweep-count" });
  const grid = () => {
    const out = {};
    for (const row of rows.children) {
      const key = row.querySelector(".sweep-key").value.trim();
      const values = parseValues(row.querySelector(".sweep-values").value);
      if (key && values.length) out[key] = values;
    }
    return out;
  };
  const recount = () => {
    const sizes = Object.values(grid()).map((v) => v.length);
    const n = sizes.reduce((a, b) => a * b, 1);
    count.textContent = sizes.length ? `${n} variant${n > 1 ? "s" : ""} (every combination)${n > MAX_VARIANTS ? ` — over the ${MAX_VARIANTS} allowed` : ""}` : "No sweep: one variant with the collection's settings.";
    return n;
  };
  sweepRow(rows, recount);
  recount();
  const status = h("div", { "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "primary" }, "Start evaluation");
  const form = h(
    "form",
    { class: "card eval-form", "aria-label": "Start an evaluation", novalidate: true },
    h("h2", {}, "New evaluation"),
    h(
      "div",
      { class: "grid" },
      h("div", { class: "field" }, h("label", { for: "eval-name" }, "Name"), name),
      h("div", { class: "field" }, h("label", { for: "eval-kind" }, "Kind"), kind),
      h("div", { class: "field" }, h("label", { for: "eval-format" }, "Dataset format"), format),
      h("div", { class: "field" }, h("label", { for: "eval-split" }, "Split"), split),
    ),
    h(
      "fieldset",
      { class: "field" },
      h("legend", {}, "Dataset files"),
      h("p", { class: "muted" }, "BEIR: corpus.jsonl, queries.jsonl and qrels/<split>.tsv (a folder, or the three files); answers: items.jsonl."),
      h("div", { class: "grid" }, h("div", { class: "field" }, h("label", { for: "eval-files" }, "Files"), files), h("div", { class: "field" }, h("label", { for: "eval-folder" }, "Or a folder"), folder)),
    ),
    h("div", { class: "grid" }, h("div", { class: "field" }, h("label", { for: "eval-collection" }, "Collection"), collection), h("div", { class: "field" }, h("label", { for: "eval-keep" }, "Keep corpus as"), keepAs), h("div", { class: "field" }, h("label", { for: "eval-max" }, "Max items"), maxItems)),
    h(
      "fieldset",
      { class: "field" },
      h("legend", {}, "Sweep grid (retrieval settings)"),
      h("datalist", { id: "sweep-keys" }, SWEEP_KEYS.map((k) => h("option", { value: k }))),
      rows,
      h("button", { type: "button", class: "link", onclick: () => (sweepRow(rows, recount), recount()) }, "Add a setting"),
      count,
    ),
    status,
    h("div", { class: "actions" }, submit),
  );

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const chosen = [...files.files, ...folder.files];
    if (!chosen.length) return fieldError(files, "Choose the dataset's files (or a folder).");
    if (recount() > MAX_VARIANTS) return fieldError(rows.querySelector(".sweep-values"), `At most ${MAX_VARIANTS} variants: fewer values.`);
    submit.disabled = true;
    try {
      clear(status, notice("info", "Uploading the dataset…"));
      const upload = new FormData();
      for (const f of chosen) upload.append("files", f, datasetPath(f));
      const dataset = await api("/v1/evals/datasets", { method: "POST", form: upload });
      const body = {
        kind: kind.value,
        name: name.value.trim(),
        dataset: { path: dataset.path, format: format.value, split: split.value.trim() || "test" },
        collection: collection.value || null,
        collection_name: keepAs.value.trim() || null,
        sweep: grid(),
        max_items: maxItems.value ? Number(maxItems.value) : null,
      };
      const run = await api("/v1/evals", { method: "POST", json: body });
      location.hash = `#/eval/${run.id}`;
    } catch (err) {
      showErrors(form, status, err, { name, kind, dataset: files, collection, collection_name: keepAs, sweep: rows.querySelector(".sweep-key"), max_items: maxItems });
      submit.disabled = false;
    }
  });
  return form;
}
