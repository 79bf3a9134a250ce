// Chat: the history a page at a time with what each run left (its stop reason, its error, the
// approvals given), a run streamed as it happens (reasoning, tool calls and their results, the
// answer), cancel, steer, approvals answered inline, and each run's stop reason and usage.

import { api, stream } from "./api.js";
import { clear, guard, h, pretty, say } from "./dom.js";
import { refreshAgent, current } from "./app.js";
import { chooseThread, oldestFirst, routes, threadOf } from "./threads.js";

function text(content) {
  if (typeof content === "string") return content;
  return (content || []).map((part) => part.text ?? "").join("");
}

/** Renders frames into ``log``: chunks of one message (same otid) grow one element. */
class Transcript {
  constructor(log) { this.log = log; this.items = new Map(); this.calls = new Map(); }

  add(frame) {
    const kind = frame.message_type;
    if (kind === "user_message") this.bubble(frame, "You", text(frame.content), "user");
    else if (kind === "assistant_message") this.bubble(frame, "Assistant", text(frame.content), "assistant");
    else if (kind === "reasoning_message") this.bubble(frame, "Reasoning", frame.reasoning, "reasoning");
    else if (kind === "tool_call_message" || kind === "approval_request_message") {
      for (const call of frame.tool_calls || [frame.tool_call]) this.call(call, kind);
    } else if (kind === "tool_return_message") {
      for (const result of frame.tool_returns || [frame]) this.result(result);  // one per call
    }
    else if (kind === "approval_response_message") {
      for (const decision of frame.approvals || []) this.decided(decision);
    }
    else if (kind === "error_message") this.note(`Error: ${frame.message || frame.detail || ""}`, "error");
    else return;
    this.log.scrollTop = this.log.scrollHeight;
  }

  bubble(frame, who, chunk, cls) {
    const key = frame.otid || frame.id;
    let body = this.items.get(key);
    if (!body) {
      body = h("div", { class: "body" });
      this.items.set(key, body);
      this.log.append(h("article", { class: `msg ${cls}`, "aria-label": who }, h("h3", {}, who), body));
    }
    body.textContent += chunk ?? "";
  }

  call(call, kind) {
    let card = this.calls.get(call.tool_call_id);
    if (!card) {
      card = { args: h("pre", { class: "args" }), result: h("div", { class: "result" }), raw: "" };
      const title = kind === "approval_request_message" ? "Approval requested" : "Tool call";
      card.el = h("article", { class: "msg tool", "data-call": call.tool_call_id, "aria-label": `${title}: ${call.name}` },
        h("h3", {}, `${title}: `, h("code", {}, call.name)), card.args, card.result);
      this.calls.set(call.tool_call_id, card);
      this.log.append(card.el);
    }
    card.raw += call.arguments || "";
    card.args.textContent = pretty(card.raw);
  }

  result(frame) {
    const card = this.calls.get(frame.tool_call_id);
    const out = h("div", {}, h("strong", { class: frame.status === "error" ? "bad" : "good" },
      `Result (${frame.status})`), h("pre", {}, text(frame.tool_return)));
    if (card) clear(card.result, out);
    else this.log.append(h("article", { class: "msg tool" }, out));
  }

  note(message, cls = "") { this.log.append(h("p", { class: `note ${cls}` }, message)); }

  /** A stored decision on a call: on the call's card, as it read when it was made. */
  decided(decision) {
    const said = decision.type === "tool" ? `Run by the client (${decision.status})`
      : decision.approve ? "Approved" : `Denied${decision.reason ? `: ${decision.reason}` : ""}`;
    const note = h("p", { class: "note decision" }, said);
    const card = this.calls.get(decision.tool_call_id);
    if (card) card.el.append(note); else this.log.append(note);
  }

  /** Stored frames, each run's stop reason (and error) after its last frame; ``runs`` maps
   * run ids to runs, ``goesOn`` is the run the frames after these (already shown) belong to. */
  replay(frames, runs, goesOn) {
    let open = null;
    const close = () => { if (open && runs.has(open)) this.stopped(runs.get(open)); };
    for (const frame of frames) {
      if (frame.run_id && frame.run_id !== open) { close(); open = frame.run_id; }
      this.add(frame);
    }
    if (open !== goesOn) close();
  }

  stopped(run) {
    if (!run.stop_reason) return;  // still going
    const error = run.metadata?.error;
    this.note(`Run ${run.id} stopped: ${run.stop_reason}`, `stop ${run.stop_reason}`);
    if (error) this.note(`Error: ${typeof error === "string" ? error : error.message ?? JSON.stringify(error)}`, "error");
  }

