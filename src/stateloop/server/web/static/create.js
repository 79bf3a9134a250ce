// The "new agent" dialog: model, agent type, system prompt, memory blocks and tools.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";

let rows = 0;  // numbers each block row's fields apart

// Letta's agent types a new agent is usually made with (the type is fixed once it exists)
const TYPES = [["letta_v1_agent", "Letta v1 (the default)"], ["memgpt_v2_agent", "MemGPT v2 (heartbeats, send_message)"],
  ["memgpt_agent", "MemGPT"], ["react_agent", "ReAct (no memory tools)"], ["workflow_agent", "Workflow (forgets after each run)"]];

function blockRow(label = "", value = "") {
  const n = ++rows;
  return h("fieldset", { class: "block-row" }, h("legend", {}, "Block"),
    h("label", { for: `new-block-label-${n}` }, "Label"),
    h("input", { id: `new-block-label-${n}`, name: "label", value: label }),
    h("label", { for: `new-block-value-${n}` }, "Value"),
    h("textarea", { id: `new-block-value-${n}`, name: "value", rows: 2 }, value));
}

/** Open the dialog; ``done(agent)`` runs once the agent exists. */
export async function openCreate(done) {
  const dialog = document.getElementById("create");
  const [models, tools] = await Promise.all([
    guard(() => api("GET", "/v1/models")), guard(() => api("GET", "/v1/tools", undefined, { limit: 200 }))]);
  const blocks = h("div", {}, blockRow("persona", "I am a helpful assistant."), blockRow("human", ""));
  const form = h("form", { method: "dialog" },
    h("h2", { id: "create-title" }, "New agent"),
    h("label", { for: "new-name" }, "Name"), h("input", { id: "new-name", name: "name", required: true }),
    h("label", { for: "new-model" }, "Model"),
    h("input", { id: "new-model", name: "model", list: "models", value: models?.[0]?.handle ?? "" }),
    h("datalist", { id: "models" }, (models || []).map((m) => h("option", { value: m.handle }))),
    h("label", { for: "new-type" }, "Agent type"),
    h("select", { id: "new-type", name: "agent_type" }, TYPES.map(([v, l]) => h("option", { value: v }, l))),
    h("label", { for: "new-system" }, "System prompt (empty: the default)"),
    h("textarea", { id: "new-system", name: "system", rows: 3 }),
    blocks,
    h("button", { type: "button", onclick: () => blocks.append(blockRow()) }, "Add a block"),
    h("fieldset", {}, h("legend", {}, "Tools"),
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "base", checked: true }),
        "Memory tools (the base set)"),
      (tools || []).filter((t) => !t.tool_type.startsWith("letta")).map((t) => h("label", { class: "check" },
        h("input", { type: "checkbox", name: "tool", value: t.name }), t.name))),
    h("div", { class: "actions" },
      h("button", { type: "submit", value: "create" }, "Create"),
      h("button", { type: "button", onclick: () => dialog.close() }, "Cancel")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const data = new FormData(form);
    const body = {
      name: data.get("name"), model: data.get("model") || undefined,
      system: data.get("system") || undefined, agent_type: data.get("agent_type"),
      include_base_tools: data.get("base") === "on",
      tools: data.getAll("tool"),
      memory_blocks: [...blocks.querySelectorAll(".block-row")]
        .map((row) => ({ label: row.querySelector("[name=label]").value.trim(),
          value: row.querySelector("[name=value]").value }))
        .filter((b) => b.label),
    };
    const agent = await guard(() => api("POST", "/v1/agents", body));
    if (!agent) return;
    dialog.close();
    say(`Created ${agent.name}`);
    await done(agent);
  });
  clear(dialog, form);
  dialog.showModal();
  document.getElementById("new-name").focus();
}
