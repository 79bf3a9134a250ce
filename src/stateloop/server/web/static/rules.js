// Tool rules edited as Letta has them: one row a rule, its kind picking the fields it needs,
// each checked before the save (the server checks again and its refusals land on the row).
// Approval (``requires_approval``) is asked per tool in the settings, not here.

import { h } from "./dom.js";
import { field } from "./fields.js";

export const KINDS = {
  run_first: "Run first",
  exit_loop: "Ends the run",
  continue_loop: "Continues the run",
  constrain_child_tools: "Only these tools next",
  parent_last_tool: "Only after these tools",
  conditional: "Next tool by output",
  max_count_per_step: "At most N calls per step",
  required_before_exit: "Required before the run ends",
};

let made = 0;  // numbers each row's fields apart

/** The extra fields a kind needs, filled from ``rule``. */
function extras(n, kind, rule) {
  const list = (rule.children ?? []).join(", ");
  if (kind === "constrain_child_tools" || kind === "parent_last_tool") {
    return field("Tools (comma-separated)", h("input", { id: `rule-${n}-children`, name: "children", value: list }));
  }
  if (kind === "max_count_per_step") {
    return field("Most calls per step", h("input", { id: `rule-${n}-max`, name: "max", type: "number",
      min: "0", step: "1", value: String(rule.max_count_limit ?? 1) }));
  }
  if (kind !== "conditional") return null;
  return [
    field("Output to next tool (JSON object)", h("textarea", { id: `rule-${n}-mapping`, name: "mapping", rows: 2 },
      JSON.stringify(rule.child_output_mapping ?? {}))),
    field("Default next tool", h("input", { id: `rule-${n}-default`, name: "default", value: rule.default_child ?? "" })),
    h("div", { class: "check" }, h("input", { type: "checkbox", id: `rule-${n}-require`, name: "require",
      checked: !!rule.require_output_mapping }), h("label", { for: `rule-${n}-require` }, "An unmapped output is an error")),
  ];
}

/** A row for ``rule`` over ``tools`` (names). */
export function ruleRow(rule, tools) {
  const n = ++made;
  const kind = h("select", { id: `rule-${n}-kind`, name: "kind" },
    Object.entries(KINDS).map(([k, label]) => h("option", { value: k, selected: k === rule.type }, label)));
  const names = new Set([...tools, rule.tool_name].filter(Boolean));
  const tool = h("select", { id: `rule-${n}-tool`, name: "tool" },
    [...names].map((t) => h("option", { value: t, selected: t === rule.tool_name }, t)));
  const more = h("div", {}, extras(n, rule.type, rule));
  kind.addEventListener("change", () => more.replaceChildren(...[extras(n, kind.value, {})].flat().filter(Boolean)));
  const row = h("fieldset", { class: "rule", "data-n": String(n) }, h("legend", {}, `Rule ${n}`),
    field("Kind", kind), field("Tool", tool), more,
    h("button", { type: "button", class: "danger", onclick: () => row.remove() }, `Remove rule ${n}`));
  return row;
}

/** The rules the rows say, or throws ``{id, message}`` naming the first field that is wrong. */
export function readRules(container) {
  return [...container.querySelectorAll("fieldset.rule")].map((row) => {
    const get = (name) => row.querySelector(`[name=${name}]`);
    const n = row.dataset.n;
    const rule = { type: get("kind").value, tool_name: get("tool").value };
    if (!rule.tool_name) throw { id: `rule-${n}-tool`, message: "Choose a tool (attach one first)" };
    if (rule.type === "constrain_child_tools" || rule.type === "parent_last_tool") {
      rule.children = get("children").value.split(",").map((s) => s.trim()).filter(Boolean);
      if (!rule.children.length) throw { id: `rule-${n}-children`, message: "Name at least one tool" };
    } else if (rule.type === "max_count_per_step") {
      const max = Number(get("max").value);
      if (!Number.isInteger(max) || max < 0) throw { id: `rule-${n}-max`, message: "A whole number, 0 or more" };
      rule.max_count_limit = max;
    } else if (rule.type === "conditional") {
      let mapping;
      try { mapping = JSON.parse(get("mapping").value || "{}"); } catch { mapping = null; }
      if (!mapping || typeof mapping !== "object" || Array.isArray(mapping)
          || !Object.values(mapping).every((v) => typeof v === "string" && v)) {
        throw { id: `rule-${n}-mapping`, message: 'A JSON object from output to tool name, e.g. {"yes": "send"}' };
      }
      rule.child_output_mapping = mapping;
      rule.default_child = get("default").value.trim() || null;
      rule.require_output_mapping = get("require").checked;
    }
    return rule;
  });
}

/** The row's field a server path (``tool_rules.2.children``) points at, by the rule's place. */
export function ruleField(container, path) {
  const [, index, key] = path.split(".");
  const row = container.querySelectorAll("fieldset.rule")[Number(index)];
  if (!row) return null;
  const n = row.dataset.n;
  const names = { children: "children", max_count_limit: "max", child_output_mapping: "mapping",
    default_child: "default", type: "kind" };
  return `rule-${n}-${names[key] ?? "tool"}`;
}
