"""The openai-compatible provider against a real server: ``transformers serve`` on 127.0.0.1 with SmolLM2.

transformers 5.x's ``serve`` takes a GGUF as ``<dir>:<file>.gguf`` but then fails, because a GGUF
config names no ``architectures``. So the test writes the de-quantised model as a plain directory
(``export_to_directory``) in a temporary folder and serves that. The server decodes greedily at
temperature 0 with ``generate``; its replies must equal the hf provider's for the same prompts.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# The second tier (`make test-long`): SmolLM2 loaded, exported and served.
pytestmark = pytest.mark.long

pytest.importorskip("openai", reason="the openai client is in the llm extra: pip install -e '.[llm]'")
pytest.importorskip("fastapi", reason="transformers serve needs the transformers[serving] extra (in .[llm])")
pytest.importorskip("uvicorn", reason="transformers serve needs the transformers[serving] extra (in .[llm])")

from possym.cli import main  # noqa: E402
from possym.local_models import export_to_directory  # noqa: E402
from possym.one_hop import load_templates, make_grid  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _transformers_cli() -> list[str]:
    script = Path(sys.executable).parent / "transformers"
    if script.exists():
        return [str(script)]
    found = shutil.which("transformers")
    if found is None:
        pytest.skip("the `transformers` command is not installed next to this Python")
    return [found]


@pytest.fixture(scope="module")
def server(smol, tmp_path_factory):
    model_dir = export_to_directory(smol._lm, smol._tokenizer, tmp_path_factory.mktemp("smollm2") / "model")
    port = _free_port()
    log = open(model_dir.parent / "serve.log", "w+")  # noqa: SIM115 - closed below, after the process
    cmd = [*_transformers_cli(), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu", "--dtype", "float32"]  # fmt: skip
    # One thread: on CPUs shared with other jobs, two OpenMP threads make each request ~10x slower.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail(f"transformers serve did not come up:\n{log.read()[-3000:]}")
            time.sleep(1)
        yield {"url": f"http://127.0.0.1:{port}/v1", "model": str(model_dir)}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
    assert proc.returncode is not None  # the server is stopped


def test_openai_compatible_against_transformers_serve_matches_the_hf_provider(server, smol, tmp_path):
    args = ["llm", "--provider", "openai-compatible", "--model", server["model"], f"llm.base_url={server['url']}",
            "--out", str(tmp_path), "llm.lengths=[12]", "llm.runs=1", "llm.n=2", "llm.concurrency=2",
            "--no-progress", "llm.plot=false"]  # fmt: skip
    assert main(args) == 0
    templates = load_templates()
    instances = make_grid(("number", "letter"), (12,), (1,), 2)
    prompts = [templates.render(i) for i in instances]
    db = sqlite3.connect(tmp_path / "answers.sqlite")
    served = dict(db.execute("SELECT prompt, reply FROM answers WHERE status = 'ok'").fetchall())
    assert set(served) == set(prompts)
    assert [served[p] for p in prompts] == smol.complete(prompts)
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert rows[0].startswith("provider,model,task,length,run,accuracy,n,") and len(rows) == 3
