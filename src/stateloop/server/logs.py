"""The server's log lines: uvicorn's text (the default), or with ``STATELOOP_LOG_FORMAT=json``
one JSON object a line — each request (method, path, status, client), each run's end (run,
agent, stop reason, steps, tokens), every other message — with the trace and span ids of
the request or run it belongs to when tracing is on."""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from opentelemetry import trace

from ..events import RunEnd
from ..hooks import StepRecord
from .credentials import redact

__all__ = ["JsonFormatter", "RedactSecrets", "RunLog", "log_config"]

runs_logger = logging.getLogger("stateloop.runs")
# What uvicorn's access log passes as arguments, in order.
_ACCESS = ("client", "method", "path", "http_version", "status")


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time, level, logger, message, its fields, trace ids."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name}
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(
                record.args) == len(_ACCESS):
            line.update(zip(_ACCESS, record.args, strict=True))
            line["message"] = "request"
        else:
            line["message"] = record.getMessage()
        line.update(getattr(record, "fields", None) or {})
        context = trace.get_current_span().get_span_context()
        if context.is_valid and "trace_id" not in line:
            line["trace_id"] = trace.format_trace_id(context.trace_id)
            line["span_id"] = trace.format_span_id(context.span_id)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class RedactSecrets(logging.Filter):
    """A request line's path with any token secret in it cut to the token's handle."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) if isinstance(arg, str) else arg
                                for arg in record.args)
        return True


def log_config(base: dict[str, Any], json_lines: bool) -> dict[str, Any]:
    """uvicorn's logging configuration ``base`` with stateloop's own loggers at INFO, and no
    secret in a request line; with ``json_lines``, every line a JSON object (on standard
    error, requests included)."""
    loggers = {**base["loggers"],
               "stateloop": {"handlers": ["default"], "level": "INFO", "propagate": False}}
    filters = {**base.get("filters", {}), "secrets": {"()": RedactSecrets}}
    handlers = {name: {**handler, "filters": [*handler.get("filters", []), "secrets"]}
                for name, handler in base["handlers"].items()}
    if not json_lines:
        return {**base, "filters": filters, "handlers": handlers, "loggers": loggers}
    formatters = {"json": {"()": JsonFormatter}}
    handlers = {name: {**handler, "formatter": "json"} for name, handler in handlers.items()}
    return {**base, "filters": filters, "formatters": formatters, "handlers": handlers,
            "loggers": loggers}


class RunLog:
    """Logs one run's end (a run watcher, ``stateloop.tracing.add_watcher``)."""

    def __init__(self, run_id: str, agent_id: str, model: str) -> None:
        self.agent_id, self.model = agent_id, model
        self.started = time.monotonic()

    def step(self, record: StepRecord) -> None:
        pass

    def end(self, end: RunEnd) -> None:
        runs_logger.info("run %s ended: %s", end.run_id, end.stop_reason, extra={"fields": {
            "run_id": end.run_id, "agent_id": self.agent_id, "model": self.model,
            "stop_reason": end.stop_reason, "steps": end.steps,
            "input_tokens": end.usage.input_tokens, "output_tokens": end.usage.output_tokens,
            "duration_ms": round((time.monotonic() - self.started) * 1000, 1)}})
