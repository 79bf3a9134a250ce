// The Access view, an admin's: API keys (made, renamed, revoked; a new key's secret shown
// once), client-side access tokens (made for an agent, deleted) and, from audit.js, the
// usage per project and the audit log. Offered only when ``GET /v1/api-keys`` answers.

import { api, authHeaders } from "./api.js";
import { clear, guard, h, say, when } from "./dom.js";
import { auditSection, usageSection } from "./audit.js";

const ACCESSES = ["read_messages", "write_messages", "read_agent", "write_agent"];

/** Whether the saved credential may manage access: an admin's (a 403 says it is not). */
export async function mayManageAccess() {
  try {
    const response = await fetch("/v1/api-keys?limit=1", { headers: authHeaders() });
    return response.ok;
  } catch { return false; }
}

/** A ``datetime-local`` field's value as an ISO instant, or null when empty. */
function instant(input) { return input.value ? new Date(input.value).toISOString() : null; }

function field(id, label, attrs = {}) {
  return [h("label", { for: id }, label), h("input", { id, ...attrs })];
}

/** A secret the server shows once: in a read-only field with a button that copies it. */
function secretBox(box, what, secret) {
  const input = h("input", { id: "secret", readonly: true, value: secret, class: "secret-value" });
  const copy = async () => {
    try { await navigator.clipboard.writeText(secret); } catch {
      input.select();
      if (!document.execCommand("copy")) { say("Select the secret and copy it", true); return; }
    }
    say(`Copied the ${what}`);
  };
  clear(box, h("div", { class: "card secret", role: "group", "aria-labelledby": "secret-label" },
    h("label", { id: "secret-label", for: "secret" }, `The new ${what}: copy it now, it is not shown again`),
    h("div", { class: "row" }, input,
      h("button", { type: "button", onclick: copy }, "Copy"),
      h("button", { type: "button", onclick: () => clear(box) }, "Done"))));
  input.focus();
  input.select();
}

function table(caption, heads, rows, empty) {
  if (!rows.length) return h("p", { class: "muted" }, empty);
  return h("table", { class: "tool-table access-table" }, h("caption", {}, caption),
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows));
}

async function keysSection(el, box, changed) {
  const keys = await guard(() => api("GET", "/v1/api-keys", undefined, { limit: 1000 })) ?? [];
  const rename = async (key) => {
    const name = prompt(`New name for ${key.name}`, key.name);
    if (!name || name === key.name) return;
    if (await guard(() => api("PATCH", `/v1/api-keys/${key.id}`, { name }))) {
      say(`Renamed ${key.name} to ${name}`);
      await keysSection(el, box, changed);
      changed();
    }
  };
  const revoke = async (key) => {
    if (!confirm(`Revoke the key ${key.name}? Everything using it is refused from now on.`)) return;
    if (await guard(() => api("DELETE", `/v1/api-keys/${key.id}`))) {
      say(`Revoked ${key.name}`);
      await keysSection(el, box, changed);
      changed();
    }
  };
  const rows = keys.map((k) => h("tr", { "data-key": k.id, class: k.revoked_at ? "revoked" : null },
    h("th", { scope: "row" }, k.name), h("td", {}, k.project), h("td", {}, k.role),
    h("td", {}, when(k.created_at)), h("td", {}, when(k.expires_at, "never")),
    h("td", { class: k.revoked_at ? "bad" : null }, k.revoked_at ? `revoked ${when(k.revoked_at)}` : "no"),
    h("td", { class: "row" },
      h("button", { type: "button", "aria-label": `Rename ${k.name}`, onclick: () => rename(k) }, "Rename"),
      k.revoked_at ? null : h("button", { type: "button", class: "danger",
        "aria-label": `Revoke ${k.name}`, onclick: () => revoke(k) }, "Revoke"))));
  const form = h("form", { "aria-label": "Make an API key", class: "grid3" },
    h("div", {}, field("key-name", "Name", { required: true, maxlength: 200 })),
    h("div", {}, field("key-project", "Project", { placeholder: "default", pattern: "[A-Za-z0-9._\\-]+" })),
    h("div", {}, h("label", { for: "key-role" }, "Role"),
      h("select", { id: "key-role" }, ["read", "write", "admin"].map((r) =>
        h("option", { value: r, selected: r === "write" }, r)))),
    h("div", {}, field("key-expires", "Expires (optional)", { type: "datetime-local" })),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Make key")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const value = (id) => form.querySelector(`#${id}`);
    const body = { name: value("key-name").value, role: value("key-role").value,
      project: value("key-project").value || null, expires_at: instant(value("key-expires")) };
    const made = await guard(() => api("POST", "/v1/api-keys", body));
    if (!made) return;
    say(`Made the key ${made.name}`);
    form.reset();
    await keysSection(el, box, changed);
    changed();
    secretBox(box, `key ${made.name}`, made.key);
  });
  clear(el, h("h3", { id: "access-keys-title" }, "API keys"),
    table("API keys, oldest first", ["Name", "Project", "Role", "Created", "Expires", "Revoked", "Actions"],
      rows, "No API keys yet: the server's password and environment keys are admins."),
    form);
}

