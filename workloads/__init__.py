"""WHAT is sent: workload specs, length distributions, tokenizers and synthetic prompts.

Yields a materialized, hashed request set (an Arrow table). It does not know endpoints, engines,
arrival times or metrics, and imports nothing else of ours.
"""

from workloads._audio import SAMPLE_RATE_HZ, speechlike_clip, wav_bytes, wav_duration_ms
from workloads._errors import TokenizerError, WorkloadError
from workloads._formats import DEFAULT_SCHEMA, DEFAULT_TOOLS
from workloads._images import data_url, png_bytes
from workloads._import import ImportedRecord, ImportSpec, read_records
from workloads._lengths import LengthDist
from workloads._requestset import (
    EXTENDED_SCHEMA,
    IMPORTED_SCHEMA,
    REQUEST_SET_SCHEMA,
    RequestSet,
    entry_rows,
    materialize,
    table_sha256,
)
from workloads._spec import PRESETS_DIR, AudioSpec, DocumentsSpec, WorkloadSpec, preset_lines, preset_names
from workloads._synthetic import corpus_text, synthesize_prompt
from workloads._tokenizer import (
    LoadedTokenizer,
    Tokenizer,
    default_cache_dir,
    in_cache,
    is_tokenizer_folder,
    load_tokenizer,
)
from workloads._yaml import MAX_YAML_NODES, load_yaml

__all__ = [
    "AudioSpec",
    "DocumentsSpec",
    "SAMPLE_RATE_HZ",
    "speechlike_clip",
    "wav_bytes",
    "wav_duration_ms",
    "load_yaml",
    "MAX_YAML_NODES",
    "DEFAULT_SCHEMA",
    "DEFAULT_TOOLS",
    "EXTENDED_SCHEMA",
    "PRESETS_DIR",
    "corpus_text",
    "data_url",
    "entry_rows",
    "png_bytes",
    "preset_lines",
    "preset_names",
    "IMPORTED_SCHEMA",
    "ImportSpec",
    "ImportedRecord",
    "LengthDist",
    "LoadedTokenizer",
    "REQUEST_SET_SCHEMA",
    "RequestSet",
    "Tokenizer",
    "TokenizerError",
    "WorkloadError",
    "WorkloadSpec",
    "default_cache_dir",
    "in_cache",
    "is_tokenizer_folder",
    "load_tokenizer",
    "materialize",
    "read_records",
    "synthesize_prompt",
    "table_sha256",
]
