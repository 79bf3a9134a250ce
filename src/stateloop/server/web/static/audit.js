// The Access view's record of what happened: tokens used per project per day
// (``/v1/usage``) and the audit log, newest first, a page at a time, narrowed to one
// credential.

import { api } from "./api.js";
import { clear, guard, h, when } from "./dom.js";

const PAGE = 50;

/** Usage per project per day, the last ``days``. */
export async function usageSection(el, days = 30) {
  const usage = await guard(() => api("GET", "/v1/usage", undefined, { days })) ?? [];
  clear(el, h("h3", { id: "access-usage-title" }, "Usage"),
    usage.length
      ? h("table", { class: "tool-table access-table" },
        h("caption", {}, `Model tokens per project per day, the last ${days} days`),
        h("thead", {}, h("tr", {}, ["Day", "Project", "Tokens", "Runs"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, usage.map((u) => h("tr", {}, h("td", {}, u.day), h("th", { scope: "row" }, u.project),
          h("td", {}, u.tokens.toLocaleString()), h("td", {}, u.runs.toLocaleString())))))
      : h("p", { class: "muted" }, `No runs counted in the last ${days} days.`));
}

/** The audit log: ``filter.credential`` narrows it, ``filter.before`` pages back. */
export async function auditSection(el, filter = {}) {
  const { credential = "", before } = filter;
  const entries = await guard(() => api("GET", "/v1/audit", undefined,
    { credential, before, limit: PAGE })) ?? [];
  const known = await guard(() => api("GET", "/v1/api-keys", undefined, { limit: 1000 })) ?? [];
  const names = new Map(known.map((k) => [`key-${k.id}`, k.name]));
  const input = h("input", { id: "audit-credential", list: "audit-credentials", value: credential,
    placeholder: "every credential" });
  const form = h("form", { class: "row", "aria-label": "Narrow the audit log" },
    h("label", { for: "audit-credential" }, "Credential"), input,
    h("datalist", { id: "audit-credentials" }, ["server-password", ...names.keys()].map((c) =>
      h("option", { value: c }, names.get(c) ?? c))),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    auditSection(el, { credential: input.value.trim() });
  });
  const who = (c) => names.has(c) ? `${c} (${names.get(c)})` : c;
  const rows = entries.map((a) => h("tr", { "data-seq": a.seq },
    h("td", {}, when(a.at)), h("th", { scope: "row" }, who(a.credential)), h("td", {}, a.project ?? "every"),
    h("td", {}, a.method), h("td", { class: "agent-id" }, a.path),
    h("td", { class: a.status >= 400 ? "bad" : null }, String(a.status))));
  clear(el, h("h3", { id: "access-audit-title" }, "Audit log"), form,
    rows.length
      ? h("table", { class: "tool-table access-table" },
        h("caption", {}, `Writes${credential ? ` by ${credential}` : ""}, newest first`),
        h("thead", {}, h("tr", {}, ["Time", "Credential", "Project", "Method", "Path", "Status"].map((t) =>
          h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows))
      : h("p", { class: "muted" }, before ? "No older entries." : "No entries."),
    h("div", { class: "actions" },
      before ? h("button", { type: "button", onclick: () => auditSection(el, { credential }) }, "Newest") : null,
      entries.length === PAGE ? h("button", { type: "button",
        onclick: () => auditSection(el, { credential, before: entries.at(-1).seq }) }, "Older") : null));
}
