// The agent's settings edited: name, model (those the server can call), model settings,
// system prompt, tags, tools attached or detached with approval per tool, and tool rules;
// saved with one PATCH of what changed, the server's refusals shown at their fields.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { clearErrors, field, fieldError, showRefusal } from "./fields.js";
import { readRules, ruleField, ruleRow } from "./rules.js";
import { loadAgents } from "./agents.js";
import { choose, current } from "./app.js";

const PLACES = {
  name: "set-name", model: "set-model", context_window_limit: "set-context", system: "set-system",
  "model_settings.temperature": "set-temperature", "model_settings.max_output_tokens": "set-max-tokens",
  "model_settings.parallel_tool_calls": "set-parallel",
  tags: "set-tags", tool_ids: "set-tools", tool_rules: "set-rules",
};

function toolRows(all, agent) {
  const attached = new Set((agent.tools ?? []).map((t) => t.id));
  const asks = new Set((agent.tool_rules ?? []).filter((r) => r.type === "requires_approval").map((r) => r.tool_name));
  return h("table", { class: "tool-table" },
    h("caption", {}, "Tools"),
    h("tr", {}, h("th", { scope: "col" }, "Tool"), h("th", { scope: "col" }, "Attached"),
      h("th", { scope: "col" }, "Ask for approval")),
    all.map((t) => h("tr", {}, h("th", { scope: "row" }, h("code", {}, t.name)),
      h("td", {}, h("input", { type: "checkbox", name: "attached", value: t.id, "data-name": t.name,
        checked: attached.has(t.id), "aria-label": `Attach ${t.name}` })),
      h("td", {}, h("input", { type: "checkbox", name: "approval", value: t.name,
        checked: asks.has(t.name), "aria-label": `Ask before ${t.name} runs` })))));
}

export async function settingsView(panel, agent) {
  agent = current() ?? agent;
  const [models, listed] = await Promise.all([guard(() => api("GET", "/v1/models")),
    guard(() => api("GET", "/v1/tools", undefined, { limit: 200 }))]);
  const all = [...new Map([...(listed ?? []), ...(agent.tools ?? [])].map((t) => [t.id, t])).values()]
    .sort((a, b) => a.name.localeCompare(b.name));
  const handles = [...new Set([agent.model, ...(models ?? []).map((m) => m.handle)].filter(Boolean))];
  const sampling = agent.model_settings ?? {};
  const was = {
    name: agent.name, model: agent.model, system: agent.system ?? "", tags: (agent.tags ?? []).join(", "),
    context: String(agent.llm_config?.context_window ?? ""),
    temperature: String(sampling.temperature ?? agent.llm_config?.temperature ?? ""),
    maxTokens: String(sampling.max_output_tokens ?? agent.llm_config?.max_tokens ?? ""),
    parallel: Boolean(sampling.parallel_tool_calls ?? agent.llm_config?.parallel_tool_calls),
  };
  const input = (id, value, extra = {}) => h("input", { id, value, ...extra });
  const rules = h("div", { id: "set-rules", tabindex: "-1" },
    (agent.tool_rules ?? []).filter((r) => r.type !== "requires_approval").map((r) => ruleRow(r, all.map((t) => t.name))));
  const problem = h("div", { class: "form-error", role: "alert", tabindex: "-1", hidden: true });
  const form = h("form", { class: "settings-form", novalidate: true, "aria-labelledby": "settings-title" },
    h("h3", { id: "settings-title" }, "Settings"), problem,
    field("Name", input("set-name", was.name, { required: true })),
    field("Model", h("select", { id: "set-model" }, handles.map((m) => h("option", { value: m, selected: m === agent.model }, m)))),
    h("p", { class: "muted" }, `Agent type: ${agent.agent_type} (fixed when the agent is made)`),
    h("div", { class: "grid3" },
      field("Context window (tokens)", input("set-context", was.context, { type: "number", min: "1" })),
      field("Temperature", input("set-temperature", was.temperature, { type: "number", step: "0.1" })),
      field("Most output tokens", input("set-max-tokens", was.maxTokens, { type: "number", min: "1" }))),
    h("div", { class: "check" }, h("input", { type: "checkbox", id: "set-parallel", checked: was.parallel }),
      h("label", { for: "set-parallel" }, "Several tool calls in one step (parallel tool calls)")),
    h("p", { class: "field-error", id: "set-parallel-error", hidden: true }),
    field("System prompt", h("textarea", { id: "set-system", rows: 6 }, was.system)),
    field("Tags (comma-separated)", input("set-tags", was.tags)),
    h("div", { id: "set-tools", tabindex: "-1" }, toolRows(all, agent)),
    h("p", { class: "field-error", id: "set-tools-error", hidden: true }),
    h("h4", {}, "Tool rules"), rules, h("p", { class: "field-error", id: "set-rules-error", hidden: true }),
    h("button", { type: "button", onclick: () => rules.append(ruleRow({ type: "exit_loop" }, all.map((t) => t.name))) },
      "Add a rule"),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Save settings")));

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    problem.hidden = true;
    const value = (id) => form.querySelector(`#${id}`).value;
    let ruleList;
    try { ruleList = readRules(rules); } catch (wrong) {
      fieldError(form, wrong.id, wrong.message, problem);
      say(wrong.message, true);
      form.querySelector(`#${wrong.id}`)?.focus();
      return;
    }
    const boxes = (name) => [...form.querySelectorAll(`input[name=${name}]`)];
    const approvals = boxes("approval").filter((b) => b.checked).map((b) => ({ type: "requires_approval", tool_name: b.value }));
    const body = { tool_ids: boxes("attached").filter((b) => b.checked).map((b) => b.value),
      tool_rules: [...ruleList, ...approvals] };
    if (value("set-name") !== was.name) body.name = value("set-name");
    if (value("set-model") !== was.model) body.model = value("set-model");
    if (value("set-system") !== was.system) body.system = value("set-system");
    if (value("set-tags") !== was.tags) body.tags = value("set-tags").split(",").map((t) => t.trim()).filter(Boolean);
    if (value("set-context") !== was.context) body.context_window_limit = Number(value("set-context"));
    const number = (text) => (text.trim() === "" ? null : Number(text));
    const parallel = form.querySelector("#set-parallel").checked;
    if (value("set-temperature") !== was.temperature || value("set-max-tokens") !== was.maxTokens
        || parallel !== was.parallel) {  // the server takes the model settings as a whole
      body.model_settings = { temperature: number(value("set-temperature")),
        max_output_tokens: number(value("set-max-tokens")), parallel_tool_calls: parallel };
    }
    try {
      await api("PATCH", `/v1/agents/${agent.id}`, body);
    } catch (error) {
      say(error.message, true);
      const locate = (path) => (path.startsWith("tool_rules.") ? ruleField(rules, path) : null)
        ?? PLACES[path] ?? PLACES[path.split(".")[0]] ?? null;
      showRefusal(form, error, locate, problem);
      return;
    }
    if (body.name) await loadAgents();
    await choose(agent.id);  // the header, the side and this view drawn again
    say(`Saved the settings of ${value("set-name")}`);
  });
  clear(panel, form);
}
