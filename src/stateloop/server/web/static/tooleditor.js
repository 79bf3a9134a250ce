// The tool editor: a Python tool's source, the JSON schema the server reads from it, a run
// with arguments in the server's sandbox (``/v1/tools/run``: nothing is stored) showing its
// output and errors, and a save that attaches it to the agent.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { clearErrors, field, showRefusal } from "./fields.js";
import { refreshAgent } from "./app.js";

const STARTER = `def roll_dice(sides: int, times: int = 1) -> str:
    """Roll a die and add up the throws.

    Args:
        sides: How many sides the die has.
        times: How many throws.
    """
    import random

    return str(sum(random.randint(1, sides) for _ in range(times)))
`;

const EXAMPLES = { string: "", integer: 1, number: 1, boolean: false, array: [], object: {} };

/** Arguments to start from: each parameter with a value of its type. */
function sampleArgs(schema) {
  const props = schema?.parameters?.properties ?? {};
  return Object.fromEntries(Object.entries(props).map(([k, p]) => [k, EXAMPLES[p.type] ?? null]));
}

export async function toolEditorView(panel, agent) {
  const custom = (await guard(() => api("GET", "/v1/tools", undefined, { limit: 200 })) ?? [])
    .filter((t) => t.tool_type === "custom" && t.source_code);
  const source = h("textarea", { id: "te-source", rows: 14, spellcheck: "false", class: "code" }, STARTER);
  const args = h("textarea", { id: "te-args", rows: 3, spellcheck: "false", class: "code" }, "{}");
  const schemaOut = h("pre", { id: "te-schema", tabindex: "0", "aria-label": "JSON schema" }, "");
  const output = h("div", { id: "te-output", "aria-live": "polite" });
  const problem = h("div", { class: "form-error", role: "alert", tabindex: "-1", hidden: true });
  const open = h("select", { id: "te-open" }, h("option", { value: "" }, "A new tool"),
    custom.map((t) => h("option", { value: t.id }, t.name)));
  let schema = null;
  const form = h("form", { class: "tool-editor", novalidate: true, "aria-labelledby": "te-title" },
    h("h3", { id: "te-title" }, "Tool editor"), problem,
    field("Start from", open),
    field("Source (Python: one function, typed, with a docstring)", source),
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => generate() }, "Generate schema")),
    h("h4", {}, "JSON schema"), schemaOut,
    field("Arguments (JSON)", args),
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => run() }, "Run"),
      h("button", { type: "submit" }, `Save and attach to ${agent.name}`)),
    h("h4", {}, "Output"), output);
  const locate = (path) => ({ code: "te-source", source_code: "te-source", args: "te-args",
    args_json_schema: "te-source", json_schema: "te-source" })[path.split(".")[0]] ?? null;

  const refused = (error) => { say(error.message, true); showRefusal(form, error, locate, problem); };
  const begin = () => { clearErrors(form); clear(problem); problem.hidden = true; };

  async function generate() {
    begin();
    const before = schema?.name;
    try {
      schema = await api("POST", "/v1/tools/generate-schema", { code: source.value });
    } catch (error) { refused(error); return null; }
    schemaOut.textContent = JSON.stringify(schema, null, 2);
    const given = (() => { try { return JSON.parse(args.value); } catch { return null; } })();
    if (schema.name !== before || !given || !Object.keys(given).length) {
      args.value = JSON.stringify(sampleArgs(schema));  // another tool: its own arguments
    }
    return schema;
  }

  async function run() {
    if (!await generate()) return;
    let values;
    try { values = JSON.parse(args.value || "{}"); } catch (error) {
      refused({ detail: [{ loc: ["body", "args"], msg: `not JSON: ${error.message}` }], message: "The arguments are not JSON" });
      return;
    }
    clear(output, h("p", { class: "muted" }, "Running…"));
    let result;
    try {
      result = await api("POST", "/v1/tools/run", { source_code: source.value, args: values });
    } catch (error) { clear(output); refused(error); return; }
    const failed = result.status !== "success";
    clear(output,
      h("p", { class: failed ? "bad" : "good" }, h("strong", {}, `Status: ${result.status}`)),
      h("h5", {}, "Returned"), h("pre", { class: "te-return" }, result.tool_return ?? ""),
      result.stdout?.length ? [h("h5", {}, "Printed"), h("pre", {}, [].concat(result.stdout).join(""))] : null,
      result.stderr?.length ? [h("h5", {}, "Errors"), h("pre", { class: "bad te-stderr" }, [].concat(result.stderr).join(""))] : null);
  }

  open.addEventListener("change", () => {
    const tool = custom.find((t) => t.id === open.value);
    source.value = tool ? tool.source_code : STARTER;
    args.value = "{}";
    generate();
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!await generate()) return;
    let tool;
    try {
      tool = await api("POST", "/v1/tools", { source_code: source.value });
    } catch (error) { refused(error); return; }
    if (await guard(() => api("PATCH", `/v1/agents/${agent.id}/tools/attach/${tool.id}`)) === undefined) return;
    say(`Saved ${tool.name} and attached it to ${agent.name}`);
    await refreshAgent();
  });
  clear(panel, form);
  generate();
}
