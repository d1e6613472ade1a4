"""SQLite persistence of consolidation output: scenes, summaries, dossiers, key info,
context log and usefulness scores.

A mixin of SQLiteStore, kept apart so no module grows past ~500 lines.
"""

from __future__ import annotations

import sqlite3


class ConsolidationMixin:
    """Part of SQLiteStore (see the module docstring)."""

    _db: sqlite3.Connection
