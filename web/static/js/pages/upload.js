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

export async function render(root, ctx) {
  let collection;
  const picker = await collectionPicker(ctx.query.get("collection"), (c) => (collection = c));
  collection = picker.collection;
  let chosen = [];
  const fileList = h("ul", { class: "file-list", "aria-label": "Files to upload" });
  const status = h("div", { class: "form-status" });
  const progress = h("section", { "aria-label": "Job progress", "aria-live": "polite" });
  const send = h("button", { type: "button", class: "primary", disabled: true }, "Upload");

  const show = () => {
    clear(fileList, chosen.map(({ path, file }) => h("li", {}, h("span", { class: "path" }, path), h("span", { class: "muted" }, `${file.size} B`))));
    send.disabled = !chosen.length || !collection;
    send.textContent = chosen.length ? `Upload ${chosen.length} file${chosen.length > 1 ? "s" : ""}` : "Upload";
  };
  const add = (items) => {
    chosen = [...chosen, ...items];
    show();
  };
  const filesInput = h("input", { id: "files", type: "file", multiple: true, class: "visually-hidden", onchange: (e) => add([...e.target.files].map((f) => ({ file: f, path: f.name }))) });
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
    h("div", { class: "card" }, picker.el, zone, fileList, h("div", { class: "actions" }, h("button", { type: "button", class: "secondary", onclick: () => ((chosen = []), show()) }, "Clear"), send), status),
    progress,
  );
  if (ctx.query.get("job")) progress.append(await jobPanel(ctx.query.get("job"), ctx));
}
