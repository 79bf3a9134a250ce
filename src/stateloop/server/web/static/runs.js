// Runs and steps: each run's status, stop reason and usage; opened, a timeline of its steps
// (its time, and model latency and tool time where measured; tokens) and, for a failed run, its
// error.

import { api } from "./api.js";
import { clear, guard, h, ms } from "./dom.js";

async function stepRow(step, metrics, longest) {
  const messages = await guard(() => api("GET", `/v1/steps/${step.id}/messages`));
  // A figure the server did not measure (null) is left out, never shown as 0.
  const model = metrics?.llm_request_ns ?? null;
  const ran = (messages || []).some((m) => m.message_type === "tool_return_message");
  // A step that called no tool has no tool time to show (the server says 0).
  const tool = ran || metrics?.tool_execution_ns ? metrics?.tool_execution_ns ?? null : null;
  const total = metrics?.step_ns ?? (model !== null && tool !== null ? model + tool : null);
  const figures = [total !== null ? ms(total) : null, model !== null ? `model ${ms(model)}` : null,
    tool !== null ? `tools ${ms(tool)}` : null].filter(Boolean).join(" · ");
  const width = (ns) => `${Math.max(0.5, (100 * ns) / (longest || 1))}%`;
  const tools = (messages || []).filter((m) => m.message_type === "tool_return_message")
    .map((m) => `${m.name} (${m.status})`);
  const split = model !== null || tool !== null;
  return h("li", { class: "step" },
    h("div", { class: "step-head" }, h("code", {}, step.id),
      figures ? h("span", { class: "step-time" }, figures) : null,
      h("span", {}, `${step.prompt_tokens ?? 0} in / ${step.completion_tokens ?? 0} out tokens`),
      step.status !== "success" ? h("span", { class: "bad" }, step.status) : null),
    total !== null || split ? h("div", { class: "timeline", role: "img", "aria-label": figures },
      split && model !== null ? h("span", { class: "seg model", style: `width:${width(model)}` }) : null,
      split && tool ? h("span", { class: "seg tool", style: `width:${width(tool)}` }) : null,
      split ? null : h("span", { class: "seg model", style: `width:${width(total)}` })) : null,
    tools.length ? h("p", { class: "muted" }, `Tools: ${tools.join(", ")}`) : null,
    step.error_data ? h("pre", { class: "bad" }, JSON.stringify(step.error_data, null, 2)) : null);
}

async function details(run, body) {
  const [steps, usage, timed] = await Promise.all([
    guard(() => api("GET", `/v1/runs/${run.id}/steps`)), guard(() => api("GET", `/v1/runs/${run.id}/usage`)),
    guard(() => api("GET", `/v1/runs/${run.id}`))]);
  const metrics = await Promise.all((steps || []).map((s) => guard(() => api("GET", `/v1/steps/${s.id}/metrics`))));
  const longest = Math.max(1, ...metrics.map((m) => m?.step_ns ?? 0));
  const rows = await Promise.all((steps || []).map((s, i) => stepRow(s, metrics[i], longest)));
  clear(body,
    run.metadata?.error ? h("div", { class: "run-error", role: "alert" }, h("strong", {}, "Error: "),
      h("pre", {}, typeof run.metadata.error === "string" ? run.metadata.error : JSON.stringify(run.metadata.error, null, 2))) : null,
    usage ? h("p", {}, `Usage: ${usage.total_tokens} tokens (${usage.prompt_tokens} in, ${usage.completion_tokens} out), ${usage.step_count ?? rows.length} steps`) : null,
    timed?.ttft_ns != null ? h("p", { class: "ttft" }, `First token after ${ms(timed.ttft_ns)}`) : null,
    h("ol", { class: "steps", "aria-label": `Steps of ${run.id}` }, rows.length ? rows : h("li", { class: "muted" }, "No steps")));
}

export async function runsView(panel, agent) {
  const runs = await guard(() => api("GET", "/v1/runs", undefined, { agent_id: agent.id, limit: 50 })) || [];
  const items = runs.map((run) => {
    const body = h("div", { class: "run-body" }, "Loading…");
    const el = h("details", { class: `run ${run.status}` },
      h("summary", {}, h("code", {}, run.id), h("span", { class: `status ${run.status}` }, run.status),
        h("span", {}, run.stop_reason ?? ""), h("span", { class: "muted" }, ms(run.total_duration_ns)),
        h("span", { class: "muted" }, new Date(run.created_at).toLocaleTimeString())),
      body);
    el.addEventListener("toggle", () => { if (el.open) details(run, body); });
    return el;
  });
  clear(panel, h("h3", {}, "Runs"), items.length ? items : h("p", { class: "muted" }, "No runs yet"));
}
