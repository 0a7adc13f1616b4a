"""HOW requests are sent: transport, SSE parsing, arrival schedules, runner, recorder, engine
launcher, control-plane probes and the simulated engine.

It knows the OpenAI streaming dialect and HTTP, and in `harness.engines` everything that differs
by engine; it does not know what a metric, a validity rule or a passport is (that is
`passport`), nor how prompts are made (that is `workloads`).
"""

from harness._checks import SPECIAL_TOKENS, check_json, check_tool_call
from harness._clientstats import ClientMonitor
from harness._control import CONTROL_BYTES, ControlClient
from harness._errors import EndpointError, EngineLaunchError, HarnessError, ScheduleError
from harness._fake import FakeAnswer, FakeTransport, sse_events
from harness._http import Endpoint, Exchange, HttpClient, Limits, Timeouts
from harness._launcher import EngineLauncher, free_port, redact_command
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
    judge,
    summarize,
)
from harness._prom import Sample, samples
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
from harness._safefile import open_new, real_dir, write_new
from harness._schedule import (
    SCHEDULE_SCHEMA,
    LoadSpec,
    MeasureSpec,
    RejectPolicy,
    Schedule,
    WarmupSpec,
    build_schedule,
)
from harness._sse import SSEParser
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
from harness._transport import Transport

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
]
