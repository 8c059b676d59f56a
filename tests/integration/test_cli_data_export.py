import json

import numpy as np
import torch

from possym.cli import main
from possym.config import load_config
from possym.runs import RunDir
from possym.tasks import make_splits, solve, task_vocab
from possym.train.fused import last_token_logits
from possym.train.loop import train


def test_data_command_writes_solvable_jsonl(tmp_path):
    out = tmp_path / "letter.jsonl"
    assert main(["data", "--task", "letter", "data.n=50", "data.seed=3", "data.extra=7", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 50 and all(len(r["tokens"]) == 17 + 7 for r in rows)
    for r in rows:
        sol = solve("letter", r["tokens"])
        assert (sol.answer, sol.n_hops, list(sol.path)) == (r["answer"], r["n_hops"], r["path"])


def test_data_to_standard_output_is_the_file_s_lines_alone_and_writes_no_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["data", "--task", "number", "data.n=6", "data.seed=2"]
    assert main([*args, "--out", "-"]) == 0
    printed = capsys.readouterr()
    assert main([*args, "--out", "file.jsonl"]) == 0
    assert printed.out == (tmp_path / "file.jsonl").read_text() and len(printed.out.splitlines()) == 6
    assert "6 number instances to standard output" in printed.err and not (tmp_path / "-").exists()


def test_data_command_reads_a_split_of_the_paper_dataset(tmp_path):
    out = tmp_path / "val.jsonl"
    args = ["data", "--task", "number", "data.split=val", "data.n=20", "data.seed=0", "--out", str(out)]
    assert main(args + ["task.n_train=100", "task.n_test=100"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    cfg = load_config("number", None, ["task.n_train=100", "task.n_test=100"]).task
    expected = make_splits(cfg, 0)["val"].take(np.arange(20)).records(task_vocab(cfg))
    assert rows == expected


def test_exported_folder_loads_with_plain_transformers_and_predicts_the_same(tmp_path, tiny_overrides):
    """The authors' recipe (exact GELU, no embedding dropout): config.json carries both, and plain
    transformers computes the same function from it."""
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    recipe = ["model.activation=gelu", "model.embd_dropout=0.0", "model.dropout=0.1"]
    run = RunDir.create(tmp_path / "run", load_config("letter", None, tiny_overrides + recipe), argv=["t"])
    splits = make_splits(run.config.task, 0)
    train(run, splits)
    assert main(["export", str(run.path), "--out", str(tmp_path / "hf")]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["activation_function"], config["embd_pdrop"], config["resid_pdrop"]) == ("gelu", 0.0, 0.1)

    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    samples = splits["test"].take(np.arange(64))
    texts = [" ".join(r["tokens"]) for r in samples.records(task_vocab(run.config.task))]
    ids = tok(texts, return_tensors="pt")["input_ids"]
    assert torch.equal(ids, torch.as_tensor(samples.tokens)), "the tokenizer must reproduce possym's ids"
    with torch.no_grad():
        theirs = hf(ids).logits[:, -1]
    ours = last_token_logits(run.load_model(), ids).argmax(-1)
    assert torch.equal(theirs.argmax(-1), ours)
    torch.testing.assert_close(theirs, run.load_model()(ids)[:, -1], atol=1e-5, rtol=1e-5)
