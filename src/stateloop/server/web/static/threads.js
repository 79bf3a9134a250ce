// Where the chat talks: the agent's own history or one of its conversations, the routes each
// is listed, sent to, cancelled and steered through, and the thread chosen for each agent.

const chosen = new Map();  // agent id -> conversation id ("" is the agent's own history)

export function threadOf(agentId) { return chosen.get(agentId) || ""; }
export function chooseThread(agentId, conversationId) { chosen.set(agentId, conversationId || ""); }

export function routes(agentId, thread) {
  if (!thread) {
    const base = `/v1/agents/${agentId}/messages`;
    return { list: base, stream: `${base}/stream`, cancel: `${base}/cancel`, steer: `${base}/steer`,
      extra: {}, newestFirst: false };
  }
  const base = `/v1/conversations/${thread}`;
  return { list: `${base}/messages`, stream: `${base}/messages`, cancel: `${base}/cancel`, steer: null,
    extra: { streaming: true }, newestFirst: true };
}

/** A conversation's page (its newest message first, each message's parts in their order)
 * put oldest first, as the agent's own history reads. */
export function oldestFirst(frames) {
  const groups = [];
  for (const frame of frames) {
    if (groups.length && groups.at(-1)[0].id === frame.id) groups.at(-1).push(frame);
    else groups.push([frame]);
  }
  return groups.reverse().flat();
}
