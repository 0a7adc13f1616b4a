"""HOW requests are sent: transport, SSE parsing, arrival schedules, runner, recorder, engine
launcher, control-plane probes and the simulated engine.

It knows the OpenAI streaming dialect and HTTP, and in `harness.engines` everything that differs
by engine; it does not know what a metric, a validity rule or a passport is (that is
`passport`), nor how prompts are made (that is `workloads`).

Names load on first use (PEP 562): `from harness import LoadSpec` (the spec sections, pydantic
only) loads neither the runner nor the HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passport._lazy import lazy_names

if TYPE_CHECKING:
    from harness._anthropic import (
        ANTHROPIC_SAMPLING,
        ANTHROPIC_VERSION,
    )
    from harness._checks import (
        SPECIAL_TOKENS,
        check_json,
        check_tool_call,
    )
    from harness._clientstats import (
        ClientMonitor,
        run_delay_ns,
    )
    from harness._control import (
        ControlClient,
    )
    from harness._errors import (
        EndpointError,
        EngineLaunchError,
        HarnessError,
        ScheduleError,
    )
    from harness._fake import (
        FakeAnswer,
        FakeTransport,
        sse_events,
    )
    from harness._http import (
        Endpoint,
        Exchange,
        HttpClient,
    )
    from harness._kinds import (
        GENERATING_KINDS,
        JSON,
        KINDS,
        POOLING_KINDS,
        EndpointKind,
        judge,
        request_body,
    )
    from harness._launcher import (
        EngineLauncher,
        free_port,
        redact_command,
    )
    from harness._loadspec import (
        CONTROL_BYTES,
        DEFAULT_STREAMS,
        Limits,
        LimitsSpec,
        LoadSpec,
        MeasureSpec,
        RejectPolicy,
        Timeouts,
        TimeoutSpec,
        WarmupSpec,
    )
    from harness._openai import (
        ACCOUNTING_ERROR,
        CHUNK_KINDS,
        MAX_TOKEN_COUNT,
        OUTCOMES,
        SUCCESS_OUTCOMES,
        Api,
        ChunkKind,
        StreamSummary,
        build_body,
        classify,
        impossible_accounting,
        summarize,
    )
    from harness._pooling import (
        parse_pooling,
    )
    from harness._prom import (
        Sample,
        samples,
    )
    from harness._recorder import (
        CHUNKS_SCHEMA,
        RAW_SCHEMA_VERSION,
        RAW_TABLES,
        REQUESTS_SCHEMA,
        TELEMETRY_SCHEMA,
        TableWriter,
        join_parts,
    )
    from harness._redact import (
        has_secret,
        register_secret,
        scrub,
        scrub_bytes,
        scrub_file,
        scrub_json,
        strip_userinfo,
    )
    from harness._runner import (
        START_LEAD_NS,
        PreparedRequest,
        ProgressSink,
        RepetitionResult,
        ResponseExpectation,
        Runner,
        SessionTurn,
        WorkerShare,
    )
    from harness._safefile import (
        open_new,
        real_dir,
        write_new,
    )
    from harness._schedule import (
        SCHEDULE_SCHEMA,
        Schedule,
        build_schedule,
    )
    from harness._sse import (
        SSEParser,
    )
    from harness._telemetry import (
        BRACKET_COUNTERS,
        NvmlSource,
        PrometheusSource,
        TelemetrySampler,
        TrtllmJsonSource,
        close_sources,
        nvml_devices,
        read_counters,
    )
    from harness._transport import (
        Transport,
    )

__all__ = [
    "CONTROL_BYTES",
    "has_secret",
    "register_secret",
    "scrub",
    "scrub_bytes",
    "scrub_file",
    "scrub_json",
    "strip_userinfo",
    "FakeAnswer",
    "FakeTransport",
    "Transport",
    "sse_events",
    "SPECIAL_TOKENS",
    "check_json",
    "check_tool_call",
    "ResponseExpectation",
    "SessionTurn",
    "Api",
    "CHUNKS_SCHEMA",
    "CHUNK_KINDS",
    "ChunkKind",
    "ClientMonitor",
    "run_delay_ns",
    "ControlClient",
    "Endpoint",
    "EndpointError",
    "EngineLaunchError",
    "EngineLauncher",
    "Exchange",
    "HarnessError",
    "HttpClient",
    "Limits",
    "NvmlSource",
    "PrometheusSource",
    "Sample",
    "LoadSpec",
    "MeasureSpec",
    "OUTCOMES",
    "SUCCESS_OUTCOMES",
    "PreparedRequest",
    "ProgressSink",
    "RAW_SCHEMA_VERSION",
    "REQUESTS_SCHEMA",
    "RepetitionResult",
    "WorkerShare",
    "START_LEAD_NS",
    "Runner",
    "SCHEDULE_SCHEMA",
    "SSEParser",
    "Schedule",
    "RejectPolicy",
    "ScheduleError",
    "StreamSummary",
    "TELEMETRY_SCHEMA",
    "RAW_TABLES",
    "TableWriter",
    "TelemetrySampler",
    "BRACKET_COUNTERS",
    "close_sources",
    "read_counters",
    "TrtllmJsonSource",
    "Timeouts",
    "WarmupSpec",
    "build_body",
    "build_schedule",
    "classify",
    "free_port",
    "join_parts",
    "judge",
    "KINDS",
    "POOLING_KINDS",
    "GENERATING_KINDS",
    "EndpointKind",
    "request_body",
    "JSON",
    "parse_pooling",
    "ANTHROPIC_VERSION",
    "ANTHROPIC_SAMPLING",
    "open_new",
    "real_dir",
    "write_new",
    "impossible_accounting",
    "ACCOUNTING_ERROR",
    "MAX_TOKEN_COUNT",
    "nvml_devices",
    "redact_command",
    "samples",
    "summarize",
    "TimeoutSpec",
    "LimitsSpec",
    "DEFAULT_STREAMS",
]

_HOME = {
    "SPECIAL_TOKENS": "harness._checks",
    "check_json": "harness._checks",
    "check_tool_call": "harness._checks",
    "ClientMonitor": "harness._clientstats",
    "run_delay_ns": "harness._clientstats",
    "ControlClient": "harness._control",
    "EndpointError": "harness._errors",
    "EngineLaunchError": "harness._errors",
    "HarnessError": "harness._errors",
    "ScheduleError": "harness._errors",
    "FakeAnswer": "harness._fake",
    "FakeTransport": "harness._fake",
    "sse_events": "harness._fake",
    "Endpoint": "harness._http",
    "Exchange": "harness._http",
    "HttpClient": "harness._http",
    "EngineLauncher": "harness._launcher",
    "free_port": "harness._launcher",
    "redact_command": "harness._launcher",
    "CONTROL_BYTES": "harness._loadspec",
    "DEFAULT_STREAMS": "harness._loadspec",
    "Limits": "harness._loadspec",
    "LimitsSpec": "harness._loadspec",
    "LoadSpec": "harness._loadspec",
    "MeasureSpec": "harness._loadspec",
    "RejectPolicy": "harness._loadspec",
    "TimeoutSpec": "harness._loadspec",
    "Timeouts": "harness._loadspec",
    "WarmupSpec": "harness._loadspec",
    "ACCOUNTING_ERROR": "harness._openai",
    "Api": "harness._openai",
    "CHUNK_KINDS": "harness._openai",
    "ChunkKind": "harness._openai",
    "MAX_TOKEN_COUNT": "harness._openai",
    "OUTCOMES": "harness._openai",
    "SUCCESS_OUTCOMES": "harness._openai",
    "StreamSummary": "harness._openai",
    "build_body": "harness._openai",
    "classify": "harness._openai",
    "impossible_accounting": "harness._openai",
    "judge": "harness._kinds",
    "KINDS": "harness._kinds",
    "POOLING_KINDS": "harness._kinds",
    "GENERATING_KINDS": "harness._kinds",
    "EndpointKind": "harness._kinds",
    "request_body": "harness._kinds",
    "JSON": "harness._kinds",
    "parse_pooling": "harness._pooling",
    "ANTHROPIC_VERSION": "harness._anthropic",
    "ANTHROPIC_SAMPLING": "harness._anthropic",
    "summarize": "harness._openai",
    "Sample": "harness._prom",
    "samples": "harness._prom",
    "CHUNKS_SCHEMA": "harness._recorder",
    "RAW_SCHEMA_VERSION": "harness._recorder",
    "RAW_TABLES": "harness._recorder",
    "REQUESTS_SCHEMA": "harness._recorder",
    "TELEMETRY_SCHEMA": "harness._recorder",
    "TableWriter": "harness._recorder",
    "join_parts": "harness._recorder",
    "has_secret": "harness._redact",
    "register_secret": "harness._redact",
    "scrub": "harness._redact",
    "scrub_bytes": "harness._redact",
    "scrub_file": "harness._redact",
    "scrub_json": "harness._redact",
    "strip_userinfo": "harness._redact",
    "PreparedRequest": "harness._runner",
    "ProgressSink": "harness._runner",
    "RepetitionResult": "harness._runner",
    "ResponseExpectation": "harness._runner",
    "Runner": "harness._runner",
    "START_LEAD_NS": "harness._runner",
    "SessionTurn": "harness._runner",
    "WorkerShare": "harness._runner",
    "open_new": "harness._safefile",
    "real_dir": "harness._safefile",
    "write_new": "harness._safefile",
    "SCHEDULE_SCHEMA": "harness._schedule",
    "Schedule": "harness._schedule",
    "build_schedule": "harness._schedule",
    "SSEParser": "harness._sse",
    "BRACKET_COUNTERS": "harness._telemetry",
    "NvmlSource": "harness._telemetry",
    "PrometheusSource": "harness._telemetry",
    "TelemetrySampler": "harness._telemetry",
    "TrtllmJsonSource": "harness._telemetry",
    "close_sources": "harness._telemetry",
    "nvml_devices": "harness._telemetry",
    "read_counters": "harness._telemetry",
    "Transport": "harness._transport",
}

if not TYPE_CHECKING:  # for the type checker every name is imported above; unknown ones are errors
    __getattr__, __dir__ = lazy_names(__name__, _HOME)
