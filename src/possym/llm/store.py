"""The answer store: every request and its reply, in one SQLite file, safe against kill -9.

Each answer is one row, written in its own transaction, so a process killed at any moment loses at
most the requests that were in flight. SQLite in WAL mode never leaves a half-written transaction
visible: after a crash the next open rolls the log back to the last commit. ``synchronous=NORMAL``
keeps every commit that reached the operating system, which is all of them when only the process
dies; a power cut may drop the last few commits but still never corrupts the file.

A row is keyed by ``answer_key(provider, model, params, prompt)``: the provider's name, the model,
the generation parameters that change a reply (temperature, max tokens, reasoning mode, ...), and
the SHA-256 of the prompt text. Secrets never enter a key or a row: providers keep API keys out of
``params``, and the runner redacts them from error messages before they reach ``put``.

Only this module writes the database.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from possym.errors import PossymError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key         TEXT PRIMARY KEY,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    params      TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    task        TEXT,
    length      INTEGER,
    run         INTEGER,
    idx         INTEGER,
    target      TEXT,
    prompt      TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    reply       TEXT,
    error       TEXT,
    attempts    INTEGER NOT NULL,
    latency_s   REAL NOT NULL,
    created_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_model ON answers (provider, model, params);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def canonical_params(params: Mapping[str, Any]) -> str:
    """The parameters as canonical JSON (sorted keys, no spaces): one spelling per setting."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"), default=str)


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def answer_key(provider: str, model: str, params: Mapping[str, Any], prompt: str) -> str:
    """SHA-256 over provider, model, canonical parameters and prompt hash, joined unambiguously."""
    parts = json.dumps([provider, model, canonical_params(params), prompt_hash(prompt)])
    return hashlib.sha256(parts.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredAnswer:
    """One row of the store."""

    key: str
    provider: str
    model: str
    params: str
    prompt_hash: str
    task: str | None
    length: int | None
    run: int | None
    idx: int | None
    target: str | None
    prompt: str
    status: str
    reply: str | None
    error: str | None
    attempts: int
    latency_s: float
    created_at: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"


_COLUMNS = tuple(StoredAnswer.__dataclass_fields__)


class AnswerStore:
    """An SQLite answer store in WAL mode; use as a context manager or call ``close``.

    One connection, used from the thread that opened it: the runner collects replies from its
    workers and writes them from the main thread.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, one transaction per answer.
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.executescript(_SCHEMA)
        self._conn.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )

    def __enter__(self) -> AnswerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    @property
    def journal_mode(self) -> str:
        return str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])

    def put(
        self,
        *,
        key: str,
        provider: str,
        model: str,
        params: Mapping[str, Any],
        prompt: str,
        status: str,
        reply: str | None,
        error: str | None,
        attempts: int,
        latency_s: float,
        task: str | None = None,
        length: int | None = None,
        run: int | None = None,
        idx: int | None = None,
        target: str | None = None,
    ) -> None:
        """Write one answer in its own transaction. A successful answer is never overwritten by a failure."""
        if status not in ("ok", "error"):
            raise PossymError(f"status={status!r}; allowed: 'ok', 'error'")
        row = (
            key, provider, model, canonical_params(params), prompt_hash(prompt), task, length, run, idx,
            target, prompt, status, reply, error, attempts, latency_s, time.time(),
        )  # fmt: skip
        placeholders = ", ".join("?" * len(_COLUMNS))
        with self._transaction():
            existing = self._conn.execute("SELECT status, attempts FROM answers WHERE key = ?", (key,)).fetchone()
            if existing is not None and existing[0] == "ok" and status != "ok":
                return
            if existing is not None:
                # Attempts accumulate across reruns, so a row says how hard it was to get.
                row = row[:14] + (attempts + int(existing[1]),) + row[15:]
            self._conn.execute(f"INSERT OR REPLACE INTO answers VALUES ({placeholders})", row)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def get(self, key: str) -> StoredAnswer | None:
        row = self._conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else StoredAnswer(*row)

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredAnswer]:
        """Rows for the given keys (absent keys are left out), fetched in chunks."""
        keys = list(keys)
        out: dict[str, StoredAnswer] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT {', '.join(_COLUMNS)} FROM answers WHERE key IN ({marks})"
            for row in self._conn.execute(sql, chunk):
                answer = StoredAnswer(*row)
                out[answer.key] = answer
        return out

    def ok_keys(self, keys: Iterable[str]) -> set[str]:
        """The subset of ``keys`` that already holds a successful answer (these are skipped on rerun)."""
        return {k for k, a in self.get_many(keys).items() if a.ok}

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
        return int(self._conn.execute("SELECT COUNT(*) FROM answers WHERE status = ?", (status,)).fetchone()[0])

    def integrity_check(self) -> str:
        """SQLite's own ``PRAGMA integrity_check``: 'ok' for a sound file."""
        return str(self._conn.execute("PRAGMA integrity_check").fetchone()[0])


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on an exception."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
