// Memory: core blocks edited in place (limit shown, read-only kept) with each block's history
// (its commits, the diff each made, a revert), a block made and attached or detached,
// archival passages searched, inserted and deleted, and recall search over the agent's whole
// history.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { refreshAgent } from "./app.js";

function blockEditor(agent, block) {
  const id = `block-${block.label}`;
  const area = h("textarea", { id, rows: Math.min(12, Math.max(3, block.value.split("\n").length + 1)),
    readOnly: block.read_only, maxLength: block.limit }, block.value);
  const count = h("span", { class: "muted", id: `${id}-count` });
  const counted = () => { count.textContent = `${area.value.length} / ${block.limit} characters`; };
  area.addEventListener("input", counted);
  counted();
  const save = async () => {
    const saved = await guard(() => api("PATCH",
      `/v1/agents/${agent.id}/core-memory/blocks/${encodeURIComponent(block.label)}`, { value: area.value }));
    if (saved) { say(`Saved block ${block.label}`); await refreshAgent(); }
  };
  area.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); save(); }
  });
  return h("div", { class: "block" },
    h("label", { for: id }, block.label, block.read_only ? " (read-only)" : ""),
    block.description ? h("p", { class: "muted" }, block.description) : null,
    area, h("div", { class: "actions" }, count,
      block.read_only ? null : h("button", { type: "button", onclick: save, "aria-describedby": `${id}-count` },
        `Save ${block.label} (Ctrl+Enter)`),
      h("button", { type: "button", class: "danger", onclick: () => detach(agent, block) }, `Detach ${block.label}`)),
    history(agent, block, (value) => { area.value = value; counted(); }));
}

// A block's commits, newest first, each with the diff it made and (but the newest) a revert
// to it, which is itself a new commit.
function history(agent, block, reverted) {
  const list = h("ol", { class: "history" });
  const base = `/v1/agents/${agent.id}/memory`;
  const show = async () => {
    const commits = await guard(() => api("GET", `${base}/commits`, undefined,
      { label: block.label, limit: 20 })) || [];
    clear(list, commits.map((c, i) => {
      const diff = h("pre", { class: "diff", hidden: true });
      const toggle = async (e) => {
        if (diff.hidden && !diff.textContent) {
          const found = c.parent_sha
            ? await guard(() => api("GET", `${base}/diff`, undefined, { from: c.parent_sha, to: c.sha }))
            : null;
          diff.textContent = found ? found.diff || "(no change to the files)" : "(the first commit)";
        }
        diff.hidden = !diff.hidden;
        e.target.setAttribute("aria-expanded", String(!diff.hidden));
      };
      const revert = async () => {
        const done = await guard(() => api("POST", `${base}/revert`, { commit: c.sha, label: block.label }));
        if (done === undefined) return;
        const now = await guard(() => api("GET",
          `/v1/agents/${agent.id}/core-memory/blocks/${encodeURIComponent(block.label)}`));
        if (now) reverted(now.value);
        say(`Reverted ${block.label} to ${c.sha.slice(0, 8)}`);
        await refreshAgent();
        await show();
      };
      return h("li", {},
        h("span", {}, h("code", {}, c.sha.slice(0, 8)), ` ${c.message} · ${c.author_name || c.author_id} · `,
          h("time", { datetime: c.timestamp }, new Date(c.timestamp).toLocaleString())),
        h("button", { type: "button", "aria-expanded": "false", onclick: toggle,
          "aria-label": `Diff of ${c.sha.slice(0, 8)}` }, "Diff"),
        i === 0 || block.read_only ? null : h("button", { type: "button", onclick: revert,
          "aria-label": `Revert ${block.label} to ${c.sha.slice(0, 8)}` }, "Revert"),
        diff);
    }));
  };
  const details = h("details", { class: "history" }, h("summary", {}, `History of ${block.label}`), list);
  details.addEventListener("toggle", () => { if (details.open) show(); });
  return details;
}

async function detach(agent, block) {
  if (!confirm(`Detach block ${block.label} from ${agent.name}? The block itself is kept.`)) return;
  if (await guard(() => api("PATCH", `/v1/agents/${agent.id}/core-memory/blocks/detach/${block.id}`)) === undefined) return;
  say(`Detached block ${block.label}`);
  await refreshAgent();
  memoryView(document.getElementById("panel"), agent);
}

