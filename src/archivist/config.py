"""One frozen Settings object; the environment is read only by ``Settings.from_env``.

Library code receives a Settings and never looks at ``os.environ`` itself, so
constructing a Memory has no hidden inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import ConfigError

ENV_PREFIX = "ARCHIVIST_"
STORES = ("sqlite", "postgres")
CONFLICT_POLICIES = ("newest_wins", "oldest_wins", "keep_both")
CONSOLIDATE_MODES = ("inline", "background", "manual")
JUDGES = ("auto", "model", "llm", "rules")


def default_db_path() -> Path:
    """A file under the user's data dir (platform-specific), e.g. ~/.local/share/archivist."""
    import platformdirs

    return Path(platformdirs.user_data_dir("archivist")) / "memory.db"


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with embedded defaults that need no network."""

    db_path: Path | None = None  # the SQLite file (default: under the user's data dir)
    store: str = "sqlite"  # one of STORES; "postgres" needs pg_dsn and archivist[postgres]
    pg_dsn: str = ""  # e.g. postgresql://user:pass@host:5432/db (managed Postgres works)
    pg_schema: str = "public"  # one schema per tenant keeps tenants apart on one server
    pg_pool_size: int = 4  # connections a PostgreSQL store opens at most (threads share them)
    embedder: str = "local"  # a name in archivist.embed.PROVIDERS
    embed_model: str = ""  # OpenAI-compatible model name; ignored by "local"
    embed_base_url: str = ""  # an OpenAI-compatible embeddings endpoint
    embed_api_key: str = ""  # its key (OPENAI_API_KEY when empty)
    embed_dim: int = 0  # optional: expected dimension for remote models
    embed_timeout: float = 30.0  # seconds per remote embedding call
    embed_batch_size: int = 64  # texts per embedding call
    embed_threads: int = 0  # onnxruntime intra-op threads; 0 = library default
    search_preset: str = "archivist"  # a name in archivist.read.search.PRESETS
    llm: str = ""  # "" / "none": heuristic archivist; else a name in archivist.llm.PROVIDERS
    llm_model: str = ""  # the model name (or, for "local", the GGUF file)
    llm_base_url: str = ""  # an OpenAI-compatible chat endpoint
    llm_api_key: str = ""  # its key (OPENAI_API_KEY when empty)
    llm_timeout: float = 60.0  # seconds per LLM call
    llm_concurrency: int = 4  # parallel LLM calls (extraction batches across episodes)
    conflict_policy: str = "newest_wins"  # how a contradiction between two claims resolves
    # Who judges meaning (what kind of memory a sentence is, does a statement end an older
    # one, does a sentence answer a question): "auto" = the configured LLM when there is
    # one, else the trained judge shipped in the package ("model"); "llm", or "rules"
    # (the old phrase rules, kept as a baseline)
    judge: str = "auto"
    # Reconcile new claims (duplicates, refinements, conflicts, entity filing) as soon as
    # they are extracted, so reads right after add() see the new truth; off: only the
    # consolidation round's reconcile job does (to study that job alone).
    reconcile_on_write: bool = True
    consolidate_every: int = 10  # new messages per conversation between consolidation rounds
    # inline: add() runs due jobs before returning; background: a worker thread runs
    # them (servers); manual: only ``consolidate()`` / ``archivist consolidate`` does.
    consolidate_mode: str = "inline"
    # A server reads a live chat as it grows. With an LLM archivist a short new tail
    # waits for more turns (one call per tail, so tails of 2 would cost 0.5 calls a
    # message) until it has extract_min_tail messages or the chat is idle this long.
    extract_min_tail: int = 8
    extract_idle_s: float = 120.0  # seconds of quiet after which a short tail is read
    # context-log rows a store keeps, the newest (0: all): one per proxied or recorded
    # turn, read by the browser's "what the assistant saw" and by usefulness scoring
    context_log_keep: int = 100_000

    def __post_init__(self) -> None:
        # Provider names (embedder, llm) are checked by their registries, the one place
        # that knows them: embed.check_embedder and llm.check_llm (Core runs both).
        if self.store not in STORES:
            raise ConfigError(f"store must be one of {', '.join(STORES)}; got {self.store!r}")
        if self.store == "postgres" and not self.pg_dsn:
            raise ConfigError(f"store 'postgres' needs pg_dsn ({ENV_PREFIX}PG_DSN)")
        if self.conflict_policy not in CONFLICT_POLICIES:
            raise ConfigError(
                f"conflict_policy must be one of {', '.join(CONFLICT_POLICIES)}; "
                f"got {self.conflict_policy!r}"
            )
        if self.consolidate_mode not in CONSOLIDATE_MODES:
            raise ConfigError(
                f"consolidate_mode must be one of {', '.join(CONSOLIDATE_MODES)}; "
                f"got {self.consolidate_mode!r}"
            )
        if self.judge not in JUDGES:
            raise ConfigError(f"judge must be one of {', '.join(JUDGES)}; got {self.judge!r}")
        if self.judge == "llm" and self.llm in ("", "none"):
            raise ConfigError(f"judge 'llm' needs an LLM ({ENV_PREFIX}LLM)")
        if self.consolidate_every < 1:
            raise ConfigError("consolidate_every must be >= 1")
        if self.llm_timeout <= 0 or self.llm_concurrency < 1:
            raise ConfigError("llm_timeout must be > 0 and llm_concurrency >= 1")
        if self.pg_pool_size < 1:
            raise ConfigError("pg_pool_size must be >= 1")
        if self.context_log_keep < 0:
            raise ConfigError("context_log_keep must be >= 0 (0 keeps every row)")

    def with_(self, **changes: object) -> Settings:
        """A copy with some fields changed (Settings are never mutated)."""
        return replace(self, **changes)

    def resolved_db_path(self) -> Path:
        return Path(self.db_path) if self.db_path else default_db_path()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read ARCHIVIST_* variables (the only place the environment is consulted)."""
        env = os.environ if env is None else env
        kw: dict[str, object] = {}
        if v := env.get(ENV_PREFIX + "DB"):
            kw["db_path"] = Path(v)
        for name in (
            "embedder",
            "embed_model",
            "embed_base_url",
            "embed_api_key",
            "search_preset",
            "llm",
            "llm_model",
            "llm_base_url",
            "llm_api_key",
            "conflict_policy",
            "judge",
            "consolidate_mode",
            "store",
            "pg_dsn",
            "pg_schema",
        ):
            if v := env.get(ENV_PREFIX + name.upper()):
                kw[name] = v
        for name, conv in (
            ("embed_dim", int),
            ("embed_timeout", float),
            ("embed_batch_size", int),
            ("embed_threads", int),
            ("llm_timeout", float),
            ("llm_concurrency", int),
            ("consolidate_every", int),
            ("extract_min_tail", int),
            ("extract_idle_s", float),
            ("context_log_keep", int),
            ("pg_pool_size", int),
        ):
            if v := env.get(ENV_PREFIX + name.upper()):
                try:
                    kw[name] = conv(v)
                except ValueError as e:
                    raise ConfigError(f"{ENV_PREFIX}{name.upper()}={v!r} is not a number") from e
        if v := env.get(ENV_PREFIX + "RECONCILE_ON_WRITE"):
            kw["reconcile_on_write"] = v.strip().lower() in ("1", "true", "yes", "on")
        for key in ("embed_api_key", "llm_api_key"):
            if not kw.get(key) and env.get("OPENAI_API_KEY"):
                kw[key] = env["OPENAI_API_KEY"]
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)


T = TypeVar("T")


@dataclass(frozen=True)
class Provider(Generic[T]):
    """One entry of a provider registry (embed.PROVIDERS, llm.PROVIDERS): how to make
    the provider from Settings, and the settings it cannot do without."""

    make: Callable[[Any], T]
    needs: tuple[str, ...] = ()  # Settings fields that must be non-empty
    hint: str = ""  # what ``needs`` should hold, for the error message


def check_provider(
    kind: str, name: str, registry: Mapping[str, Provider], settings: Any, extra: tuple = ()
) -> Provider:
    """The registry entry ``name`` names, or a ConfigError saying what is unknown or missing.

    ``extra``: further accepted names to list (``none`` for the LLM).
    """
    if name not in registry:
        choices = ", ".join([*registry, *extra])
        raise ConfigError(f"unknown {kind} {name!r}; choose one of {choices}")
    entry = registry[name]
    if any(not getattr(settings, f, "") for f in entry.needs):
        hint = f": {entry.hint}" if entry.hint else ""
        env = ", ".join(ENV_PREFIX + f.upper() for f in entry.needs)
        raise ConfigError(f"{kind} {name!r} needs {' and '.join(entry.needs)}{hint} (env {env})")
    return entry