function policyText(policy) {
  return (policy?.data ?? []).map((p) => `${p.id}: ${p.access.join(", ")}`).join("; ");
}

async function tokensSection(el, box, changed) {
  const [listed, agents] = await Promise.all([
    guard(() => api("GET", "/v1/client-side-access-tokens", undefined, { limit: 100 })),
    guard(() => api("GET", "/v1/agents", undefined, { limit: 200 }))]);
  const tokens = listed?.tokens ?? [];
  const remove = async (t) => {
    if (!confirm(`Delete the token ${t.token}? Pages holding it are refused from now on.`)) return;
    if (await guard(() => api("DELETE", `/v1/client-side-access-tokens/${t.token}`))) {
      say(`Deleted ${t.token}`);
      await tokensSection(el, box, changed);
      changed();
    }
  };
  const rows = tokens.map((t) => h("tr", {},
    h("th", { scope: "row", class: "agent-id" }, t.token), h("td", {}, t.hostname),
    h("td", {}, policyText(t.policy)), h("td", {}, when(t.expiresAt)),
    h("td", {}, h("button", { type: "button", class: "danger", "aria-label": `Delete ${t.token}`,
      onclick: () => remove(t) }, "Delete"))));
  const form = h("form", { "aria-label": "Make a client-side token" },
    h("div", { class: "grid3" },
      h("div", {}, h("label", { for: "token-agent" }, "Agent"),
        h("select", { id: "token-agent", required: true }, (agents ?? []).map((a) =>
          h("option", { value: a.id }, `${a.name} (${a.id.slice(-8)})`)))),
      h("div", {}, field("token-host", "Page origin", { type: "url", required: true,
        placeholder: "https://app.example" })),
      h("div", {}, field("token-expires", "Expires (default: 5 minutes)", { type: "datetime-local" }))),
    h("fieldset", { class: "row" }, h("legend", {}, "Accesses"), ACCESSES.map((a) =>
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "access", value: a,
        checked: a.endsWith("messages") }), a))),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Make token")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const access = [...form.querySelectorAll("input[name=access]:checked")].map((c) => c.value);
    if (!access.length) { say("Choose at least one access", true); return; }
    const body = { hostname: form.querySelector("#token-host").value,
      policy: [{ type: "agent", id: form.querySelector("#token-agent").value, access }],
      expires_at: instant(form.querySelector("#token-expires")) };
    const made = await guard(() => api("POST", "/v1/client-side-access-tokens", body));
    if (!made) return;
    say(`Made a token for ${made.hostname}`);
    await tokensSection(el, box, changed);
    changed();
    secretBox(box, `token for ${made.hostname}`, made.token);
  });
  clear(el, h("h3", { id: "access-tokens-title" }, "Client-side access tokens"),
    table("Unexpired tokens, newest first", ["Handle", "Page origin", "Agents and accesses", "Expires", "Actions"],
      rows, "No unexpired tokens."),
    listed?.hasNextPage ? h("p", { class: "muted" }, "The newest 100 are listed.") : null,
    agents?.length ? form : h("p", { class: "muted" }, "Make an agent to make a token for it."));
}

/** Draw the Access view into ``main``. */
export async function accessView(main) {
  const box = h("div", { "aria-live": "polite" });
  const parts = ["keys", "tokens", "usage", "audit"].map((id) =>
    h("section", { id: `access-${id}`, class: "access-part", "aria-labelledby": `access-${id}-title` }));
  clear(main, h("h2", { id: "access-title" }, "Access"), box,
    h("div", { class: "access-view" }, parts));
  const changed = () => auditSection(parts[3]);  // the log gains what was just done
  await Promise.all([keysSection(parts[0], box, changed), tokensSection(parts[1], box, changed),
    usageSection(parts[2]), auditSection(parts[3])]);
}
