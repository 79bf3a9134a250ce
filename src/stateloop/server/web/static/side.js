// Beside the conversation: the context bar, the memory blocks as they are now (drawn again
// after each step, a block that changed since marked and announced) and the agent's settings.

import { clear, h } from "./dom.js";
import { contextBar } from "./context.js";
import { idSuffix, madeAt } from "./agents.js";

// the block values last drawn, and when each last changed, by label
let seen = { agent: null, values: new Map(), changedAt: new Map() };
const live = h("p", { class: "visually-hidden", "aria-live": "polite" });  // one region, kept

function blocksOf(agent) { return agent.blocks ?? agent.memory?.blocks ?? []; }

const RECENT = 60_000;  // a change stays marked this long (ms): a run's edits outlast its end

function block(b, changedAt) {
  const recent = changedAt && Date.now() - changedAt < RECENT;
  return h("article", { class: `side-block${recent ? " changed" : ""}`, "aria-label": `Block ${b.label}` },
    h("h3", {}, h("span", {}, b.label, b.read_only ? " (read-only)" : ""),
      h("small", { class: "muted" }, `${b.value.length} / ${b.limit}`,
        recent ? ` · changed ${new Date(changedAt).toLocaleTimeString()}` : "")),
    h("pre", { tabindex: "0" }, b.value || "(empty)"));
}

function settings(agent, edit) {
  const config = agent.llm_config ?? {};
  const rows = [
    ["Model", agent.model ?? `${config.model_endpoint_type}/${config.model}`],
    ["Context window", config.context_window?.toLocaleString()],
    ["Agent type", agent.agent_type],
    ["Tools", (agent.tools ?? []).map((t) => t.name).join(", ") || "none"],
    ["Tool rules", String((agent.tool_rules ?? []).length)],
    ["Tags", (agent.tags ?? []).join(", ") || "none"],
    ["Id", idSuffix(agent.id)], ["Created", madeAt(agent)],
  ];
  return [h("dl", { class: "settings" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "–")])),
    h("button", { type: "button", onclick: edit }, "Edit settings")];
}

/** Draw ``agent`` into ``el``; ``edit`` opens the settings view. */
export function drawSide(el, agent, edit) {
  if (!agent) { clear(el); seen = { agent: null, values: new Map(), changedAt: new Map() }; return; }
  const first = seen.agent !== agent.id;
  const blocks = blocksOf(agent);
  const changed = first ? [] : blocks.filter((b) => seen.values.has(b.label)
    && seen.values.get(b.label) !== b.value).map((b) => b.label);
  const changedAt = first ? new Map() : seen.changedAt;
  for (const label of changed) changedAt.set(label, Date.now());
  seen = { agent: agent.id, values: new Map(blocks.map((b) => [b.label, b.value])), changedAt };
  let bar = el.querySelector("#bar");
  if (first || !bar) bar = h("div", { id: "bar", class: "bar-wrap" });
  clear(el,
    h("h2", {}, "Context window"), bar,
    h("h2", { id: "side-blocks" }, "Memory blocks"),
    h("div", { role: "group", "aria-labelledby": "side-blocks" },
      blocks.length ? blocks.map((b) => block(b, changedAt.get(b.label))) : h("p", { class: "muted" }, "No blocks")),
    live,
    h("h2", {}, "Settings"), settings(agent, edit));
  live.textContent = changed.length ? `Memory changed: ${changed.join(", ")}` : "";
  contextBar(bar, agent);
}
