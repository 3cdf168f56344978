// Upload: drop files or a folder, send them as one job, follow the job live until it ends.

import { api } from "../api.js";
import { badge, clear, collectionPicker, errorText, h, notice, pageHeader } from "../dom.js";
import { jobPanel } from "./job_panel.js";

/** Every file under dropped items, folders walked (webkitGetAsEntry), with its relative path. */
async function droppedFiles(dataTransfer) {
  const entries = [...dataTransfer.items].map((i) => i.webkitGetAsEntry?.()).filter(Boolean);
  if (!entries.length) return [...dataTransfer.files].map((f) => ({ file: f, path: f.name }));
  const out = [];
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      const file = await new Promise((ok, ko) => entry.file(ok, ko));
      out.push({ file, path: prefix + file.name });
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((ok, ko) => reader.readEntries(ok, ko));
        if (!batch.length) break;
        for (const child of batch) await walk(child, `${prefix}${entry.name}/`);
      }
    }
  };
  for (const entry of entries) await walk(entry, "");
  return out;
}

/** {extensions: Set(".pdf", …), kinds: "PDF, DOCX, …"} from GET /v1/ingestion/formats: the parsers'
 * own list, so a parser added on the server is accepted here without a UI change. */
async function acceptedFormats() {
  const { formats, no_extension } = await api("/v1/ingestion/formats");
  return {
    extensions: new Set(formats.flatMap((f) => f.extensions)),
    kinds: formats.map((f) => f.kind).join(", "),
    noExtension: no_extension,
  };
}

/** Why a file is refused before upload, or null: an extension no parser reads, or nothing in it. */
function refusal(path, size, accepted) {
  const name = path.split("/").pop();
  const dot = name.lastIndexOf(".");
  const ext = dot > 0 ? name.slice(dot).toLowerCase() : "";
  if (!size) return "empty file";
  if (!ext) return accepted.noExtension ? null : "no file extension";
  return accepted.extensions.has(ext) ? null : `${ext} files cannot be read (readable: ${accepted.kinds})`;
}

export async function render(root, ctx) {
  const accepted = await acceptedFormats();
  let collection;
  const picker = await collectionPicker(ctx.query.get("collection"), (c) => (collection = c));
  collection = picker.collection;
  let chosen = [];
  let refused = [];
  const fileList = h("ul", { class: "file-list", "aria-label": "Files to upload" });
  const refusedList = h("ul", { class: "outcomes refused", "aria-label": "Files refused" });
  const status = h("div", { class: "form-status" });
  const progress = h("section", { "aria-label": "Job progress", "aria-live": "polite" });
  const send = h("button", { type: "button", class: "primary", disabled: true }, "Upload");

  const show = () => {
    clear(fileList, chosen.map(({ path, file }) => h("li", {}, h("span", { class: "path" }, path), h("span", { class: "muted" }, `${file.size} B`))));
    clear(
      refusedList,
      refused.length ? h("li", { class: "muted" }, `Not uploaded (${refused.length}): the parsers cannot read them.`) : null,
      refused.map(({ path, reason }) => h("li", { dataset: { path } }, h("span", { class: "path" }, path), h("span", { class: "badge badge-rejected" }, "refused"), h("span", { class: "reason" }, reason))),
    );
    send.disabled = !chosen.length || !collection;
    send.textContent = chosen.length ? `Upload ${chosen.length} file${chosen.length > 1 ? "s" : ""}` : "Upload";
  };
  const add = (items) => {
    const verdicts = items.map((item) => ({ ...item, reason: refusal(item.path, item.file.size, accepted) }));
    chosen = [...chosen, ...verdicts.filter((v) => !v.reason)];
    refused = [...refused, ...verdicts.filter((v) => v.reason)];
    show();
  };
  const filesInput = h("input", { id: "files", type: "file", multiple: true, class: "visually-hidden", accept: [...accepted.extensions].join(","), onchange: (e) => add([...e.target.files].map((f) => ({ file: f, path: f.name }))) });
  const folderInput = h("input", {
    id: "folder",
    type: "file",
    webkitdirectory: true,
    class: "visually-hidden",
    onchange: (e) => add([...e.target.files].map((f) => ({ file: f, path: f.webkitRelativePath || f.name }))),
  });
  const zone = h(
    "div",
    { class: "dropzone", id: "dropzone" },
    h("p", {}, "Drop files or folders here, or"),
    h("p", { class: "muted", id: "accepted-types" }, `Readable: ${accepted.kinds} (${[...accepted.extensions].join(" ")}).`),
    h("div", { class: "actions" }, filesInput, h("label", { for: "files", class: "button secondary" }, "Choose files"), folderInput, h("label", { for: "folder", class: "button secondary" }, "Choose a folder")),
  );
  zone.addEventListener("dragover", (e) => {
    e.preventDefault();
    zone.classList.add("over");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", async (e) => {
    e.preventDefault();
    zone.classList.remove("over");
    add(await droppedFiles(e.dataTransfer));
  });

  send.addEventListener("click", async () => {
    const form = new FormData();
    // NOTE: the relative path is the file name sent, so a folder's files keep distinct source ids.
    for (const { file, path } of chosen) form.append("files", file, path);
    send.disabled = true;
    clear(status, notice("info", "Uploading…"));
    try {
      const result = await api(`/v1/collections/${collection.id}/documents`, { method: "POST", form });
      chosen = [];
      show();
      clear(
        status,
        h(
          "ul",
          { class: "outcomes", "aria-label": "Upload outcomes" },
          result.documents.map((d) => h("li", {}, h("span", { class: "path" }, d.filename), badge(d.status), d.reason ? h("span", { class: "reason" }, d.reason) : null)),
        ),
      );
      clear(progress, await jobPanel(result.job_id, ctx));
    } catch (err) {
      clear(status, notice("error", errorText(err)));
      send.disabled = false;
    }
  });

  root.append(
    pageHeader("Upload"),
    h("div", { class: "card" }, picker.el, zone, fileList, h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", onclick: () => ((chosen = []), (refused = []), show()) }, "Clear"), send), refusedList, status),
    progress,
  );
  if (ctx.query.get("job")) progress.append(await jobPanel(ctx.query.get("job"), ctx));
}
