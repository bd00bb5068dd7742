"""The grammar corpus: deterministic, agreeing, tokenised and batched as documented."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prenorm_lib.lab import data
from prenorm_lib.lab.data import (
    EOS,
    UNK,
    VOCABULARY,
    Tokenizer,
    generate_sentences,
    get_batch,
    make_corpus,
    sample_sentences,
)

SMALL = dict(n_train_sentences=300, n_val_sentences=50)

# Number of every word that carries one, written out by hand rather than read from the
# generator's tables, so the parser below checks the grammar against an independent list.
SINGULAR = {
    "a", "this", "each", "cat", "dog", "bird", "child", "teacher", "farmer", "king", "robot", "wolf", "mouse",
    "sees", "likes", "chases", "helps", "follows", "feeds", "visits", "sleeps", "runs", "sings", "is",
}
PLURAL = {
    "these", "many", "two", "cats", "dogs", "birds", "children", "teachers", "farmers", "kings", "robots",
    "wolves", "mice", "see", "like", "chase", "help", "follow", "feed", "visit", "sleep", "run", "sing", "are",
}
NOUNS = {w for pair in data.NOUNS for w in pair}
TRANSITIVE = {w for pair in data.TRANSITIVE_VERBS for w in pair}
INTRANSITIVE = {w for pair in data.INTRANSITIVE_VERBS for w in pair}


class Parser:
    """Recursive descent over one sentence; every agreement is checked as it is parsed."""

    def __init__(self, words):
        self.words, self.i = words, 0

    def peek(self):
        return self.words[self.i] if self.i < len(self.words) else None

    def take(self, allowed):
        word = self.peek()
        assert word in allowed, f"expected one of {sorted(allowed)[:5]}… at {self.i}, got {word!r}: {self.words}"
        self.i += 1
        return word

    @staticmethod
    def number(word):
        return "sg" if word in SINGULAR else "pl"

    def noun_phrase(self):
        det = self.take({"the"} | set(data.DETERMINERS["sg"]) | set(data.DETERMINERS["pl"]))
        if self.peek() in data.ADJECTIVES:
            self.i += 1
        noun = self.take(NOUNS)
        if det != "the":
            assert self.number(det) == self.number(noun), f"determiner {det!r} with noun {noun!r}: {self.words}"
        return self.number(noun)

    def verb(self, allowed, number):
        verb = self.take(allowed)
        assert self.number(verb) == number, f"verb {verb!r} with a {number} subject: {self.words}"

    def sentence(self):
        number = self.noun_phrase()
        if self.peek() == "and":
            self.i += 1
            self.noun_phrase()
            number = "pl"
        elif self.peek() in data.PREPOSITIONS:
            self.i += 1
            self.noun_phrase()
        elif self.peek() == "that":
            self.i += 1
            if self.peek() in TRANSITIVE:
                self.verb(TRANSITIVE, number)
                self.noun_phrase()
            else:
                self.verb(TRANSITIVE, self.noun_phrase())
        if self.peek() in data.ADVERBS:
            self.i += 1
        if self.peek() in TRANSITIVE:
            self.verb(TRANSITIVE, number)
            self.noun_phrase()
        elif self.peek() in INTRANSITIVE:
            self.verb(INTRANSITIVE, number)
        else:
            self.verb({"is", "are"}, number)
            self.take(set(data.ADJECTIVES))
        assert self.i == len(self.words), f"trailing words: {self.words}"


def test_every_generated_sentence_parses_and_agrees():
    sentences = generate_sentences(3000, seed=7)
    for sentence in sentences:
        Parser(sentence.words).sentence()
    assert SINGULAR.isdisjoint(PLURAL)


def test_agreement_points_name_the_written_word_and_its_other_form():
    for sentence in generate_sentences(500, seed=3):
        assert any(a.position == sentence.main_verb for a in sentence.agreements)
        for agreement in sentence.agreements:
            assert sentence.words[agreement.position] == agreement.correct
            assert {Parser.number(agreement.correct), Parser.number(agreement.wrong)} == {"sg", "pl"}


def test_attractors_exist_and_are_marked_correctly():
    sentences = generate_sentences(500, seed=3)
    hard = [s for s in sentences for a in s.agreements if a.attractor]
    assert len(hard) > 20
    for sentence in hard:
        verb = next(a for a in sentence.agreements if a.attractor)
        between = sentence.words[1 : verb.position]
        assert any(w in NOUNS and Parser.number(w) != Parser.number(verb.correct) for w in between)


def test_corpus_is_deterministic_and_seed_dependent():
    a, b, c = make_corpus(**SMALL), make_corpus(**SMALL), make_corpus(**SMALL, seed=1)
    assert torch.equal(a.train_ids, b.train_ids) and torch.equal(a.val_ids, b.val_ids)
    assert not torch.equal(a.train_ids[:200], c.train_ids[:200])
    assert sample_sentences(5, seed=2) == sample_sentences(5, seed=2)


def test_corpus_layout():
    corpus = make_corpus(**SMALL)
    assert 50 <= corpus.vocab_size <= 100
    assert corpus.train_ids.dtype == torch.long and corpus.train_ids.ndim == 1
    eos = corpus.tokenizer.eos_id
    assert (corpus.train_ids == eos).sum() == 300 and (corpus.val_ids == eos).sum() == 50
    assert corpus.train_ids[-1] == eos
    assert not (corpus.train_ids == corpus.tokenizer.unk_id).any()
    assert f"{corpus.vocab_size} words" in corpus.describe()


def test_tokenizer_round_trip_and_unknown_words():
    tokenizer = Tokenizer()
    text = "the wolves that a child follows are happy <eos> these mice sleep"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.decode(tokenizer.encode("The  CAT\tsleeps")) == "the cat sleeps"
    assert tokenizer.encode("the zebra") == [tokenizer.word_to_id["the"], tokenizer.unk_id]
    assert len(tokenizer) == len(VOCABULARY) and tokenizer.vocab[tokenizer.eos_id] == EOS
    assert tokenizer.vocab[tokenizer.unk_id] == UNK
    assert tokenizer.decode(torch.tensor([tokenizer.eos_id])) == EOS


def test_tokenizer_rejects_bad_input():
    tokenizer = Tokenizer()
    with pytest.raises(ValueError, match="ids must lie in"):
        tokenizer.decode([len(tokenizer)])
    with pytest.raises(TypeError, match="text must be a str"):
        tokenizer.encode(["the"])
    with pytest.raises(ValueError, match="<unk>"):
        Tokenizer(["<eos>", "cat"])


IDS = torch.arange(100)


@settings(max_examples=40, deadline=None)
@given(batch_size=st.integers(1, 8), context_length=st.integers(1, 99), seed=st.integers(0, 2**31))
def test_get_batch_shapes_and_shift(batch_size, context_length, seed):
    generator = torch.Generator().manual_seed(seed)
    x, y = get_batch(IDS, batch_size, context_length, generator)
    assert x.shape == y.shape == (batch_size, context_length)
    assert x.dtype == y.dtype == torch.long
    torch.testing.assert_close(y, x + 1)  # IDS[i] = i, so the next token is x + 1
    assert int(y.max()) <= 99


def test_get_batch_is_seeded():
    first = get_batch(IDS, 4, 8, torch.Generator().manual_seed(5))
    again = get_batch(IDS, 4, 8, torch.Generator().manual_seed(5))
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))


def test_paired_batches_are_one_generator_s_batches_in_turn():
    """What the paired experiments read: the batches get_batch draws one after another from one seed."""
    generator = torch.Generator().manual_seed(7)
    by_hand = [get_batch(IDS, 4, 8, generator) for _ in range(3)]
    paired = data.paired_batches(IDS, 3, 4, 8, seed=7)
    assert len(paired) == 3 and all(torch.equal(a, b) for pair in zip(paired, by_hand, strict=True)
                                    for a, b in zip(*pair, strict=True))
    assert not torch.equal(data.paired_batches(IDS, 1, 4, 8, seed=8)[0][0], paired[0][0])
    with pytest.raises(ValueError, match="count"):
        data.paired_batches(IDS, 0, 4, 8, seed=7)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((IDS, 4, 100), ValueError, "context_length"),
        ((IDS.view(10, 10), 4, 3), ValueError, "1-D"),
        ((IDS, 0, 3), ValueError, "batch_size"),
        (([1, 2, 3], 1, 1), TypeError, "ids"),
    ],
)
def test_get_batch_rejects_bad_input(args, error, message):
    with pytest.raises(error, match=message):
        get_batch(*args)


def test_the_shipped_default_corpus_is_what_the_grammar_writes(monkeypatch):
    """make_corpus() reads the shipped copy; it must equal a fresh generation, id for id."""
    import prenorm_lib.lab.data as data

    shipped = make_corpus()
    monkeypatch.setattr(data, "CORPUS_CACHE", data.CORPUS_CACHE.with_name("absent.npz"))
    fresh = make_corpus()
    assert torch.equal(shipped.train_ids, fresh.train_ids) and torch.equal(shipped.val_ids, fresh.val_ids), (
        "the shipped corpus is stale: run prenorm_lib.lab.data.write_corpus_cache()")
    assert shipped.train_ids.dtype == torch.long and shipped.describe() == fresh.describe()


def test_a_stale_shipped_corpus_is_noticed_and_not_used(monkeypatch, tmp_path):
    import numpy as np

    import prenorm_lib.lab.data as data

    with np.load(data.CORPUS_CACHE) as cached:
        train, val = cached["train"].copy(), cached["val"].copy()
    train[5] = (train[5] + 1) % 50  # a grammar that changed: the first sentences differ
    stale = tmp_path / "grammar_seed0.npz"
    np.savez_compressed(stale, train=train, val=val)
    monkeypatch.setattr(data, "CORPUS_CACHE", stale)
    with pytest.warns(UserWarning, match="no longer matches the grammar"):
        corpus = make_corpus()
    assert corpus.train_ids[5] != train[5]
