"""The task vocabularies against the paper's tokenizer (paper App. B)."""

import string

import numpy as np
import pytest

from possym.tasks import PAD, Vocab, number_alphabet, task_config, task_vocab


def test_the_paper_alphabet_has_120_letters_ending_at_dp():
    alphabet = number_alphabet(120)
    assert len(alphabet) == len(set(alphabet)) == 120
    assert alphabet[-1] == "dp"


def test_the_alphabet_lists_single_letters_then_bigrams_in_lexicographic_order():
    alphabet = number_alphabet(702)
    assert alphabet[:26] == tuple(string.ascii_lowercase)
    assert list(alphabet[26:]) == sorted(alphabet[26:])
    assert alphabet[26:29] == ("aa", "ab", "ac") and alphabet[-1] == "zz"


def test_an_alphabet_beyond_zz_is_an_error():
    with pytest.raises(ValueError, match="n_letters=703"):
        number_alphabet(703)


def test_the_number_vocab_has_137_ids_in_the_paper_tokenizer_order():
    vocab = task_vocab(task_config("number"))
    assert len(vocab) == 137
    assert vocab.id(PAD) == 0
    assert [vocab.id(t) for t in ("1", "9", "16", "a", "z", "aa", "dp")] == [1, 9, 16, 17, 42, 43, 136]


def test_the_letter_vocab_has_129_ids_with_letter_int_tokens_before_letter_pairs():
    vocab = task_vocab(task_config("letter"))
    assert len(vocab) == 129
    assert vocab.id(PAD) == 0
    ids = [vocab.id(t) for t in ("a1", "a8", "b1", "h8", "aa", "ah", "ba", "hh")]
    assert ids == [1, 8, 9, 64, 65, 72, 73, 128]


def test_the_number_vocab_has_one_offset_per_possible_jump_of_a_custom_window():
    vocab = task_vocab(task_config("number", n_target=4, n_pretarget=6, n_letters=5, max_hops=3))
    assert vocab.tokens == (PAD, *(str(d) for d in range(1, 11)), "a", "b", "c", "d", "e")


@pytest.mark.parametrize("name", ["number", "letter"])
def test_encoding_then_decoding_returns_the_tokens(name):
    vocab = task_vocab(task_config(name))
    tokens = list(vocab.tokens[::-1])
    ids = vocab.encode(tokens)
    assert ids.dtype == np.int64
    assert vocab.decode(ids) == tokens
    assert vocab.encode(vocab.decode(np.arange(len(vocab)))).tolist() == list(range(len(vocab)))


def test_an_unknown_token_is_an_error_that_names_it():
    with pytest.raises(ValueError, match="'i9'"):
        task_vocab(task_config("letter")).encode(["a1", "i9"])


def test_decoding_an_id_outside_the_vocabulary_is_an_error():
    vocab = task_vocab(task_config("letter"))
    with pytest.raises(ValueError, match=r"\[129\]"):
        vocab.decode([1, 129])
    with pytest.raises(ValueError, match=r"\[-1\]"):
        vocab.decode([-1])


def test_a_vocab_must_start_with_pad_and_not_repeat_tokens():
    with pytest.raises(ValueError, match="must start with"):
        Vocab(("a", PAD))
    with pytest.raises(ValueError, match="repeated: \\['a'\\]"):
        Vocab((PAD, "a", "b", "a"))
