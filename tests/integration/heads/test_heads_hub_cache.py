"""A Hugging Face id whose snapshot is in the local Hugging Face cache opens offline, in the API and in
``possym heads`` alike; one that is not cached is refused in one line that says how to get it. The cache entry
is built here from a tiny saved model, in huggingface_hub's layout (``models--ORG--NAME/snapshots/REV`` and
``refs/main``), which huggingface_hub's own ``scan_cache_dir`` reads back; nothing is fetched."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
huggingface_hub = pytest.importorskip("huggingface_hub")

from possym.cli import main  # noqa: E402
from possym.local_models import ModelNotFoundError, cached_snapshot, load_local_model  # noqa: E402
from possym.model.hf import hf_tokenizer  # noqa: E402

REPO, REV = "tiny-org/tiny-llama", "0123456789abcdef0123456789abcdef01234567"
WORDS = tuple(f"w{i}" for i in range(48))


def tiny_llama() -> torch.nn.Module:
    cfg = transformers.LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   initializer_range=0.3)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(cfg).eval()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A Hugging Face cache holding REPO at REV (refs/main names it), as huggingface_hub reads it; offline."""
    cache = tmp_path / "hub"
    repo = cache / f"models--{REPO.replace('/', '--')}"
    snapshot = repo / "snapshots" / REV
    tiny_llama().save_pretrained(snapshot)
    hf_tokenizer(WORDS, WORDS[0]).save_pretrained(snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REV)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))  # read at import; set for this test
    (info,) = huggingface_hub.scan_cache_dir(cache).repos  # huggingface_hub's own reading of the layout
    assert (info.repo_id, [r.commit_hash for r in info.revisions]) == (REPO, [REV])
    return snapshot


def test_load_local_model_opens_a_cached_snapshot_offline(hub):
    assert cached_snapshot(REPO) == hub
    model, tokenizer = load_local_model(REPO)
    ids = torch.tensor([tokenizer("w1 w2 w3 w4").input_ids])
    assert ids.tolist() == [[1, 2, 3, 4]]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, tiny_llama()(ids).logits, rtol=0, atol=0)


def test_an_id_not_in_the_cache_is_refused_in_one_line_saying_how_to_get_it(hub, tmp_path, capsys):
    with pytest.raises(ModelNotFoundError, match=r"`hf download tiny-org/absent`") as err:
        load_local_model("tiny-org/absent")
    assert "\n" not in str(err.value) and str(hub.parents[3]) in str(err.value)  # names the cache it looked in
    out = tmp_path / "out"
    assert main(["heads", "--model", "tiny-org/absent", "--prompts", "binding", "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "`hf download tiny-org/absent`" in lines[0] and not out.exists()


def test_possym_heads_scores_a_cached_snapshot_by_its_id(hub, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(" ".join(WORDS[:12]) + "\n" + " ".join(WORDS[20:32]) + "\n")
    out = tmp_path / "out"
    assert main(["heads", "--model", REPO, "--prompts", str(prompts), "--out", str(out), "heads.figures=false"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == REPO and summary["architecture"] == "LlamaForCausalLM" and summary["n"] == 2
    assert len((out / "head_scores.csv").read_text().splitlines()) == 1 + 2 * 4
