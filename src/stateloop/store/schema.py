"""The tables, as SQLAlchemy Core objects; migrations/ creates exactly these (a test compares)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from stateloop.store.projects import creating_in

metadata = MetaData()

Json = JSON(none_as_null=True)  # PostgreSQL: JSONB via .with_variant when that dialect lands

agents = Table(
    "agents", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False),  # names repeat, as in Letta (revision 0009)
    Column("agent_type", String, nullable=False),
    Column("description", Text),
    Column("system", Text, nullable=False),
    Column("model", String),
    Column("llm_config", Json, nullable=False),
    Column("embedding_config", Json, nullable=False),
    Column("tool_rules", Json, nullable=False),
    Column("tool_names", Json, nullable=False),
    Column("metadata", Json, nullable=False),
    Column("in_context_message_ids", Json, nullable=False),
    Column("message_buffer_autoclear", Boolean, nullable=False),
    Column("enable_sleeptime", Boolean, nullable=False),
    Column("timezone", String),
    Column("extra", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # revision 0002
    Column("last_run_completion", Float),
    Column("last_run_duration_ms", Float),
    Column("last_stop_reason", String),
    Column("pending_approval", Json),
    # revision 0006: the agent's messages stored after this seq follow the list in context
    Column("in_context_after_seq", Integer, nullable=False, server_default="0"),
    # revision 0026: its messages stored, in context or not (triggers on messages keep it)
    Column("message_count", BigInteger, nullable=False, server_default="0"),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_agents_name", "name"),
    Index("ix_agents_created", "created_at", "id"),  # revision 0020: list pages
    Index("ix_agents_project", "project", "created_at", "id"),
)

agent_tags = Table(
    "agent_tags", metadata,
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("tag", String, primary_key=True),
    Index("ix_agent_tags_tag", "tag"),
)

blocks = Table(
    "blocks", metadata,
    Column("id", String, primary_key=True),
    Column("label", String, nullable=False),
    Column("value", Text, nullable=False),
    Column("limit", Integer, nullable=False),
    Column("description", Text),
    Column("read_only", Boolean, nullable=False),
    Column("hidden", Boolean),
    Column("preserve_on_migration", Boolean, nullable=False),
    Column("metadata", Json, nullable=False),
    Column("extra", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_blocks_created", "created_at", "id"),  # revision 0020: list pages
    Index("ix_blocks_project", "project", "created_at", "id"),
)

# The label is copied here so "one label per agent" is a plain unique constraint.
blocks_agents = Table(
    "blocks_agents", metadata,
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("block_id", String, ForeignKey("blocks.id", ondelete="CASCADE"), primary_key=True),
    Column("label", String, nullable=False),
    Column("position", Integer, nullable=False),
    UniqueConstraint("agent_id", "label", name="uq_blocks_agents_label"),
    Index("ix_blocks_agents_block", "block_id"),
)

# seq is the insertion order (and SQLite's rowid, which the FTS index points at).
messages = Table(
    "messages", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", String),
    Column("step_id", String),
    Column("role", String, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("token_count", Integer),
    Column("text", Text, nullable=False),  # what recall searches by default
    Column("tool_text", Text),  # tool calls and results: searched only when asked
    Column("data", Json, nullable=False),  # the message less its columns (rows.message_row)
    Column("step", Json),  # on a step's last row, the step's record (rows.step_json)
    Column("conversation_id", String),  # revision 0013: NULL in the agent's default thread
    Column("step_at", Float),  # revision 0021: on a step's last row, the step's created_at
    Index("ix_messages_agent_seq", "agent_id", "seq"),
    Index("ix_messages_conversation_seq", "conversation_id", "seq",  # revision 0022: partial
          sqlite_where=text("conversation_id IS NOT NULL"),
          postgresql_where=text("conversation_id IS NOT NULL")),
    # revision 0021: steps listed in SQL; only the rows that carry a step are indexed
    Index("ix_messages_steps", "step_at", "step_id",
          sqlite_where=text("step_at IS NOT NULL"), postgresql_where=text("step_at IS NOT NULL")),
    Index("ix_messages_agent_steps", "agent_id", "step_at", "step_id",
          sqlite_where=text("step_at IS NOT NULL"), postgresql_where=text("step_at IS NOT NULL")),
    # revision 0023: a run's and a step's messages listed in SQL
    Index("ix_messages_run_seq", "run_id", "seq",
          sqlite_where=text("run_id IS NOT NULL"), postgresql_where=text("run_id IS NOT NULL")),
    Index("ix_messages_step_seq", "step_id", "seq",
          sqlite_where=text("step_id IS NOT NULL"), postgresql_where=text("step_id IS NOT NULL")),
    sqlite_autoincrement=True,  # seq is never reused: the recall index and caches rely on it
)
# What a message is read back from (rows.message_from_row).
MESSAGE_READ = (messages.c.id, messages.c.role, messages.c.created_at, messages.c.token_count,
                messages.c.data)

runs = Table(
    "runs", metadata,
    Column("id", String, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("status", String, nullable=False),
    Column("stop_reason", String),
    Column("error", Text),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("cached_input_tokens", Integer, nullable=False),
    Column("reasoning_tokens", Integer, nullable=False),
    Column("cache_write_tokens", Integer, nullable=False),
    Column("step_count", Integer, nullable=False),
    Column("metadata", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("completed_at", Float),
    Column("first_seq", Integer, nullable=False, server_default="0"),  # revision 0006
    Index("ix_runs_agent_created", "agent_id", "created_at", "id"),  # revision 0020
    Index("ix_runs_created", "created_at", "id"),
    Index("ix_runs_status", "status"),
)

# Records of steps that wrote no message (a failed model call), and of every step stored
# before revision 0006; the others ride on their step's last message row (messages.step).
steps = Table(
    "steps", metadata,
    Column("id", String, primary_key=True),
    Column("run_id", String, ForeignKey("runs.id", ondelete="CASCADE")),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("step_index", Integer, nullable=False),
    Column("model", String),
    Column("provider", String),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("cached_input_tokens", Integer, nullable=False),
    Column("reasoning_tokens", Integer, nullable=False),
    Column("cache_write_tokens", Integer, nullable=False),
    Column("latency_ms", Float),
    Column("finish_reason", String),
    Column("error", Text),
    Column("metadata", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_steps_run", "run_id", "step_index"),
    Index("ix_steps_created", "created_at", "id"),  # revision 0021: step lists
    Index("ix_steps_agent_created", "agent_id", "created_at", "id"),
)

passages = Table(
    "passages", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    # revision 0010: a passage belongs to an archive (agents reach it through archives_agents)
    Column("archive_id", String, ForeignKey("archives.id", ondelete="CASCADE"),
           nullable=False),
    Column("text", Text, nullable=False),
    Column("embedding", LargeBinary),  # float32 little-endian; see dialect.encode_vector
    Column("embedding_model", String),
    Column("embedding_dim", Integer),
    Column("tags", Json, nullable=False),
    Column("metadata", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_passages_archive_seq", "archive_id", "seq"),
    sqlite_autoincrement=True,
)

tools = Table(
    "tools", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False, unique=True),
    Column("description", Text),
    Column("tool_type", String, nullable=False),
    Column("source_type", String),
    Column("source_code", Text),
    Column("binding", String),
    Column("json_schema", Json, nullable=False),
    Column("args_json_schema", Json),
    Column("return_char_limit", Integer),
    Column("default_requires_approval", Boolean),
    Column("enable_parallel_execution", Boolean),
    Column("tags", Json, nullable=False),
    Column("pip_requirements", Json),
    Column("npm_requirements", Json),
    Column("metadata", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# revision 0010: archival memory is an archive that agents share, as in Letta
archives = Table(
    "archives", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False),
    Column("description", Text),
    Column("vector_db_provider", String, nullable=False),
    Column("embedding_config", Json),
    Column("metadata", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_archives_name", "name"),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_archives_project", "project", "created_at", "id"),
    Index("ix_archives_created", "created_at", "id"),  # revision 0020: list pages
)

archives_agents = Table(
    "archives_agents", metadata,
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("archive_id", String, ForeignKey("archives.id", ondelete="CASCADE"),
           primary_key=True),
    Column("is_owner", Boolean, nullable=False),  # the agent's default archive
    Column("created_at", Float, nullable=False),
    Index("ix_archives_agents_archive_created", "archive_id", "created_at", "agent_id"),  # 0023
)

# revision 0012: identities (Letta's end users, orgs, ...) linked to agents and blocks. An
# identifier_key is unique per project; SQLite's NULLs are distinct in a UNIQUE constraint,
# so store/identities.py checks it in the writing transaction.
identities = Table(
    "identities", metadata,
    Column("id", String, primary_key=True),
    Column("identifier_key", String, nullable=False),
    Column("name", String, nullable=False),
    Column("identity_type", String, nullable=False),
    Column("project_id", String),
    Column("properties", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_identities_identifier_key", "identifier_key"),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_identities_project", "project", "created_at", "id"),
    Index("ix_identities_created", "created_at", "id"),  # revision 0020: list pages
)

identities_agents = Table(
    "identities_agents", metadata,
    Column("identity_id", String, ForeignKey("identities.id", ondelete="CASCADE"),
           primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Index("ix_identities_agents_agent", "agent_id"),
)

identities_blocks = Table(
    "identities_blocks", metadata,
    Column("identity_id", String, ForeignKey("identities.id", ondelete="CASCADE"),
           primary_key=True),
    Column("block_id", String, ForeignKey("blocks.id", ondelete="CASCADE"), primary_key=True),
    Index("ix_identities_blocks_block", "block_id"),
)

# Groups (revision 0011): Letta's multi-agent groups. Members keep their order; deleting an
# agent removes it from its groups, deleting a group leaves its agents.
groups = Table(
    "groups", metadata,
    Column("id", String, primary_key=True),
    Column("manager_type", String, nullable=False),
    Column("description", Text, nullable=False),
    Column("manager_agent_id", String, ForeignKey("agents.id", ondelete="SET NULL")),
    Column("max_turns", Integer),
    Column("termination_token", String),
    Column("sleeptime_agent_frequency", Integer),
    Column("turns_counter", Integer),
    Column("last_processed_message_id", String),
    Column("hidden", Boolean),
    Column("project_id", String),
    Column("metadata", Json, nullable=False),
    Column("cursors", Json, nullable=False),  # agent id -> group messages it has seen
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_groups_project", "project", "created_at", "id"),
    Index("ix_groups_created", "created_at", "id"),  # revision 0020: list pages
)

group_members = Table(
    "group_members", metadata,
    Column("group_id", String, ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, nullable=False),
    Index("ix_group_members_agent", "agent_id"),
)

group_blocks = Table(
    "group_blocks", metadata,
    Column("group_id", String, ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True),
    Column("block_id", String, ForeignKey("blocks.id", ondelete="CASCADE"), primary_key=True),
    Index("ix_group_blocks_block", "block_id"),
)

# The group's own view of its conversation: what the user sent and what each member said.
group_messages = Table(
    "group_messages", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    Column("group_id", String, ForeignKey("groups.id", ondelete="CASCADE"), nullable=False),
    Column("role", String, nullable=False),
    Column("text", Text, nullable=False),
    Column("sender_id", String),
    Column("name", String),
    Column("run_id", String),
    Column("created_at", Float, nullable=False),
    Index("ix_group_messages_group_seq", "group_id", "seq"),
    sqlite_autoincrement=True,
)

# revision 0013: conversations, threads of one agent that share its memory. Each keeps its
# in-context list as the agent row does (the list, then its messages stored after a seq),
# its pending approval, and its own copies of the blocks it isolates (not attached to the
# agent).
conversations = Table(
    "conversations", metadata,
    Column("id", String, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("summary", Text),
    Column("in_context_message_ids", Json, nullable=False),
    Column("in_context_after_seq", Integer, nullable=False),
    Column("pending_approval", Json),
    Column("isolated_block_ids", Json, nullable=False),
    Column("model", String),
    Column("model_settings", Json),
    Column("last_message_at", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_conversations_agent", "agent_id", "created_at"),
)

# revision 0014: MCP servers (Letta's mcp-servers): where a server is (``config``: command
# and args, or URL and auth header name) apart from its secrets (env, token, headers), which
# the REST layer never returns as stored.
mcp_servers = Table(
    "mcp_servers", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False, unique=True),
    Column("server_type", String, nullable=False),
    Column("config", Json, nullable=False),
    Column("secrets", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# revision 0028: providers added over REST (Letta's "byok" category), unique by name; the key
# and access key are stored encrypted (``key_box``), never in clear.
providers = Table(
    "providers", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False, unique=True),
    Column("provider_type", String, nullable=False),
    Column("base_url", String),
    Column("region", String),
    Column("api_version", String),
    Column("api_key_sealed", String),
    Column("access_key_sealed", String),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# revision 0015: folders of files (Letta's sources), their chunks embedded like passages, and
# which agents see them (a file open or closed in the agent's context, with its window).
folders = Table(
    "folders", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False, unique=True),
    Column("description", Text),
    Column("instructions", Text),
    Column("metadata", Json, nullable=False),
    Column("embedding_config", Json),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_folders_project", "project", "created_at", "id"),
    Index("ix_folders_created", "created_at", "id"),  # revision 0020: list pages
)

files = Table(
    "files", metadata,
    Column("id", String, primary_key=True),
    Column("folder_id", String, ForeignKey("folders.id", ondelete="CASCADE"), nullable=False),
    Column("file_name", String, nullable=False),
    Column("original_file_name", String, nullable=False),
    Column("file_type", String, nullable=False),
    Column("file_size", Integer, nullable=False),
    Column("content", Text),
    Column("processing_status", String, nullable=False),
    Column("error_message", Text),
    Column("total_chunks", Integer, nullable=False),
    Column("chunks_embedded", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_files_folder", "folder_id", "created_at"),
)

file_passages = Table(
    "file_passages", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True),
    Column("file_id", String, ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
    Column("folder_id", String, ForeignKey("folders.id", ondelete="CASCADE"), nullable=False),
    Column("text", Text, nullable=False),
    Column("embedding", LargeBinary, nullable=False),  # float32 little-endian, as passages
    Column("embedding_model", String, nullable=False),
    Column("embedding_dim", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_file_passages_folder_seq", "folder_id", "seq"),
    Index("ix_file_passages_file", "file_id"),
    sqlite_autoincrement=True,
)

folders_agents = Table(
    "folders_agents", metadata,
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("folder_id", String, ForeignKey("folders.id", ondelete="CASCADE"), primary_key=True),
    Column("created_at", Float, nullable=False),
    Index("ix_folders_agents_folder_created", "folder_id", "created_at", "agent_id"),  # 0023
)

files_agents = Table(
    "files_agents", metadata,
    Column("id", String, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("file_id", String, ForeignKey("files.id", ondelete="CASCADE"), nullable=False),
    Column("folder_id", String, ForeignKey("folders.id", ondelete="CASCADE"), nullable=False),
    Column("file_name", String, nullable=False),
    Column("is_open", Boolean, nullable=False),
    Column("visible_content", Text),
    Column("start_line", Integer),
    Column("end_line", Integer),
    Column("last_accessed_at", Float, nullable=False),
    UniqueConstraint("agent_id", "file_id", name="uq_files_agents_file"),
    Index("ix_files_agents_file", "file_id"),
    Index("ix_files_agents_agent_name", "agent_id", "file_name", "id"),  # revision 0023
)

# Turns across processes (fleet.py; revision 0019): tickets in arrival order, agents' versions.
fleet_tickets = Table(
    "fleet_tickets", metadata,
    Column("ticket", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("agent_id", String, nullable=False),
    Column("conversation_id", String),
    Column("owner", String, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_fleet_tickets_thread", "agent_id", "conversation_id", "ticket"),
    Index("ix_fleet_tickets_owner", "owner"),
)

fleet_versions = Table(
    "fleet_versions", metadata,
    Column("agent_id", String, primary_key=True),
    Column("version", BigInteger, nullable=False),
)

# A run's stream, for readers in other server processes (written on PostgreSQL only; 0018).
run_frames = Table(
    "run_frames", metadata,
    Column("run_id", String, primary_key=True),
    Column("seq_id", Integer, primary_key=True),
    Column("frame", Json),  # NULL: the run's stream ended (the row after its last frame)
    Column("created_at", Float, nullable=False),
    Index("ix_run_frames_created", "created_at"),
)

# Each agent's memory repository (memory_repo.py; revision 0024): git objects by sha, the
# head of its one branch with the files it holds, and every commit in order with the files
# it changed, so history lists without walking the object graph. A step that edits memory
# writes these in its transaction, so they keep few indexes (each is pages to write): the
# objects are one B-tree on SQLite (WITHOUT ROWID), the commits are found by agent and seq.
memory_heads = Table(
    "memory_heads", metadata,
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("sha", String),  # NULL: no commit yet
    Column("files", Json),  # path -> [mode, blob sha] of the head's tree
)

memory_objects = Table(
    "memory_objects", metadata,
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
    Column("sha", String, primary_key=True),
    Column("type", Integer, nullable=False),  # git's type number: 1 commit, 2 tree, 3 blob
    Column("data", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

memory_commits = Table(
    "memory_commits", metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("sha", String, nullable=False),
    Column("parent_sha", String),
    Column("author_type", String, nullable=False),
    Column("author_id", String, nullable=False),
    Column("author_name", String),
    Column("message", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("changes", Json, nullable=False),  # path -> [old blob sha, new blob sha]
    Index("ix_memory_commits_agent", "agent_id", "seq"),
)

# A step's model request and response, kept only when the operator asks for them
# (``STATELOOP_PROVIDER_TRACES``; revision 0027); deleted with their agent.
provider_traces = Table(
    "provider_traces", metadata,
    Column("step_id", String, primary_key=True),
    Column("id", String, nullable=False),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", String),
    Column("call_type", String, nullable=False),
    Column("request_json", Json, nullable=False),
    Column("response_json", Json, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_provider_traces_agent", "agent_id"),
)

# Messages sent to an agent at a time or on a cron schedule (revision 0029). ``next_at`` is
# when it is next due (seconds since the epoch); NULL once a one-time message has fired.
# Deleted with their agent.
scheduled_messages = Table(
    "scheduled_messages", metadata,
    Column("id", String, primary_key=True),
    Column("agent_id", String, ForeignKey("agents.id", ondelete="CASCADE"), nullable=False),
    Column("request", Json, nullable=False),  # messages, max_steps, callback_url, ...
    Column("schedule", Json, nullable=False),  # {"type": "one-time" | "recurring", ...}
    Column("next_at", Float),
    Column("fired_count", Integer, nullable=False),
    Column("last_fired_at", Float),
    Column("last_run_id", String),
    # The process firing it (until its run is stored) and the due time it fired for.
    Column("claimed_by", String),
    Column("claimed_for", Float),
    Column("created_at", Float, nullable=False),
    Index("ix_scheduled_messages_due", "next_at"),
    Index("ix_scheduled_messages_agent", "agent_id", "created_at", "id"),
)

# Message batches (revision 0030): requests to many agents submitted at once, each run as an
# ordinary run of its agent. A request row is ``pending`` until a process claims it
# (``running``, ``claimed_by`` naming the process), then ``completed``, ``failed`` or
# ``cancelled`` with its run's stop reason. Requests are deleted with their batch, not with
# their agent: a request whose agent went away ends failed, and says so.
message_batches = Table(
    "message_batches", metadata,
    Column("id", String, primary_key=True),
    Column("status", String, nullable=False),  # running, completed, cancelled
    Column("callback_url", String),
    Column("callback", Json),  # {"sent_at", "status_code" | "error"} once it was called
    Column("callback_owner", String),  # the process to call it, from completion to the call
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("completed_at", Float),
    # revision 0031: its project, the one the request that made it acted in
    Column("project", String, nullable=False, default=creating_in, server_default="default"),
    Index("ix_message_batches_created", "created_at", "id"),
    Index("ix_message_batches_status", "status", "created_at", "id"),
    Index("ix_message_batches_project", "project", "created_at", "id"),
)

batch_requests = Table(
    "batch_requests", metadata,
    Column("id", String, primary_key=True),
    Column("batch_id", String, ForeignKey("message_batches.id", ondelete="CASCADE"),
           nullable=False),
    Column("position", Integer, nullable=False),
    Column("agent_id", String, nullable=False),
    Column("request", Json, nullable=False),  # messages or input, max_steps, ...
    Column("status", String, nullable=False),
    Column("claimed_by", String),
    Column("run_id", String),
    Column("stop_reason", String),
    Column("error", Text),
    Column("started_at", Float),
    Column("completed_at", Float),
    Index("ix_batch_requests_batch", "batch_id", "status", "position"),
    Index("ix_batch_requests_status", "status", "batch_id"),  # the pending ones, at a look
)

# Access (revision 0031). API keys made over the API: each a project and a role, its secret
# kept only as a SHA-256 digest (the secret is 256 random bits, so a digest is enough).
api_keys = Table(
    "api_keys", metadata,
    Column("id", String, primary_key=True),
    Column("name", String, nullable=False),
    Column("project", String, nullable=False),
    Column("role", String, nullable=False),  # "admin", "write" or "read"
    Column("digest", String, nullable=False),
    Column("created_by", String, nullable=False),  # the credential that made it
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float),  # NULL: never
    Column("revoked_at", Float),  # NULL: in force
    Index("ix_api_keys_created", "created_at", "id"),
)

# Client-side access tokens (Letta's): a policy over agents, for one web origin, until a time.
# Deleted when revoked: the row is the token.
access_tokens = Table(
    "access_tokens", metadata,
    Column("id", String, primary_key=True),
    Column("digest", String, nullable=False),
    Column("hostname", String, nullable=False),  # the origin, "https://app.example"
    Column("policy", Json, nullable=False),  # [{"type": "agent", "id", "access": [...]}]
    Column("agent_ids", Json, nullable=False),  # the policy's agents, for listing by one
    Column("project", String, nullable=False),
    Column("created_by", String, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_access_tokens_created", "created_at", "id"),
    Index("ix_access_tokens_hostname", "hostname"),
)

# Who changed what: one row per write request an authenticated credential made.
audit_log = Table(
    "audit_log", metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
           autoincrement=True),
    Column("at", Float, nullable=False),
    Column("credential", String, nullable=False),
    Column("project", String),
    Column("method", String, nullable=False),
    Column("route", String, nullable=False),  # the route's template, "/v1/agents/{agent_id}"
    Column("path", String, nullable=False),
    Column("status", Integer, nullable=False),
    Index("ix_audit_log_credential", "credential", "seq"),
)

# Model tokens each project used each UTC day ("2026-12-06"), for the daily limit and the
# admin's usage report.
project_usage = Table(
    "project_usage", metadata,
    Column("project", String, primary_key=True),
    Column("day", String, primary_key=True),
    Column("tokens", BigInteger, nullable=False),
    Column("runs", Integer, nullable=False),
)
