"""Everything engine-specific, one profile per engine family (docs/engines/research.md).

Detection (owned_by, managed hosts, control-plane checks, system_fingerprint), identity probes,
whether `ignore_eos` is honoured, the structured-output field, the prefix-cache reset, metrics
endpoints and the names of their series, and the tokenize route. The rest of the code base asks
this registry and names no engine. Adding one: write an `EngineProfile` in a module beside the
others and list it in `_registry._PROFILES` (or `register()` it at run time).
"""

from harness.engines._common import ANY_TOKENIZE, salt_requests
from harness.engines._fields import structured_fields
from harness.engines._probe import fingerprint, probe_identity
from harness.engines._profile import EngineProfile, PrefixCacheRecord, ProbeContext, TokenizeRoute
from harness.engines._registry import (
    detect,
    engine_of_card,
    engine_of_fingerprint,
    profile,
    profiles,
    register,
    unregister,
)

__all__ = [
    "ANY_TOKENIZE",
    "EngineProfile",
    "PrefixCacheRecord",
    "ProbeContext",
    "TokenizeRoute",
    "detect",
    "engine_of_card",
    "engine_of_fingerprint",
    "fingerprint",
    "probe_identity",
    "profile",
    "profiles",
    "register",
    "salt_requests",
    "structured_fields",
    "unregister",
]
