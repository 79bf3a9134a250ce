// The agent's conversations: its threads listed, one opened (its messages, a message sent to
// it), started, forked and deleted.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";

function text(content) {
  return typeof content === "string" ? content : (content || []).map((p) => p.text ?? "").join("");
}

function line(frame) {
  const kind = frame.message_type;
  const said = kind === "tool_call_message" ? `${frame.tool_call?.name}(${frame.tool_call?.arguments ?? ""})`
    : kind === "tool_return_message" ? frame.tool_return : kind === "reasoning_message" ? frame.reasoning
      : text(frame.content);
  return h("li", { class: `ctx-msg role-${kind.replace("_message", "")}` },
    h("strong", {}, kind.replace("_message", "").replace("_", " ")), " ", h("span", {}, said ?? ""));
}

async function opened(conversation, box) {
  const log = h("ol", { class: "ctx-messages", "aria-label": `Messages of ${conversation.id}` });
  const show = async () => {
    const frames = await guard(() => api("GET", `/v1/conversations/${conversation.id}/messages`, undefined, { limit: 100 })) ?? [];
    const shown = frames.filter((f) => f.message_type !== "system_message");
    clear(log, shown.length ? shown.map(line) : h("li", { class: "muted" }, "No messages yet"));
  };
  const input = h("input", { id: "conv-input" });
  const send = async (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    const body = { input: input.value.trim(), streaming: false };
    input.value = "";
    if (await guard(() => api("POST", `/v1/conversations/${conversation.id}/messages`, body))) await show();
  };
  clear(box, h("h4", {}, `Conversation ${conversation.id}`), log,
    h("form", { class: "row", onsubmit: send }, h("label", { for: "conv-input" }, "Message to this conversation"),
      input, h("button", { type: "submit" }, "Send to conversation")));
  await show();
}

export async function conversationsView(panel, agent) {
  const redraw = () => conversationsView(panel, agent);
  const listed = await guard(() => api("GET", "/v1/conversations", undefined, { agent_id: agent.id, limit: 50 })) ?? [];
  const box = h("div", { class: "card", id: "conversation-open" });
  const start = async () => {
    const made = await guard(() => api("POST", "/v1/conversations", {}, { agent_id: agent.id }));
    if (made) { say(`Started ${made.id}`); await redraw(); }
  };
  const rows = listed.map((c) => h("li", {},
    h("span", {}, h("code", {}, c.id), " ", h("small", { class: "muted" },
      `${c.summary ?? ""} ${c.created_at ? new Date(c.created_at).toLocaleString() : ""}`)),
    h("span", { class: "actions" },
      h("button", { type: "button", "aria-label": `Open ${c.id}`, onclick: () => opened(c, box) }, "Open"),
      h("button", { type: "button", "aria-label": `Fork ${c.id}`, onclick: async () => {
        const fork = await guard(() => api("POST", `/v1/conversations/${c.id}/fork`));
        if (fork) { say(`Forked ${c.id} as ${fork.id}`); await redraw(); }
      } }, "Fork"),
      h("button", { type: "button", class: "danger", "aria-label": `Delete ${c.id}`, onclick: async () => {
        if (!confirm(`Delete conversation ${c.id}?`)) return;
        if (await guard(() => api("DELETE", `/v1/conversations/${c.id}`)) === undefined) return;
        say(`Deleted ${c.id}`);
        await redraw();
      } }, "Delete"))));
  clear(panel, h("h3", {}, "Conversations"),
    h("p", { class: "muted" }, "Threads of this agent beside its own history: each has its messages and context, and shares the agent's memory."),
    h("button", { type: "button", onclick: start }, "Start a conversation"),
    h("ul", { class: "passages", "aria-label": "Conversations" }, rows.length ? rows : h("li", { class: "muted" }, "No conversations yet")),
    box);
}
