// Form errors in people's words, next to the field they are about: the API's 422 details
// ({loc, msg}) matched to inputs by their path in the request body.

import { errorText, h, notice } from "./dom.js";

/** "Value error, chunk_overlap must be < chunk_size" -> "Chunk overlap must be < chunk size". */
export function humanMessage(msg) {
  const text = String(msg ?? "")
    .replace(/^(Value error|Assertion failed),\s*/i, "")
    .replace(/\b([a-z]+)_([a-z_]+)\b/g, (m) => m.replace(/_/g, " "));
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Remove the errors shown by showErrors. */
export function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error")) el.remove();
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

/** Mark `input` invalid with `message` beside it (announced, and named by aria-describedby). */
export function fieldError(input, message) {
  const id = `${input.id || input.name}-error`;
  input.parentElement.querySelector(`#${CSS.escape(id)}`)?.remove();
  input.setAttribute("aria-invalid", "true");
  input.setAttribute("aria-describedby", id);
  const error = h("p", { class: "field-error", id, role: "alert" }, message);
  input.after(error);
  // Editing the field takes the complaint back until the next try.
  input.addEventListener("input", () => (error.remove(), input.removeAttribute("aria-invalid")), { once: true });
}

/** Show an API error on `form`: each 422 detail beside its field (`fields`: body path -> input,
 * the longest matching path wins); the rest in `status`. */
export function showErrors(form, status, err, fields) {
  clearErrors(form);
  const details = err?.code === "validation_error" && Array.isArray(err.details) ? err.details : [];
  const rest = [];
  for (const d of details) {
    const path = d.loc.filter((p) => p !== "body").join(".");
    const key = Object.keys(fields)
      .filter((k) => path === k || path.startsWith(`${k}.`))
      .sort((a, b) => b.length - a.length)[0];
    if (key) fieldError(fields[key], humanMessage(d.msg));
    else rest.push(`${path ? `${path}: ` : ""}${humanMessage(d.msg)}`);
  }
  status.replaceChildren();
  if (!details.length) status.append(notice("error", errorText(err)));
  else if (rest.length) status.append(notice("error", rest.join(" · ")));
  form.querySelector("[aria-invalid='true']")?.focus();
}
