"""kill -9 at any moment loses at most the requests in flight and never corrupts the store.

Two real processes are killed: ``possym llm`` in the middle of a grid against a slow local API
(then rerun to completion, which must send exactly what the store lacks), and a writer hammering
the store with commits, killed at random moments, which is where a torn write would show.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("anthropic", reason="the anthropic client is in the llm extra: pip install -e '.[llm]'")

from llm_fake_api import FakeAPI  # noqa: E402

CLI = "import sys; from possym.cli import main; sys.exit(main())"
GRID = ["llm.lengths=[12,16]", "llm.runs=2", "llm.n=25"]  # 2 tasks x 2 lengths x 2 runs x 25 = 200 prompts
TOTAL = 200
CONCURRENCY = 2


def _ok_rows(db: Path) -> int:
    """Rows with a reply, read through a separate connection as another process would."""
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM answers WHERE status = 'ok'").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def _integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _settled(api: FakeAPI, quiet_s: float = 0.5) -> int:
    """The requests the API has received once it has received no more for ``quiet_s``: on a loaded machine a
    request sent just before the kill may reach the server's thread only after the kill."""
    count = api.count()
    while True:
        time.sleep(quiet_s)
        if api.count() == count:
            return count
        count = api.count()


def _start(api: FakeAPI, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-c", CLI, "llm", "--provider", "anthropic", "--model", "m", f"llm.base_url={api.url}",
           "--out", str(out), *GRID, f"llm.concurrency={CONCURRENCY}", "--no-progress", "llm.plot=false"]  # fmt: skip
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test-kill9"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.long
def test_killing_the_grid_mid_run_loses_only_requests_in_flight_and_a_rerun_completes(tmp_path):
    db = tmp_path / "answers.sqlite"
    with FakeAPI(delay_s=0.05) as api:
        proc = _start(api, tmp_path)
        deadline = time.monotonic() + 300
        while _ok_rows(db) < 40:
            assert proc.poll() is None, f"the run ended before it could be killed:\n{proc.stdout.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the run did not store 40 answers within 300 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        sent_before_kill = _settled(api)

        assert _integrity(db) == "ok"
        stored = _ok_rows(db)
        assert 40 <= stored < TOTAL
        # Lost: at most the requests that were in flight (each worker's current and queued batch).
        assert sent_before_kill - stored <= 2 * CONCURRENCY

        rerun = _start(api, tmp_path)
        output, _ = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, output
        assert api.count() - sent_before_kill == TOTAL - stored  # exactly what the store lacked
        assert f"{TOTAL - stored} sent, {stored} already stored" in output

    assert _integrity(db) == "ok" and _ok_rows(db) == TOTAL
    results = (tmp_path / "results.csv").read_text().splitlines()
    assert len(results) == 1 + 8 and all(",1.0,25,25,0,0" in line for line in results[1:])


WRITER = """
import sys
from possym.llm.store import AnswerStore
store = AnswerStore(sys.argv[1])
i = store.count()
while True:
    store.put(key=f"k{i}", provider="p", model="m", params={}, prompt="x" * 2000 + str(i), status="ok",
              reply="y", error=None, attempts=1, latency_s=0.0)
    i += 1
"""


def test_a_store_killed_while_committing_opens_clean_and_keeps_every_commit(tmp_path):
    db = tmp_path / "answers.sqlite"
    rng = random.Random(0)
    previous = 0
    for _ in range(4):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)])
        deadline = time.monotonic() + 120
        while _ok_rows(db) <= previous + 20:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _integrity(db) == "ok"
        rows = _ok_rows(db)
        assert rows > previous  # nothing committed before is lost
        conn = sqlite3.connect(db)
        keys = {k for (k,) in conn.execute("SELECT key FROM answers")}
        conn.close()
        assert keys == {f"k{i}" for i in range(rows)}  # no gaps: each commit is all or nothing
        previous = rows
