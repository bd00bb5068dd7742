"""A tiny English-like corpus generated offline, where number agreement needs attention.

Used by the training experiments of notebooks 03 and 04 (notebook 02 trains on real
prose instead, :mod:`prenorm_lib.lab.prose`: this grammar has too little headroom to
separate feed-forward networks). No download: a small probabilistic
grammar writes the sentences, so every run of a notebook sees exactly the same text.

The grammar is chosen so that a language model has something to learn at every scale:

- *word classes and order* (a determiner, maybe an adjective, a noun, a verb …) — learnt
  in the first tens of steps, a bigram model gets most of it;
- *determiner–noun agreement*: "this" and "a" want a singular noun, "these" and "two" a
  plural one, "the" either — one token back;
- *subject–verb agreement across several words*: the verb's form (sees/see, is/are)
  follows the number of the subject's head noun, which may lie eight tokens back behind
  a prepositional phrase or a relative clause whose own noun has the other number
  ("the wolf near the children sleeps", "the dogs that the cat chases are lazy"). Only a
  model that attends to the right earlier position gets these right, which is why
  attention and positional information matter here (Linzen et al. 2016 used the same
  test on natural text).
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from prenorm_lib import validation

EOS = "<eos>"
UNK = "<unk>"

SINGULAR, PLURAL = "sg", "pl"
NUMBERS = (SINGULAR, PLURAL)

# (singular, plural) pairs. Irregular plurals keep number a property of the word, not of a suffix.
NOUNS = (
    ("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("child", "children"),
    ("teacher", "teachers"), ("farmer", "farmers"), ("king", "kings"), ("robot", "robots"),
    ("wolf", "wolves"), ("mouse", "mice"),
)
TRANSITIVE_VERBS = (
    ("sees", "see"), ("likes", "like"), ("chases", "chase"), ("helps", "help"),
    ("follows", "follow"), ("feeds", "feed"), ("visits", "visit"),
)
INTRANSITIVE_VERBS = (("sleeps", "sleep"), ("runs", "run"), ("sings", "sing"))
COPULA = ("is", "are")
DETERMINERS = {SINGULAR: ("a", "this", "each"), PLURAL: ("these", "many", "two")}
NEUTRAL_DETERMINER = "the"
ADJECTIVES = ("big", "small", "brave", "lazy", "happy", "tiny", "clever", "quiet")
ADVERBS = ("often", "never", "always", "rarely")
PREPOSITIONS = ("near", "behind", "with")
RELATIVISER = "that"
CONJUNCTION = "and"


def _vocabulary() -> tuple[str, ...]:
    """Every word the grammar can write, specials first, in a fixed order."""
    words = [EOS, UNK, NEUTRAL_DETERMINER, *DETERMINERS[SINGULAR], *DETERMINERS[PLURAL]]
    for pairs in (NOUNS, TRANSITIVE_VERBS, INTRANSITIVE_VERBS, (COPULA,)):
        words += [word for pair in pairs for word in pair]
    words += [*ADJECTIVES, *ADVERBS, *PREPOSITIONS, RELATIVISER, CONJUNCTION]
    return tuple(words)


VOCABULARY = _vocabulary()


class Tokenizer:
    """Word-level tokenizer: one id per word, ``<unk>`` for anything else.

    Text is lower-cased and split on white space; ``<eos>`` in the text is the
    end-of-sentence token. A word-level vocabulary keeps every id readable, which a
    course about the model (not about tokenisation) wants.
    """

    def __init__(self, vocab: tuple[str, ...] | list[str] = VOCABULARY):
        vocab = list(vocab)
        for special in (EOS, UNK):
            if special not in vocab:
                raise ValueError(f"vocab must contain {special!r}, got {len(vocab)} words without it")
        if len(set(vocab)) != len(vocab):
            raise ValueError("vocab must not repeat a word")
        self.vocab = vocab
        self.word_to_id = {word: i for i, word in enumerate(vocab)}
        self.eos_id = self.word_to_id[EOS]
        self.unk_id = self.word_to_id[UNK]

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return [self.word_to_id.get(word, self.unk_id) for word in text.lower().split()]

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        for i in ids:
            if not 0 <= i < len(self.vocab):
                raise ValueError(f"ids must lie in [0, {len(self.vocab)}), got {i}")
        return " ".join(self.vocab[i] for i in ids)


@dataclass(frozen=True)
class Agreement:
    """One place where a word's form is fixed by a word earlier in the sentence.

    ``position`` indexes the sentence's words; ``correct`` is the word written there and
    ``wrong`` the same word in the other number. ``attractor`` says whether a noun of the
    other number stands between the controller and this word (the hard cases).
    """

    position: int
    correct: str
    wrong: str
    kind: str  # "det-noun" or "subject-verb"
    attractor: bool = False


@dataclass
class Sentence:
    words: list[str] = field(default_factory=list)
    agreements: list[Agreement] = field(default_factory=list)
    main_verb: int = -1  # index of the main clause's verb (subject–verb agreement)

    @property
    def text(self) -> str:
        return " ".join(self.words)


class _Writer:
    """Writes one sentence word by word, remembering which words must agree."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.sentence = Sentence()
        self.numbers_seen: list[str] = []  # number of every noun written so far

    def word(self, word: str) -> None:
        self.sentence.words.append(word)

    def agreeing(self, pair: tuple[str, str], number: str, kind: str, since: int = 0) -> None:
        """Write the form of ``pair`` for ``number``; note it as an agreement point."""
        index = NUMBERS.index(number)
        attractor = any(n != number for n in self.numbers_seen[since:])
        self.sentence.agreements.append(
            Agreement(len(self.sentence.words), pair[index], pair[1 - index], kind, attractor)
        )
        self.word(pair[index])

    def noun_phrase(self, number: str, adjective_p: float = 0.3) -> None:
        """Det (Adj) Noun, the determiner agreeing with the noun."""
        if self.rng.random() < 0.4:
            self.word(NEUTRAL_DETERMINER)
            constrained = False
        else:
            self.word(self.rng.choice(DETERMINERS[number]))
            constrained = True
        if self.rng.random() < adjective_p:
            self.word(self.rng.choice(ADJECTIVES))
        noun = self.rng.choice(NOUNS)
        if constrained:
            self.agreeing(noun, number, "det-noun", since=len(self.numbers_seen))
        else:
            self.word(noun[NUMBERS.index(number)])
        self.numbers_seen.append(number)

    def subject(self) -> tuple[str, int]:
        """Write a subject; return its number and where its possible attractors start.

        The second value indexes ``numbers_seen``: nouns from there on stand between the
        subject's head and the verb. A coordinated subject ("the cat and a dog") is plural
        whatever its parts and has no single head, so none of its nouns counts.
        """
        head = len(self.numbers_seen)
        if self.rng.random() < 0.12:
            self.noun_phrase(self.rng.choice(NUMBERS))
            self.word(CONJUNCTION)
            self.noun_phrase(self.rng.choice(NUMBERS))
            return PLURAL, len(self.numbers_seen)
        number = self.rng.choice(NUMBERS)
        self.noun_phrase(number)
        roll = self.rng.random()
        if roll < 0.25:  # prepositional phrase: "the wolf near the children"
            self.word(self.rng.choice(PREPOSITIONS))
            self.noun_phrase(self.rng.choice(NUMBERS))
        elif roll < 0.4:  # subject relative: "the wolf that chases the mice"
            self.word(RELATIVISER)
            self.agreeing(self.rng.choice(TRANSITIVE_VERBS), number, "subject-verb", since=head + 1)
            self.noun_phrase(self.rng.choice(NUMBERS))
        elif roll < 0.55:  # object relative: "the wolf that the mice chase"
            self.word(RELATIVISER)
            inner = self.rng.choice(NUMBERS)
            inner_head = len(self.numbers_seen)
            self.noun_phrase(inner)
            self.agreeing(self.rng.choice(TRANSITIVE_VERBS), inner, "subject-verb", since=inner_head + 1)
        return number, head + 1

    def predicate(self, number: str, since: int) -> None:
        """(Adv) then a transitive verb and object, an intransitive verb, or is/are + Adj."""
        if self.rng.random() < 0.25:
            self.word(self.rng.choice(ADVERBS))
        self.sentence.main_verb = len(self.sentence.words)
        roll = self.rng.random()
        if roll < 0.55:
            self.agreeing(self.rng.choice(TRANSITIVE_VERBS), number, "subject-verb", since)
            self.noun_phrase(self.rng.choice(NUMBERS))
        elif roll < 0.8:
            self.agreeing(self.rng.choice(INTRANSITIVE_VERBS), number, "subject-verb", since)
        else:
            self.agreeing(COPULA, number, "subject-verb", since)
            self.word(self.rng.choice(ADJECTIVES))