  /** Approve / deny (with a reason) each call the agent waits on; ``send`` gets the decisions. */
  approvals(pending, send) {
    const calls = pending.tool_calls || [pending.tool_call];
    const decisions = new Map();
    for (const call of calls) {
      this.call({ ...call, arguments: "" }, "approval_request_message");
      const card = this.calls.get(call.tool_call_id);
      const reason = h("input", { id: `reason-${call.tool_call_id}`, placeholder: "why not (optional)" });
      const decide = (approve) => {
        decisions.set(call.tool_call_id, { type: "approval", tool_call_id: call.tool_call_id, approve,
          reason: approve ? undefined : reason.value || undefined });
        clear(box, h("p", { class: "note" }, approve ? "Approved" : `Denied${reason.value ? `: ${reason.value}` : ""}`));
        if (decisions.size === calls.length) send([...decisions.values()]);
      };
      const box = h("div", { class: "approval" },
        h("button", { type: "button", class: "approve", onclick: () => decide(true) }, "Approve"),
        h("label", { for: reason.id }, "Reason"), reason,
        h("button", { type: "button", class: "danger", onclick: () => decide(false) }, "Deny"));
      card.el.append(box);
    }
    this.log.querySelector(".approval button")?.focus();
  }
}

// Each thread's transcript, kept while its run streams: a view shown again (after another tab
// or agent) goes on showing that run.
const sessions = new Map();

function sessionFor(agentId, thread) {
  const key = `${agentId}:${thread}`;
  const kept = sessions.get(key);
  if (kept?.running) return kept;
  const log = h("div", { class: "log", role: "log", "aria-label": "Conversation", tabindex: "0" });
  const session = { agentId, thread, routes: routes(agentId, thread), log, transcript: new Transcript(log),
    running: false, changed() {} };
  sessions.set(key, session);
  return session;
}

function runNote(stop, usage) {
  const runIds = usage?.run_ids?.join(", ") ?? "";
  return `Run ${runIds} stopped: ${stop.stop_reason}` + (usage
    ? ` · ${usage.step_count} steps · ${usage.total_tokens} tokens (${usage.prompt_tokens} in, ${usage.completion_tokens} out)` : "");
}

/** Stream one run of the session's agent into its transcript. */
async function run(session, body) {
  const { agentId, transcript } = session;
  session.running = true;
  session.changed();
  let stop = null, usage = null, asked = null;
  try {
    await stream(session.routes.stream, { ...body, ...session.routes.extra, stream_tokens: true }, (frame) => {
      if (frame.message_type === "approval_request_message") {  // a conversation's pending calls
        const calls = new Map((asked?.tool_calls ?? []).map((c) => [c.tool_call_id, c]));
        for (const c of frame.tool_calls || [frame.tool_call]) calls.set(c.tool_call_id, c);
        asked = { tool_calls: [...calls.values()] };
      }
      if (frame.message_type === "stop_reason") stop = frame;
      else if (frame.message_type === "usage_statistics") usage = frame;
      else transcript.add(frame);
      if (frame.message_type === "tool_return_message") refreshAgent();  // a step ended
    });
  } catch (error) {
    transcript.note(error.message, "error");
  } finally {
    session.running = false;
    session.changed();
  }
  if (stop) transcript.note(runNote(stop, usage), `stop ${stop.stop_reason}`);
  await refreshAgent();
  const waiting = session.thread ? asked : current()?.pending_approval;
  if (stop?.stop_reason === "requires_approval" && waiting && current().id === agentId) {
    transcript.approvals(waiting, answerer(session));
  }
}

function answerer(session) {
  return (decisions) => run(session, { messages: [{ type: "approval", approvals: decisions }] });
}

export const PAGE = 50;  // messages drawn at a time: the newest first, earlier ones on demand

/** The runs of ``frames`` not yet in ``known``: the agent's latest runs in one call, any
 * older one on its own. */
async function runsOf(agentId, frames, known) {
  const wanted = new Set(frames.map((f) => f.run_id).filter((id) => id && !known.has(id)));
  if (!wanted.size) return known;
  const latest = await guard(() => api("GET", "/v1/runs", undefined, { agent_id: agentId, limit: 100 })) || [];
  for (const run of latest) known.set(run.id, run);
  await Promise.all([...wanted].filter((id) => !known.has(id)).map(async (id) => {
    const run = await guard(() => api("GET", `/v1/runs/${id}`));
    if (run) known.set(id, run);
  }));
  return known;
}

