"""SQLite persistence of layer 3: persons across conversations and identity decisions.

A mixin of SQLiteStore, kept apart so no module grows past ~500 lines.
"""

from __future__ import annotations

import sqlite3


class PeopleMixin:
    """Part of SQLiteStore (see the module docstring)."""

    _db: sqlite3.Connection