def generate_sentences(n: int, seed: int = 0) -> list[Sentence]:
    """``n`` sentences from the grammar, with their agreement points; same seed, same list."""
    validation.positive_int("n", n)
    rng = random.Random(seed)
    sentences = []
    for _ in range(n):
        writer = _Writer(rng)
        writer.predicate(*writer.subject())
        sentences.append(writer.sentence)
    return sentences


def sample_sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences as plain text, to show what the model reads."""
    return [sentence.text for sentence in generate_sentences(n, seed)]


@dataclass
class Corpus:
    """Token ids of the training and validation text, and the tokenizer that made them.

    Each sentence is followed by ``<eos>``; the ids form one long stream that
    :func:`get_batch` cuts windows from, so a window may start mid-sentence and span two.
    """

    tokenizer: Tokenizer
    train_ids: torch.Tensor  # (N_train,) int64
    val_ids: torch.Tensor  # (N_val,) int64
    seed: int | None = 0  # the grammar's random seed; None for a fixed text (prenorm_lib.lab.prose)
    unit: str = "words"  # what one token is: "words" here, "bytes" for prenorm_lib.lab.prose

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def describe(self) -> str:
        return (
            f"vocabulary {self.vocab_size} {self.unit}, {self.train_ids.numel():,} training tokens, "
            f"{self.val_ids.numel():,} validation tokens" + ("" if self.seed is None else f" (seed {self.seed})")
        )


def _encode_sentences(tokenizer: Tokenizer, sentences: list[Sentence]) -> torch.Tensor:
    word_to_id = tokenizer.word_to_id
    ids = []
    for sentence in sentences:
        ids.extend(word_to_id[word] for word in sentence.words)
        ids.append(tokenizer.eos_id)
    return torch.tensor(ids, dtype=torch.long)


CORPUS_DEFAULTS = {"n_train_sentences": 20_000, "n_val_sentences": 2_000, "seed": 0}
# The default corpus, generated once and shipped: drawing 22 000 sentences takes a second and
# a half of pure Python, which every notebook that trains on it would pay. `write_corpus_cache()`
# remakes the file; tests/lab/test_data.py checks that it equals a fresh generation.
CORPUS_CACHE = Path(__file__).parent / "corpora" / "grammar_seed0.npz"
CACHE_CHECK_SENTENCES = 200  # at every load, the first ones are generated again and compared


def make_corpus(n_train_sentences: int = 20_000, n_val_sentences: int = 2_000, seed: int = 0) -> Corpus:
    """Generate the course corpus: about 200k training and 20k validation tokens.

    Validation sentences come from the same grammar but a different stream of random
    draws, so short sentences may appear in both parts, as in any natural corpus. The
    default corpus is read from the copy shipped with the library (``CORPUS_CACHE``), after
    checking its first sentences against the grammar; any other is generated (about a
    second per 15 000 sentences).
    """
    validation.positive_int("n_train_sentences", n_train_sentences)
    validation.positive_int("n_val_sentences", n_val_sentences)
    tokenizer = Tokenizer()
    asked = {"n_train_sentences": n_train_sentences, "n_val_sentences": n_val_sentences, "seed": seed}
    if asked == CORPUS_DEFAULTS and CORPUS_CACHE.is_file():
        with np.load(CORPUS_CACHE) as cached:
            train_ids, val_ids = (torch.from_numpy(cached[part].astype(np.int64)) for part in ("train", "val"))
        check = _encode_sentences(tokenizer, generate_sentences(CACHE_CHECK_SENTENCES, seed))
        if torch.equal(train_ids[: check.numel()], check):
            return Corpus(tokenizer=tokenizer, train_ids=train_ids, val_ids=val_ids, seed=seed)
        warnings.warn(f"{CORPUS_CACHE.name} no longer matches the grammar: generating the corpus instead "
                      "(prenorm_lib.lab.data.write_corpus_cache() remakes it)", stacklevel=2)
    sentences = generate_sentences(n_train_sentences + n_val_sentences, seed)
    return Corpus(
        tokenizer=tokenizer,
        train_ids=_encode_sentences(tokenizer, sentences[:n_train_sentences]),
        val_ids=_encode_sentences(tokenizer, sentences[n_train_sentences:]),
        seed=seed,
    )


def write_corpus_cache(path: Path = CORPUS_CACHE) -> Path:
    """Generate the default corpus and save its token ids (one byte each) where make_corpus reads them."""
    tokenizer = Tokenizer()
    if len(tokenizer) > 256:
        raise ValueError(f"the vocabulary has {len(tokenizer)} words: token ids no longer fit in one byte")
    sentences = generate_sentences(CORPUS_DEFAULTS["n_train_sentences"] + CORPUS_DEFAULTS["n_val_sentences"],
                                   CORPUS_DEFAULTS["seed"])
    split = CORPUS_DEFAULTS["n_train_sentences"]
    np.savez_compressed(path, train=_encode_sentences(tokenizer, sentences[:split]).numpy().astype(np.uint8),
                        val=_encode_sentences(tokenizer, sentences[split:]).numpy().astype(np.uint8))
    return path


def get_batch(
    ids: torch.Tensor, batch_size: int, context_length: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``context_length`` tokens and their next tokens.

    Returns ``(x, y)``, both (batch_size, context_length) int64, with ``y[:, t] = x[:, t+1]``
    inside a window: the model at position t is scored on predicting token t + 1.
    """
    validation.tensor("ids", ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be a 1-D tensor of token ids, got shape {tuple(ids.shape)}")
    validation.positive_int("batch_size", batch_size)
    validation.positive_int("context_length", context_length)
    if ids.numel() <= context_length:
        raise ValueError(
            f"ids has {ids.numel()} tokens; a window needs context_length + 1 = {context_length + 1}"
        )
    starts = torch.randint(0, ids.numel() - context_length, (batch_size,), generator=generator)  # (B,)
    offsets = starts[:, None] + torch.arange(context_length + 1)  # (B, T + 1)
    windows = ids[offsets]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def paired_batches(
    ids: torch.Tensor, count: int, batch_size: int, context_length: int, seed: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` mini-batches (``get_batch``'s) drawn from one generator seeded with ``seed``.

    Every model of a paired comparison reads these same batches: the experiments give each of
    their seeds its own ``seed`` here, so that one seed's placements, widths or depths differ
    only in the model.
    """
    validation.positive_int("count", count)
    generator = torch.Generator().manual_seed(seed)
    return [get_batch(ids, batch_size, context_length, generator) for _ in range(count)]
