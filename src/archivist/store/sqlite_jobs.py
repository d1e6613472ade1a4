"""SQLite persistence of the durable job queue (jobs.py drives it).

A mixin of SQLiteStore, kept apart so no module grows past ~500 lines.
"""

from __future__ import annotations

import sqlite3


class JobsMixin:
    """Part of SQLiteStore (see the module docstring)."""

    _db: sqlite3.Connection
