// API keys of the current tenant: create (the key is shown once), list, revoke; and, for the
// operator, tenants.

import { api } from "../api.js";
import { showErrors } from "../forms.js";
import { announce, clear, confirmDialog, errorText, fmt, h, notice, pageHeader } from "../dom.js";

/** A new secret, shown in `where` once (the API never returns it again), selected for copying. */
function shownOnce(where, message, secret, id, label) {
  const value = h("input", { id, readonly: true, value: secret, class: "secret", "aria-label": label });
  clear(
    where,
    h(
      "div",
      { class: "notice notice-ok", role: "status" },
      h("p", {}, h("strong", {}, `${message} Copy it now: it is not shown again.`)),
      h("div", { class: "field inline" }, value, h("button", { type: "button", class: "secondary", onclick: () => (value.select(), navigator.clipboard?.writeText(secret)) }, "Copy")),
    ),
  );
  value.select();
}

export async function render(root) {
  const tenant = await api("/v1/tenant");
  const list = h("section", { "aria-label": "API keys" });
  const created = h("div", { "aria-live": "polite" });
  const keysStatus = h("div", { id: "keys-status" });
  let refreshTenants = null; // the operator's tenants table shows live-key counts: kept current

  async function load() {
    const keys = await api("/v1/admin/keys");
    clear(
      list,
      keys.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { id: "keys-table" },
              h("thead", {}, h("tr", {}, ["Name", "Prefix", "Scopes", "Created", "Expires", "Last used", "State", ""].map((t) => h("th", { scope: "col" }, t)))),
              h(
                "tbody",
                {},
                keys.map((k) =>
                  h(
                    "tr",
                    { dataset: { prefix: k.prefix, state: k.revoked_at ? "revoked" : k.expires_at && new Date(k.expires_at) < new Date() ? "expired" : "live" } },
                    h("th", { scope: "row" }, k.name),
                    h("td", {}, h("code", {}, `${k.prefix}…`)),
                    h("td", {}, k.scopes.join(", ")),
                    h("td", {}, fmt.time(k.created_at)),
                    h("td", {}, k.expires_at ? [fmt.time(k.expires_at), new Date(k.expires_at) < new Date() ? h("span", { class: "badge badge-failed" }, " expired") : null] : "never"),
                    h("td", {}, fmt.time(k.last_used_at)),
                    h("td", {}, k.revoked_at ? h("span", { class: "badge badge-failed" }, `revoked ${fmt.time(k.revoked_at)}`) : k.expires_at && new Date(k.expires_at) < new Date() ? h("span", { class: "badge badge-failed" }, "expired") : h("span", { class: "badge badge-indexed" }, "live")),
                    h(
                      "td",
                      { class: "row-actions" },
                      k.revoked_at
                        ? null
                        : h(
                            "button",
                            {
                              type: "button",
                              class: "link danger",
                              onclick: async () => {
                                if (!(await confirmDialog(`Revoke “${k.name}”?`, "Requests with this key are refused from now on. This cannot be undone.", "Revoke key"))) return;
                                await api(`/v1/admin/keys/${encodeURIComponent(k.prefix)}`, { method: "DELETE" });
                                await load();
                                await refreshTenants?.();
                                announce(keysStatus, "ok", `Key “${k.name}” revoked.`);
                              },
                            },
                            "Revoke",
                          ),
                    ),
                  ),
                ),
              ),
            ),
          )
        : h("p", { class: "empty" }, "No keys yet."),
    );
  }

  const name = h("input", { id: "key-name", name: "name", required: true, maxlength: 200, placeholder: "e.g. ci-pipeline" });
  const expires = h("input", { id: "key-expires", name: "expires_in_days", type: "number", min: 0.01, max: 3650, step: "any", placeholder: "never" });
  const scopes = ["read", "write", "admin"].map((scope) =>
    h("input", { type: "checkbox", id: `key-scope-${scope}`, name: "scopes", value: scope, checked: scope !== "admin" }),
  );
  const form = h(
    "form",
    { class: "card" },
    h("h2", {}, "New key"),
    h("div", { class: "field inline" }, h("label", { for: "key-name" }, "Name"), name, h("button", { type: "submit", class: "primary" }, "Create key")),
    h(
      "fieldset",
      { class: "field inline" },
      h("legend", {}, "Scopes"),
      scopes.map((box) => h("label", { for: box.id }, box, ` ${box.value}`)),
    ),
    h("div", { class: "field inline" }, h("label", { for: "key-expires" }, "Expires after (days; empty: never)"), expires),
    created,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const chosen = scopes.filter((box) => box.checked).map((box) => box.value);
      const days = expires.value ? Number(expires.value) : null;
      const key = await api("/v1/admin/keys", { method: "POST", json: { name: name.value.trim(), scopes: chosen, expires_in_days: days } });
      name.value = "";
      expires.value = "";
      shownOnce(created, `Key “${key.name}” created.`, key.key, "new-key", "The new key");
      await load();
      await refreshTenants?.();
    } catch (err) {
      showErrors(form, created, err, { name, scopes: scopes[0], expires_in_days: expires });
    }
  });
  await load();
  const tenants = await tenantsSection();
  refreshTenants = tenants?.refresh;
  root.append(
    pageHeader("API keys"),
    h("p", { class: "muted" }, `Keys of tenant “${tenant.name}”. A key acts as its tenant on every endpoint.`),
    form,
    keysStatus,
    list,
    tenants?.el,
  );
}

/** Tenants, for the operator (admin keys of the default tenant): list, and create with a first admin
 * key. Other callers get 403 from the API and see nothing here. */
async function tenantsSection() {
  let tenants;
  try {
    tenants = await api("/v1/admin/tenants");
  } catch (err) {
    if (err.status === 403) return null;
    throw err;
  }
  const table = h("div", { class: "table-wrap" });
  const show = (rows) =>
    clear(
      table,
      h(
        "table",
        { id: "tenants-table" },
        h("thead", {}, h("tr", {}, ["Tenant", "Live keys", "Created"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows.map((t) => h("tr", { dataset: { tenant: t.name } }, h("th", { scope: "row" }, t.name), h("td", {}, String(t.live_keys)), h("td", {}, fmt.time(t.created_at))))),
      ),
    );
  show(tenants);
  const name = h("input", { id: "tenant-name", name: "tenant", required: true, maxlength: 200, placeholder: "e.g. team-search" });
  const created = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "card" },
    h("h2", {}, "New tenant"),
    h("div", { class: "field inline" }, h("label", { for: "tenant-name" }, "Tenant name"), name, h("button", { type: "submit", class: "primary" }, "Create tenant")),
    created,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const tenant = await api("/v1/admin/tenants", { method: "POST", json: { name: name.value.trim() } });
      name.value = "";
      shownOnce(created, `Tenant “${tenant.name}” created with an admin key.`, tenant.key, "new-tenant-key", "The new tenant's admin key");
      show(await api("/v1/admin/tenants"));
    } catch (err) {
      clear(created, notice("error", errorText(err)));
    }
  });
  return { el: h("section", { "aria-label": "Tenants" }, h("h2", {}, "Tenants"), form, table), refresh: async () => show(await api("/v1/admin/tenants")) };
}
