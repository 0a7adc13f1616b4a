"""Running a benchmark: the stages of `passport run` (open -> identify -> plan -> canaries ->
timed phase -> assemble), `passport sweep` (one run per load level, one engine for all),
`passport campaign` (one run per arm, ranked) and `passport canary` (the suite alone). The only
part of `passport` that sends requests; it uses `harness` to send them, `workloads` to make
them, `canaries` to judge answers, `passport.audit` for every figure and `passport.report` for
the reports. It never prints (callbacks do).
"""

from passport.run._campaign import CAMPAIGN_SPEC_FILE, CampaignOutcome, resume_campaign, run_campaign
from passport.run._canary_only import CanaryOutcome, run_canary_command
from passport.run._collect import collect_host
from passport.run._endpoint import Access, access, auth_headers, engine_launcher, model_of
from passport.run._execute import RunOutcome, execute
from passport.run._identity import DECLARED_ALIASES, STANDARD_FIELDS, complete_identity, probe_endpoint
from passport.run._plan import plan_workload, request_params, resolve_tokenizer
from passport.run._prefix_cache import apply_prefix_cache_policy
from passport.run._preview import workload_summary
from passport.run._recover import recover
from passport.run._replay import replay_identity
from passport.run._stages import ProgressFactory, Say, in_stage
from passport.run._sweep import run_sweep

__all__ = [
    "CAMPAIGN_SPEC_FILE",
    "CampaignOutcome",
    "run_campaign",
    "resume_campaign",
    "Access",
    "access",
    "DECLARED_ALIASES",
    "STANDARD_FIELDS",
    "CanaryOutcome",
    "ProgressFactory",
    "RunOutcome",
    "Say",
    "apply_prefix_cache_policy",
    "auth_headers",
    "collect_host",
    "complete_identity",
    "engine_launcher",
    "execute",
    "in_stage",
    "model_of",
    "plan_workload",
    "probe_endpoint",
    "recover",
    "replay_identity",
    "request_params",
    "resolve_tokenizer",
    "run_canary_command",
    "run_sweep",
    "workload_summary",
]
