"""possym.head_scores returns one type for every model kind (possym, Hugging Face, TransformerLens, nnsight): the
same table from ``.frame()`` and ``.records()`` with no argument (the key heads read from the model), the same
numbers for the same weights, on token tensors, on strings with a tokenizer (as TransformerLens's ``detect_head``
takes them) and on HeadPrompts, with a progress bar over the inputs. Built from configs; nothing is downloaded."""

from __future__ import annotations

import importlib.util
import warnings
from importlib.metadata import version

import pytest
import torch

transformers = pytest.importorskip("transformers")

import possym  # noqa: E402
from possym.config import ModelConfig  # noqa: E402
from possym.errors import PossymError  # noqa: E402
from possym.heads.detectors import HEAD_NAMES  # noqa: E402
from possym.heads.dispatch import score_any  # noqa: E402
from possym.heads.prompts import HeadPrompt  # noqa: E402
from possym.model.gptj import GPTJ  # noqa: E402
from possym.model.hf import hf_tokenizer, to_hf  # noqa: E402
from possym.scores.swaps import HeadScores  # noqa: E402

WORDS = tuple(f"w{i}" for i in range(40))
COLUMNS = ["layer", "head", "kv_head", "s_pos", "s_sym", "entropy", "n_inputs", "s_pos_sd", "s_pos_low", "s_pos_high",
           "s_sym_sd", "s_sym_low", "s_sym_high", *HEAD_NAMES]
TL_MAJOR = int(version("transformer-lens").split(".")[0]) if importlib.util.find_spec("transformer_lens") else 0


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def model() -> GPTJ:
    cfg = ModelConfig(n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=len(WORDS), dropout=0.0, init_range=0.3)
    return GPTJ(cfg, torch.Generator().manual_seed(0)).double().eval()


def tokens() -> torch.Tensor:
    first = torch.randint(0, len(WORDS), (5, 6), generator=torch.Generator().manual_seed(1))
    return torch.cat((first, first), 1)  # repeated: duplicate and induction targets exist


def texts() -> list[str]:
    return [" ".join(WORDS[t] for t in row) for row in tokens().tolist()]


def assert_same(a: HeadScores, b: HeadScores, atol: float = 1e-9) -> None:
    assert type(a) is type(b) is HeadScores
    fa, fb = a.frame(), b.frame()
    assert list(fa.columns) == list(fb.columns) == COLUMNS
    for column in COLUMNS:
        torch.testing.assert_close(torch.tensor(fb[column].to_numpy()), torch.tensor(fa[column].to_numpy()),
                                   rtol=0, atol=atol, equal_nan=True, msg=column)


def test_every_kind_of_model_gives_one_type_with_one_table():
    gptj = model()
    ours = possym.head_scores(gptj, tokens(), progress=False)
    assert not ours.frame()[list(HEAD_NAMES)].isna().any().any()  # the detectors, for a possym model too
    kinds = {"hugging-face": to_hf(gptj).double().eval()}
    if TL_MAJOR == 3:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            kinds["hooked-transformer"] = possym.to_hooked_transformer(gptj)
    if TL_MAJOR:
        kinds["bridge"] = possym.to_transformer_bridge(gptj)
    nnsight = pytest.importorskip("nnsight")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kinds["nnsight-language-model"] = nnsight.LanguageModel(to_hf(gptj).double().eval(),
                                                                tokenizer=hf_tokenizer(WORDS, WORDS[0]))
    kinds["nnsight-possym"] = nnsight.NNsight(model())
    for name, other in kinds.items():
        # HF GPT-J's RoPE frequencies are float32: its rows differ by ~1e-7, its scores (/ τ) by ~1e-6
        assert_same(ours, possym.head_scores(other, tokens(), progress=False), atol=1e-5 if "nnsight-p" not in name
                    else 1e-9)


def test_the_key_heads_come_from_the_model():
    cfg = transformers.LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        llama = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    records = possym.head_scores(llama, tokens(), progress=False).records()
    assert [r["kv_head"] for r in records[:4]] == [0, 0, 1, 1]
    assert records[0]["n_inputs"] == 5 and set(HEAD_NAMES) <= set(records[0])
    assert possym.head_scores(model(), tokens(), progress=False).records()[3]["kv_head"] == 3  # no grouping


def test_strings_with_a_tokenizer_score_as_their_tokens_and_on_the_prompt_loop_as_on_the_engine():
    gptj, tok = model(), hf_tokenizer(WORDS, WORDS[0])
    engine = possym.head_scores(gptj, tokens(), progress=False)
    assert_same(engine, possym.head_scores(gptj, texts(), tokenizer=tok, progress=False), atol=1e-9)
    hf = to_hf(gptj).double().eval()
    assert_same(possym.head_scores(hf, tokens(), progress=False),
                possym.head_scores(hf, texts(), tokenizer=tok, progress=False), atol=0)
    with pytest.raises(PossymError, match="tokenizer="):
        possym.head_scores(hf, texts(), progress=False)
    # HeadPrompts: their spans laid on tokens, here every word but the query, one block each
    prompts = [HeadPrompt(t, "words", (0, len(t))) for t in texts()]
    assert_same(engine, possym.head_scores(gptj, prompts, tokenizer=tok, progress=False), atol=1e-9)


@pytest.mark.tl4
def test_a_transformer_lens_model_reads_strings_with_its_own_tokenizer_as_detect_head_does():
    pytest.importorskip("transformer_lens")
    gptj = model()
    bridge = possym.to_transformer_bridge(gptj, tokenizer=hf_tokenizer(WORDS, WORDS[0]))
    from transformer_lens.head_detector import detect_head

    frame = possym.head_scores(bridge, texts(), progress=False).frame()
    for name in HEAD_NAMES:
        theirs = detect_head(bridge, texts(), name).flatten().double()
        torch.testing.assert_close(torch.tensor(frame[name].to_numpy()), theirs, rtol=0, atol=1e-6)
    assert_same(possym.head_scores(gptj, tokens(), progress=False),
                possym.head_scores(bridge, texts(), progress=False), atol=1e-5)


def test_the_progress_bar_counts_the_inputs(capsys):
    counted: list[int] = []
    score_any(model(), tokens(), progress=counted.append, batch_size=2)
    assert counted == [2, 2, 1]
    counted.clear()
    score_any(to_hf(model()).double().eval(), texts(), tokenizer=hf_tokenizer(WORDS, WORDS[0]),
              progress=counted.append, batch_size=4)
    assert sum(counted) == 5
    possym.head_scores(model(), tokens())
    assert "head_scores:" in (err := capsys.readouterr().err) and "0/5" in err  # a bar over the 5 inputs
