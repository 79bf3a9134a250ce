"""Letta's request and response shapes for Agent File import and export."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...agent_file.skills import SKILL_FILE, skill_problem


class ImportedAgentsResponse(BaseModel):
    """Response model for imported agents"""

    model_config = ConfigDict(extra="forbid")

    agent_ids: list[str] = Field(..., description="List of IDs of the imported agents")
    notes: list[str] = Field(default_factory=list, description=(
        "What the import left out, kept as it was or repaired (a block's limit raised to fit "
        "its value), one line each"))


class SkillSchema(BaseModel):
    """Skill schema for agent files.

    Skills are folders of instructions, scripts, and resources that agents can load.
    Either files (with SKILL.md) or source_url must be provided."""

    name: str = Field(..., description=(
        "Skill name, also serves as unique identifier (e.g., 'slack', 'pdf'): one folder "
        "name under skills/"))
    files: dict[str, str] | None = Field(default=None, description=(
        "Skill files as path -> content mapping. Must include 'SKILL.md' key if provided."))
    source_url: str | None = Field(default=None, description=(
        "Source URL for skill resolution (e.g., 'letta:slack', 'anthropic:pdf', "
        "'owner/repo/path')"))

    @model_validator(mode="after")
    def _checked(self) -> SkillSchema:
        problem = skill_problem(self.name)
        if problem is not None:
            raise ValueError(problem)
        if not (self.files and SKILL_FILE in self.files) and self.source_url is None:
            raise ValueError(f"skill {self.name!r}: either files (with {SKILL_FILE!r}) or "
                             "source_url must be provided")
        return self


class ExportAgentRequest(BaseModel):
    """Request body for POST /export endpoint."""

    skills: list[SkillSchema] = Field(default_factory=list, description=(
        "Skills to include in the export. Each skill must have a name and files (including "
        "SKILL.md)."))
    conversation_id: str | None = None
    scrub_messages: bool = False
    include_memory_history: bool = Field(default=False, description=(
        "Also write the agent's memory history under the file's 'stateloop_memory_history' "
        "key (stateloop keeps it on import; Letta ignores it)."))
