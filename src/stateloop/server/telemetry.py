"""The server's traces: the OpenTelemetry SDK and its exporter, set up from the standard
``OTEL_*`` environment variables when they ask for traces. Once a tracer provider is set,
FastAPI's own telemetry makes a span per HTTP request that continues the caller's trace
(``traceparent``); the runs a request starts are its descendants (``stateloop.tracing``).

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
or ``OTEL_TRACES_EXPORTER`` is set (``otlp``: OTLP over HTTP; ``console``; ``none`` turns it
off, as does ``OTEL_SDK_DISABLED=true``); the SDK reads the rest itself (service name,
resource attributes, headers, batching). It needs the ``otel`` extra installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import trace

from ..errors import ConfigError
from ..tracing import tracing_on

__all__ = ["configure_tracing", "tracing_wanted"]

EXPORTERS = ("otlp", "console")


def tracing_wanted(env: Mapping[str, str] | None = None) -> list[str]:
    """The span exporters the environment asks for (none: no tracing)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [name.strip().lower() for name in env.get("OTEL_TRACES_EXPORTER", "").split(",")
             if name.strip()]
    if named:
        wrong = [name for name in named if name not in (*EXPORTERS, "none")]
        if wrong:
            raise ConfigError(f"OTEL_TRACES_EXPORTER: {wrong[0]!r} is not one of "
                              f"{', '.join(EXPORTERS)} or none")
        return [name for name in named if name != "none"]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT")
    return ["otlp"] if endpoint else []


def configure_tracing() -> bool:
    """Set the process's tracer provider as the environment asks (see the module's
    docstring); whether traces are on. A provider the application set already is kept."""
    exporters = tracing_wanted()
    if not exporters:
        return tracing_on()
    if tracing_on():
        return True
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    if "otlp" in exporters and protocol != "http/protobuf":
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not served; "
                          "stateloop exports OTLP as http/protobuf")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # lazy: otel extra
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource  # lazy: the otel extra, when asked
        from opentelemetry.sdk.trace import TracerProvider  # lazy: the otel extra, when asked
        from opentelemetry.sdk.trace.export import (  # lazy: the otel extra, when asked
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError as exc:
        raise ConfigError("the OTEL_* environment asks for traces, but the OpenTelemetry SDK "
                          "is not installed: pip install 'stateloop[otel]'") from exc
    named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "stateloop"}
    provider = TracerProvider(resource=Resource.create(named))
    for name in exporters:
        exporter: SpanExporter = OTLPSpanExporter() if name == "otlp" else ConsoleSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True

