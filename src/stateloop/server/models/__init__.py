"""Letta's request bodies and response objects as pydantic models, with the spec's field names."""
