# TEMP STUB (not to be committed): replaced by the harness branch.
from dataclasses import dataclass

@dataclass(frozen=True)
class LiveBackend:
    kind: str
    max_length: int | None

_LIVE = None

def live_backend():
    return _LIVE

def request_cache_tokenizer_name(tokenizer_name: str, fingerprint: str) -> str:
    return f"{tokenizer_name}-longmem-{fingerprint}"