function newBlock(agent) {
  const label = h("input", { id: "block-new-label", required: true });
  const value = h("textarea", { id: "block-new-value", rows: 2 });
  const limit = h("input", { id: "block-new-limit", type: "number", min: "1", value: "2000" });
  const make = async (e) => {
    e.preventDefault();
    if (!label.value.trim()) { say("A block needs a label", true); label.focus(); return; }
    const block = await guard(() => api("POST", "/v1/blocks",
      { label: label.value.trim(), value: value.value, limit: Number(limit.value) }));
    if (!block) return;
    if (await guard(() => api("PATCH", `/v1/agents/${agent.id}/core-memory/blocks/attach/${block.id}`)) === undefined) return;
    say(`Made and attached block ${block.label}`);
    await refreshAgent();
    memoryView(document.getElementById("panel"), agent);
  };
  return h("form", { onsubmit: make, "aria-labelledby": "block-new-title" },
    h("h4", { id: "block-new-title" }, "A new block"),
    h("div", { class: "grid3" }, h("div", {}, h("label", { for: "block-new-label" }, "Label of the new block"), label),
      h("div", {}, h("label", { for: "block-new-limit" }, "Limit (characters)"), limit)),
    h("label", { for: "block-new-value" }, "Value of the new block"), value,
    h("button", { type: "submit" }, "Make and attach block"));
}

function archival(agent) {
  const query = h("input", { id: "archival-query", type: "search" });
  const results = h("ul", { class: "passages" });
  const text = h("textarea", { id: "archival-new", rows: 2 });
  const show = async () => {
    const q = query.value.trim();
    const found = q
      ? (await guard(() => api("GET", `/v1/agents/${agent.id}/archival-memory/search`, undefined, { query: q })))?.results
      : await guard(() => api("GET", `/v1/agents/${agent.id}/archival-memory`, undefined, { limit: 50 }));
    clear(results, (found || []).map((p) => h("li", {}, h("span", {}, p.content ?? p.text),
      h("button", { type: "button", class: "danger", "aria-label": `Delete passage ${p.id}`,
        onclick: async () => {
          if (await guard(() => api("DELETE", `/v1/agents/${agent.id}/archival-memory/${p.id}`)) !== undefined) show();
        } }, "Delete"))));
    if (!found?.length) results.append(h("li", { class: "muted" }, "No passages"));
  };
  const insert = async (e) => {
    e.preventDefault();
    if (!text.value.trim()) return;
    if (await guard(() => api("POST", `/v1/agents/${agent.id}/archival-memory`, { text: text.value }))) {
      text.value = "";
      show();
    }
  };
  show();
  return h("section", { "aria-labelledby": "archival-title" }, h("h3", { id: "archival-title" }, "Archival memory"),
    h("form", { class: "row", onsubmit: (e) => { e.preventDefault(); show(); } },
      h("label", { for: "archival-query" }, "Search passages"), query, h("button", { type: "submit" }, "Search")),
    results,
    h("form", { class: "row", onsubmit: insert },
      h("label", { for: "archival-new" }, "New passage"), text, h("button", { type: "submit" }, "Insert")));
}

function recall(agent) {
  const query = h("input", { id: "recall-query", type: "search" });
  const results = h("ul", { class: "passages" });
  const search = async (e) => {
    e.preventDefault();
    const found = await guard(() => api("POST", "/v1/messages/search",
      { query: query.value, agent_id: agent.id, limit: 50 }));
    clear(results, (found || []).map((m) => h("li", {},
      h("small", { class: "muted" }, `${m.message_type.replace("_message", "")} · ${m.created_at ?? ""}`),
      h("span", {}, typeof m.content === "string" ? m.content : m.reasoning ?? JSON.stringify(m.content)))));
    if (found && !found.length) results.append(h("li", { class: "muted" }, "Nothing found"));
  };
  return h("section", { "aria-labelledby": "recall-title" }, h("h3", { id: "recall-title" }, "Recall (history)"),
    h("form", { class: "row", onsubmit: search },
      h("label", { for: "recall-query" }, "Search history"), query, h("button", { type: "submit" }, "Search")),
    results);
}

export async function memoryView(panel, agent) {
  const blocks = await guard(() => api("GET", `/v1/agents/${agent.id}/core-memory/blocks`)) || [];
  clear(panel, h("section", { "aria-labelledby": "blocks-title" }, h("h3", { id: "blocks-title" }, "Core memory"),
    blocks.map((b) => blockEditor(agent, b)), newBlock(agent)), archival(agent), recall(agent));
}
