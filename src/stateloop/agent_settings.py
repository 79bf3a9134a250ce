"""``AgentSettings``: an agent's settings as one piece of data — who it is, its model, tools
and tool rules, its limits and waits, compaction, embedding — shared by all its threads and
handed to what runs them; and ``setting``, the attribute of ``Agent`` that reads and writes
one field of it."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, overload

from .llm.base import NO_SETTINGS, Model, ModelSettings
from .llm.registry import resolve_model
from .llm.retry import RetryPolicy

if TYPE_CHECKING:
    from .agent_types import AgentType
    from .hooks import Hooks
    from .memory.compaction import Strategy
    from .memory.embedding_models import Embedders
    from .memory.embeddings import Embedder
    from .tools import Tool
    from .tools.rules import BaseToolRule

T = TypeVar("T")


@dataclasses.dataclass(eq=False)
class AgentSettings:
    """An agent's settings, field by field (``Agent(...)``'s arguments, checked). One object
    per agent: its conversations read the same one, so a change reaches every thread."""

    id: str
    name: str
    model: Model
    """The model each run calls (a conversation may have its own)."""
    agent_type: AgentType
    system: str = ""
    """The instructions the system prompt starts with."""
    tools: dict[str, Tool] = dataclasses.field(default_factory=dict)
    tool_rules: list[BaseToolRule] = dataclasses.field(default_factory=list)
    max_steps: int = 50
    error_threshold: int | None = 3
    timeout: float | None = None
    context_window: int | None = None
    """A window of the agent's own (None: the model's)."""
    max_tokens: int | None = None
    parallel_tool_calls: bool = True
    model_settings: ModelSettings = NO_SETTINGS
    output_type: Any = None
    output_retries: int = 2
    hooks: Hooks | None = None
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    approval_timeout: float | None = None
    busy: Literal["queue", "reject"] = "queue"
    compaction: Strategy | None = "summarize"
    compaction_threshold: float = 0.9
    summarizer: Model | None = None
    tags: list[str] = dataclasses.field(default_factory=list)
    timezone: str = "UTC"
    """The dates of the system prompt (an IANA name, as in Letta)."""
    embedder: Embedder | None = None
    embedders: Embedders | None = None
    """The embedders of archives embedded by other models."""
    model_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """How model names are resolved: ``base_url``, ``api_key``."""

    def resolve(self, model: str | Model) -> Model:
        """A model by handle (or as given), with the agent's endpoint options."""
        return resolve_model(model, **self.model_options)

    def window(self, model: Model) -> int:
        """The context window a thread running ``model`` has."""
        return self.context_window or model.context_window


class HasSettings(Protocol):
    @property
    def settings(self) -> AgentSettings: ...


class setting(Generic[T]):
    """A field of ``obj.settings`` as an attribute of ``obj``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> setting[T]: ...
    @overload
    def __get__(self, obj: HasSettings, owner: type | None = None) -> T: ...

    def __get__(self, obj: HasSettings | None, owner: type | None = None) -> T | setting[T]:
        if obj is None:
            return self
        value: T = getattr(obj.settings, self.name)
        return value

    def __set__(self, obj: HasSettings, value: T) -> None:
        if getattr(obj, "conversation_id", None) is not None:
            raise AttributeError(f"{self.name!r} is a setting of the agent, shared by its "
                                 f"conversations: set it on the agent")
        setattr(obj.settings, self.name, value)


class HasOwnSettings(HasSettings, Protocol):
    own_settings: dict[str, Any]


class own_setting(Generic[T]):
    """A field of ``obj.settings`` a conversation may set for itself (in its
    ``own_settings``): its own value once set, else the agent's."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> own_setting[T]: ...
    @overload
    def __get__(self, obj: HasOwnSettings, owner: type | None = None) -> T: ...

    def __get__(self, obj: HasOwnSettings | None, owner: type | None = None
                ) -> T | own_setting[T]:
        if obj is None:
            return self
        own = obj.own_settings
        value: T = own[self.name] if self.name in own else getattr(obj.settings, self.name)
        return value

    def __set__(self, obj: HasOwnSettings, value: T) -> None:
        obj.own_settings[self.name] = value
