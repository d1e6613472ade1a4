"""ServerSettings: the server's and proxy's settings, and the memory Settings tenants start from.

Apart from app.py so the proxy (mounted by the app) can read them without
importing the app back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import ENV_PREFIX, Settings
from ..embed import check_embedder
from ..errors import ConfigError
from ..llm import check_llm
from .tenants import Key, KeyPairs, check_keys, load_keys_file, parse_keys


def default_data_dir() -> Path:
    """Tenant stores live under the user data dir unless configured."""
    import platformdirs

    return Path(platformdirs.user_data_dir("archivist")) / "tenants"


@dataclass(frozen=True)
class ServerSettings:
    """Server and proxy settings; the memory settings every tenant's store starts from."""

    data_dir: Path | None = None  # <data_dir>/<tenant>.db
    keys: KeyPairs = ()  # Key(api key, tenant id, bound user or None); 2-tuples are read too
    open_access: bool = False  # no keys: every caller is tenant "default" (local use)
    upstream_base_url: str = ""  # e.g. https://api.openai.com/v1
    upstream_api_key: str = ""  # sent upstream as the bearer key
    upstream_model: str = ""  # force this model upstream; "" keeps the client's
    upstream_timeout: float = 120.0  # seconds per upstream request
    # The background archivists' LLM: "" keeps ``memory``'s own (none, or its llm_*
    # settings); "upstream" uses the proxy's upstream endpoint and key with the model
    # ``archivist_model`` names, so one configuration serves the chat and the archivists.
    archivist_llm: str = ""
    archivist_model: str = ""  # the upstream model the archivists use (archivist_llm)
    context_budget: int = 1500  # tokens of injected memory context
    drift_guard: bool = False  # ask once more, with context for the reply, when it drifted
    drift_threshold: float = 0.6  # share of reply words the context and chat never used
    extract_delay: float = 1.0  # seconds new messages wait so one extraction covers many turns
    # Where extraction and consolidation run: "process" (a worker process at lower CPU
    # priority; requests never wait on it) or "thread" (threads of the server process).
    background: str = "process"
    # Largest request body accepted on any route (413 above it), and wrong API keys one
    # client address may send per minute before it is answered 429; 0 turns either off.
    max_request_bytes: int = 8 * 1024 * 1024
    auth_failures_per_minute: int = 20
    # Names this server answers to beyond loopback's (127.0.0.1, localhost, [::1]): without
    # keys every other Host is refused (DNS rebinding); and origins, beyond the server's
    # own, whose pages may change memory (a site in front of it). server/guard.py.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    # The REST API and the chat proxy beside the memory browser (``archivist ui`` serves
    # the browser alone unless asked).
    serve_api: bool = True
    memory: Settings = field(default_factory=Settings)

    def __post_init__(self) -> None:
        # one check over every source (file and environment): length, tenant ids, no key twice
        object.__setattr__(self, "keys", check_keys([Key(*k) for k in self.keys]))
        if self.background not in ("process", "thread"):
            raise ConfigError(f"background must be 'process' or 'thread', not {self.background!r}")
        if self.context_budget < 0:
            raise ConfigError("context_budget must be >= 0 (0 turns injection off)")
        if not 0 < self.drift_threshold <= 1:
            raise ConfigError("drift_threshold must be in (0, 1]")
        if self.extract_delay < 0:
            raise ConfigError("extract_delay must be >= 0")
        if self.upstream_timeout <= 0:
            raise ConfigError("upstream_timeout must be > 0")
        if self.max_request_bytes < 0 or self.auth_failures_per_minute < 0:
            raise ConfigError("max_request_bytes and auth_failures_per_minute must be >= 0")
        if self.archivist_llm not in ("", "upstream"):
            raise ConfigError(
                f"archivist_llm must be 'upstream' or unset, not {self.archivist_llm!r}"
            )
        if self.archivist_llm == "upstream":
            if not self.upstream_base_url or not self.archivist_model:
                raise ConfigError(
                    "the upstream as archivist needs an upstream URL and the model to use "
                    "(--upstream, --archivist-model)"
                )
            memory = self.memory.with_(
                llm="openai",
                llm_base_url=self.upstream_base_url,
                llm_api_key=self.upstream_api_key,
                llm_model=self.archivist_model,
            )
            object.__setattr__(self, "memory", memory)
        check_embedder(self.memory)  # refused at startup, not at a tenant's first request
        check_llm(self.memory)

    def resolved_data_dir(self) -> Path:
        return Path(self.data_dir) if self.data_dir else default_data_dir()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Read ARCHIVIST_* server variables (and the memory Settings) from the environment."""
        env = os.environ if env is None else env
        kw: dict[str, Any] = {"memory": Settings.from_env(env)}
        p = ENV_PREFIX
        if v := env.get(p + "DATA_DIR"):
            kw["data_dir"] = Path(v)
        keys: KeyPairs = ()
        if v := env.get(p + "SERVER_KEYS_FILE"):
            keys += load_keys_file(v)
        if v := env.get(p + "SERVER_KEYS"):
            keys += parse_keys(v)
        kw["keys"] = keys
        for name in (
            "upstream_base_url",
            "upstream_api_key",
            "upstream_model",
            "archivist_llm",
            "archivist_model",
        ):
            if v := env.get(p + name.upper()):
                kw[name] = v
        for name, conv in (
            ("context_budget", int),
            ("max_request_bytes", int),
            ("auth_failures_per_minute", int),
            ("upstream_timeout", float),
            ("drift_threshold", float),
        ):
            if v := env.get(p + name.upper()):
                try:
                    kw[name] = conv(v)
                except ValueError as e:
                    raise ConfigError(f"{p}{name.upper()}={v!r} is not a number") from e
        for name in ("allowed_hosts", "allowed_origins"):
            if v := env.get(p + name.upper()):
                kw[name] = tuple(x.strip() for x in v.split(",") if x.strip())
        if v := env.get(p + "SERVER_BACKGROUND"):
            kw["background"] = v.strip().lower()
        if v := env.get(p + "DRIFT_GUARD"):
            kw["drift_guard"] = v.strip().lower() in ("1", "true", "yes", "on")
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)