/** The page of history before what the log shows, drawn above it with a button for the next. */
async function earlier(session, agentId) {
  const { log, transcript } = session;
  const oldest = session.oldest;
  const listed = await guard(() => api("GET", session.routes.list, undefined,
    { limit: PAGE, before: oldest })) || [];
  const frames = session.routes.newestFirst ? oldestFirst(listed) : listed;
  session.runs = await runsOf(agentId, frames, session.runs ?? new Map());
  const page = new Transcript(h("div"));
  page.calls = transcript.calls;  // a result on this page finds its call on an earlier one
  page.replay(frames, session.runs, session.firstRun);
  const more = log.querySelector(".earlier");
  const top = more ? more.nextSibling : log.firstChild;
  const height = log.scrollHeight;  // before the page goes in
  for (const child of [...page.log.childNodes]) log.insertBefore(child, top);
  more?.remove();
  if (frames.length) {
    session.oldest = frames.find((f) => f.message_type !== "approval_response_message")?.id;
    session.firstRun = frames[0].run_id;
  }
  if (frames.length === PAGE) {
    log.prepend(h("button", { type: "button", class: "earlier",
      onclick: () => earlier(session, agentId) }, "Load earlier messages"));
  }
  // the first page: the newest in view; an earlier one: what was in view stays there
  log.scrollTop = oldest ? log.scrollTop + log.scrollHeight - height : log.scrollHeight;
  return frames;
}

/** The calls a listing shows as still waiting for approval (it lists only those so), or null. */
function waitingIn(frames) {
  const calls = frames.filter((f) => f.message_type === "approval_request_message")
    .flatMap((f) => f.tool_calls || [f.tool_call]);
  return calls.length ? { tool_calls: calls } : null;
}

/** Which thread to talk in: the agent's own history or one of its conversations. */
async function threadPicker(panel, agent, thread) {
  const pick = h("select", { id: "chat-thread", onchange: () => { chooseThread(agent.id, pick.value); chatView(panel, agent); } },
    h("option", { value: "" }, "The agent's own history"));
  const listed = await guard(() => api("GET", "/v1/conversations", undefined, { agent_id: agent.id, limit: 50 })) ?? [];
  for (const c of [...listed, ...(thread && !listed.some((c) => c.id === thread) ? [{ id: thread }] : [])]) {
    pick.append(h("option", { value: c.id, selected: c.id === thread }, `Conversation …${c.id.slice(-8)}`));
  }
  return h("div", { class: "row" }, h("label", { for: "chat-thread" }, "Thread"), pick);
}

export async function chatView(panel, agent) {
  const thread = threadOf(agent.id);
  const session = sessionFor(agent.id, thread);
  const { transcript } = session;
  const resumed = session.running;
  const input = h("textarea", { id: "chat-input", rows: 2,
    placeholder: "Enter sends (steers while a run goes), Shift+Enter a new line, Esc cancels" });
  const send = h("button", { type: "submit" }, "Send");
  const steer = h("button", { type: "button", onclick: () => doSteer() }, "Steer");
  const cancel = h("button", { type: "button", class: "danger", onclick: () => doCancel() }, "Cancel run");
  const form = h("form", { class: "composer" }, h("label", { for: "chat-input" }, "Message"),
    input, h("div", { class: "actions" }, send, session.routes.steer ? steer : null, cancel));
  const picker = h("div", {});
  clear(panel, picker, session.log, form);
  threadPicker(panel, agent, thread).then((el) => picker.replaceChildren(el));

  const busy = () => session.running;
  session.changed = () => { send.disabled = busy(); steer.disabled = !busy(); cancel.disabled = !busy(); };
  session.changed();

  async function doSteer() {
    const content = input.value.trim();
    if (!content) return;
    input.value = "";
    const answer = await guard(() => api("POST", session.routes.steer, { content }));
    if (answer) transcript.note(`Steered (${answer.status}): ${content}`);
  }

  async function doCancel() {
    if (!busy()) return;
    await guard(() => api("POST", session.routes.cancel, {}));
    say("Cancel requested");
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (busy()) { if (session.routes.steer) doSteer(); return; }
    const content = input.value.trim();
    if (!content) return;
    input.value = "";
    transcript.bubble({ otid: `sent-${Date.now()}` }, "You", content, "user");
    run(session, { input: content });
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); }
    if (e.key === "Escape") { e.preventDefault(); doCancel(); }
  });
  input.focus();
  if (resumed) return;

  // the history last: the composer works while it loads
  const frames = await earlier(session, agent.id);
  const pending = thread ? waitingIn(frames) : current()?.pending_approval;
  if (pending && !busy()) transcript.approvals(pending, answerer(session));
}
