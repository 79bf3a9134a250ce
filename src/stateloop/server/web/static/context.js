// The context window: a stacked bar of what fills it (the figures of context_overview) and,
// on demand, the messages in it one by one.

import { api } from "./api.js";
import { clear, guard, h } from "./dom.js";

const PARTS = [
  ["system", "System prompt", "num_tokens_system"],
  ["core", "Core memory", "num_tokens_core_memory"],
  ["meta", "Memory summary", "num_tokens_external_memory_summary"],
  ["tools", "Tool definitions", "num_tokens_functions_definitions"],
  ["rules", "Tool rules", "num_tokens_tool_usage_rules"],
  ["files", "Files", "num_tokens_memory_filesystem"],
  ["summary", "Conversation summary", "num_tokens_summary_memory"],
  ["messages", "Messages", "num_tokens_messages"],
];

function segments(overview) {
  const used = PARTS.map(([cls, label, key]) => ({ cls, label, tokens: overview[key] || 0 }));
  const max = overview.context_window_size_max;
  used.push({ cls: "free", label: "Free", tokens: Math.max(0, max - overview.context_window_size_current) });
  return used;
}

function bar(overview, withLegend) {
  const max = overview.context_window_size_max || 1;
  const parts = segments(overview);
  const summary = parts.filter((p) => p.tokens).map((p) => `${p.label} ${p.tokens}`).join(", ");
  const shown = h("div", { class: "bar", role: "img",
    "aria-label": `Context window: ${overview.context_window_size_current} of ${max} tokens used (${summary})` },
  parts.filter((p) => p.tokens).map((p) => h("span", { class: `seg ${p.cls}`,
    style: `flex-grow:${p.tokens}; min-width:${p.cls === "free" ? 0 : 3}px`, title: `${p.label}: ${p.tokens} tokens` })));
  const caption = h("p", { class: "bar-caption" },
    `${overview.context_window_size_current.toLocaleString()} / ${max.toLocaleString()} tokens`);
  if (!withLegend) return [shown, caption];
  const legend = h("table", { class: "legend" }, h("caption", {}, "Tokens by part"),
    h("tr", {}, h("th", { scope: "col" }, "Part"), h("th", { scope: "col" }, "Tokens"), h("th", { scope: "col" }, "Share")),
    parts.map((p) => h("tr", {}, h("th", { scope: "row" }, h("span", { class: `swatch ${p.cls}` }), p.label),
      h("td", {}, p.tokens.toLocaleString()), h("td", {}, `${((100 * p.tokens) / max).toFixed(1)}%`))));
  return [shown, caption, legend];
}

/** The compact bar above the tabs (refreshed after each step). */
export async function contextBar(el, agent) {
  if (!el) return;
  const overview = await guard(() => api("GET", `/v1/agents/${agent.id}/context`));
  if (overview) clear(el, bar(overview, false));
}

function messageRow(message) {
  const parts = (message.content || []).map((p) => (p.type === "text" ? p.text : `[${p.type}] ${p.text ?? ""}`));
  for (const call of message.tool_calls || []) parts.push(`→ ${call.name}(${call.raw_arguments ?? JSON.stringify(call.arguments)})`);
  return h("li", { class: `ctx-msg role-${message.role}` },
    h("div", { class: "ctx-head" }, h("strong", {}, message.role + (message.name ? ` · ${message.name}` : "")),
      h("span", { class: "muted" }, `${message.token_count ?? "?"} tokens`)),
    h("pre", {}, parts.join("\n")));
}

export async function contextView(panel, agent) {
  const overview = await guard(() => api("GET", `/v1/agents/${agent.id}/context`));
  if (!overview) return;
  const list = h("ol", { class: "ctx-messages", "aria-label": "Messages in context" });
  const toggle = h("button", { type: "button", "aria-expanded": "false", onclick: () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Hide the messages" : "Show the messages in context";
    clear(list, open ? overview.messages.map(messageRow) : []);
  } }, "Show the messages in context");
  clear(panel, h("h3", {}, "Context window"), bar(overview, true),
    h("p", { class: "muted" }, `${overview.num_messages} messages in context · ${overview.num_recall_memory} in recall · ${overview.num_archival_memory} archival passages`),
    toggle, list);
}
