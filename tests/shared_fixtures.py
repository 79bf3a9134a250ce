"""Where the shared sample data lives: beside the checkout (as CI lays it), or in /work."""

from __future__ import annotations

from pathlib import Path

_CANDIDATES = [Path(__file__).resolve().parents[2] / "shared", Path("/work/shared")]
SHARED = next((path for path in _CANDIDATES if (path / "fixtures").is_dir()), _CANDIDATES[0])
LETTA_AF = SHARED / "fixtures" / "letta-af"
LETTA_OPENAPI = SHARED / "fixtures" / "letta-openapi-0.16.8.json"
