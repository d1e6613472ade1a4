"""SQLite persistence of layers 1-2: entities, claim history, conflicts.

A mixin of SQLiteStore, kept apart so no module grows past ~500 lines.
"""

from __future__ import annotations

import sqlite3


class ReconcileMixin:
    """Part of SQLiteStore (see the module docstring)."""

    _db: sqlite3.Connection
