"""Server configuration from ``STATELOOP_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ..memory.embedding_models import OpenAIEndpoint


class ServerSettings(BaseSettings):
    """Everything ``stateloop serve`` reads; each field is ``STATELOOP_<NAME>`` in the env."""

    model_config = SettingsConfigDict(env_prefix="STATELOOP_", extra="ignore",
                                      populate_by_name=True,
                                      hide_input_in_errors=True)  # errors may be about secrets

    host: str = "127.0.0.1"  # Letta's local server bound to loopback on 8283 too
    port: int = 8283
    database_url: str | None = None  # default: ~/.stateloop/stateloop.db
    server_password: str | None = None
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)  # comma-separated
    default_model: str = "openai/gpt-4o-mini"
    # An OpenAI-compatible endpoint for every agent's model (vLLM, Ollama, a test fake).
    model_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("STATELOOP_MODEL_BASE_URL", "OPENAI_BASE_URL"))
    model_api_key: str | None = None
    # What embeds for agents, archives and folders that ask for no embedding: "minilm"
    # (offline) or "openai/<model>". Those that ask for "openai/<model>" get it when the
    # OpenAI provider is configured: embedding_base_url (else model_base_url, OPENAI_BASE_URL)
    # and embedding_api_key (else model_api_key, OPENAI_API_KEY).
    embedding: str = "minilm"
    embedding_base_url: str | None = None
    embedding_api_key: str | None = None
    embedding_timeout: float = Field(default=60.0, gt=0)  # seconds per embeddings request
    busy: Literal["queue", "reject"] = "queue"
    max_body_bytes: int = 8 * 1024 * 1024
    max_upload_bytes: int = 50 * 1024 * 1024  # a file uploaded into a folder (Letta's 50 MB)
    # What one git push to a memory repository may hold (its body is max_body_bytes at most).
    git_max_objects: int = Field(default=10_000, gt=0)
    git_max_object_bytes: int = Field(default=1024 * 1024, gt=0)  # any one object, inflated
    git_max_unpacked_bytes: int = Field(default=64 * 1024 * 1024, gt=0)  # all, inflated
    # What processing one upload may cost, in a worker process of its own (see files.Limits).
    upload_max_pages: int = 1_000
    upload_max_chars: int = 10_000_000  # text extracted from one file
    upload_max_chunks: int = 10_000
    upload_cpu_seconds: int = 300
    upload_memory_mb: int = 1_536
    upload_workers: int = 2  # uploads processed at once; the others wait ("pending")
    tool_timeout: float = 30.0  # seconds per call of a tool created from source
    tool_memory_mb: int = 512  # address space of each process of a call (RLIMIT_AS)
    tool_output_bytes: int = 1_000_000  # per stream (stdout, stderr) of one call
    tool_processes: int = 64  # RLIMIT_NPROC inside a call's sandbox
    # Memory of one call, all its processes together: a cgroup per sandbox where the host
    # allows it, else processes x address space within it (how: logged at start).
    tool_call_memory_mb: int = Field(default=1024, gt=0)
    tool_source_bytes: int = 1_000_000  # the longest source a tool is created or run from
    tool_bwrap: str = "bwrap"  # the bubblewrap executable that isolates source tools
    # Without a usable bubblewrap, run source tools anyway as plain subprocesses.
    unsafe_tools: bool = False
    # Source tools and stdio MCP servers allowed on the network (comma-separated names);
    # others get none.
    tool_network: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The environment of every source tool (a JSON object): nothing else of the server's.
    tool_env: dict[str, str] = Field(default_factory=dict)
    # MCP servers described over REST. Stdio ones run only the commands named here (comma-
    # separated, as written; none: stdio servers are refused), in the tools' sandbox; HTTP
    # and SSE ones reach loopback, private and link-local addresses only when allowed.
    mcp_stdio_commands: Annotated[list[str], NoDecode] = Field(default_factory=list)
    mcp_private_urls: bool = False
    # Providers added over /v1/providers: the key their keys are sealed with (a Fernet key;
    # or a file holding it), and whether their base_url may reach loopback, private and
    # link-local addresses.
    encryption_key: str | None = None
    encryption_key_file: str | None = None
    provider_private_urls: bool = False
    # A run's callback_url: seconds one call may take in all (Letta's 5), and whether it may
    # reach loopback, private and link-local addresses.
    callback_timeout: float = Field(default=5.0, gt=0)
    callback_private_urls: bool = False
    # Scheduled messages: seconds between looks for due ones (and so how late one may
    # fire), and how many pending ones an agent may have.
    schedule_interval: float = Field(default=1.0, gt=0)
    schedules_per_agent: int = Field(default=100, gt=0)
    # Message batches: how many requests of one batch run at once (across every process
    # serving the database), and how many requests one batch may hold.
    batch_concurrency: int = Field(default=4, gt=0)
    batch_max_requests: int = Field(default=500, gt=0)
    run_buffer_events: int = 20_000  # events kept per run for resuming its stream
    run_buffer_runs: int = 500  # finished runs whose events are kept
    # Agents kept in memory at most; beyond it the idle ones least recently used are let go
    # and read from the store again when next used. Busy ones stay (the bound then waits).
    live_agents: int = Field(default=1000, gt=0)
    ping_interval: float = 15.0  # seconds between keepalive pings on a quiet stream
    # GET /metrics (Prometheus) without credentials: for a scraper on a trusted network.
    # It shows counts by model, tool and stop reason; no message, id or secret.
    metrics_open: bool = False
    # Record each step's model request and response (GET /v1/steps/{id}/trace). They hold
    # user data and whole contexts, so they are kept only when the operator asks.
    provider_traces: bool = False
    # "json": one JSON object a log line (requests, runs' ends, messages) with trace ids.
    log_format: Literal["text", "json"] = "text"
    # Browsers: the names a request's Host may give (against DNS rebinding), comma-separated
    # "name" (any port) or "name:port", "*" for any; `stateloop serve` adds the address it
    # binds. None set: create_app() checks no Host (an app called in process).
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Limits, off unless set (docs/guides/access.md), each a 429 with Retry-After: requests a
    # second and runs at once per credential (in each process), model tokens a UTC day per
    # project (across a fleet).
    rate_limit: float | None = Field(default=None, gt=0)
    concurrent_runs: int | None = Field(default=None, gt=0)
    daily_tokens: int | None = Field(default=None, gt=0)

    # A secret that is set must be one: an empty password would run the server open without
    # a word, and spaces around one would never match (the token a client sends is stripped).
    @field_validator("server_password")
    @classmethod
    def _check_password(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("STATELOOP_SERVER_PASSWORD is set but empty: unset it to run "
                             "without authentication, or set a password")
        if value is not None:
            _check_spaces(value, "STATELOOP_SERVER_PASSWORD")
        return value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        if isinstance(value, str):  # "key1,key2"; spaces after the commas are fine
            return [key.strip(" ") for key in value.split(",")]
        return value

    @field_validator("api_keys")
    @classmethod
    def _check_keys(cls, keys: list[str]) -> list[str]:
        if keys and not any(key.strip() for key in keys):
            raise ValueError("STATELOOP_API_KEYS is set but empty: unset it to run without "
                             "authentication, or set keys separated by commas")
        for number, key in enumerate(keys, 1):
            if not key:
                raise ValueError(f"STATELOOP_API_KEYS: key {number} is empty (two commas in "
                                 "a row, or one at an end)")
            _check_spaces(key, f"STATELOOP_API_KEYS: key {number}")
        return keys

    @field_validator("tool_network", "mcp_stdio_commands", "allowed_hosts", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    def tokens(self) -> set[str]:
        """Bearer tokens that authenticate; empty means the server is open."""
        found = set(self.api_keys)
        if self.server_password is not None:
            found.add(self.server_password)
        return found

    def credentials(self) -> list[tuple[str, str]]:
        """The environment's credentials, each an admin, by the name the audit log gives
        it: ``server-password``, ``env-key-1``, ``env-key-2``..."""
        named = [(f"env-key-{number}", key) for number, key in enumerate(self.api_keys, 1)]
        if self.server_password is not None:
            named.insert(0, ("server-password", self.server_password))
        return named

    def model_options(self) -> dict[str, str]:
        """``base_url``/``api_key`` for ``Agent(...)`` when an endpoint is configured."""
        options = {}
        if self.model_base_url:
            options["base_url"] = self.model_base_url
        key = self.model_api_key or os.environ.get("OPENAI_API_KEY")
        if key:
            options["api_key"] = key
        return options


    def embedding_endpoint(self) -> OpenAIEndpoint:
        """Where ``openai/...`` embeddings are made."""
        options = self.model_options()
        return OpenAIEndpoint(self.embedding_base_url or options.get("base_url"),
                              self.embedding_api_key or options.get("api_key"),
                              self.embedding_timeout)


def _check_spaces(secret: str, name: str) -> None:
    if secret != secret.strip():
        raise ValueError(f"{name} starts or ends with whitespace, which no client sends: "
                         "remove it")
