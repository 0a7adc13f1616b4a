"""The ledger: every passport's history in append-only Parquet that any reader unifying columns
by name takes (DuckDB, Spark, Trino; pandas through DuckDB), and what passport reads from it: SQL
queries, a metric's history with a change detector and an HTML trend plot, and a baseline for
`passport gate`. Layout and concurrency: `_store.py`; the columns: `_rows.py`."""

from __future__ import annotations

from passport.ledger._history import WINDOW, History, Point, history, history_json
from passport.ledger._ledger import Added, Baseline, LedgerError, add, connect, pick_baseline, query
from passport.ledger._plot import figure_scale, history_html
from passport.ledger._store import TABLES, ledger_files

__all__ = ["Added", "Baseline", "History", "LedgerError", "Point", "TABLES", "WINDOW", "add", "connect", "history",
           "history_html", "history_json", "figure_scale", "ledger_files", "pick_baseline", "query"]
