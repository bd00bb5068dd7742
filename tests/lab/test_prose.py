"""The prose corpus: markup stripped as documented, shipped text split deterministically, trainable."""

from __future__ import annotations

import textwrap

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from prenorm_lib.lab import prose, train
from prenorm_lib.lab.data import Corpus

SOURCE = textwrap.dedent("""\
    .. _tut-intro:

    ****************
    An Informal Tour
    ****************

    The :keyword:`!for` statement calls :func:`len` and :meth:`~collections.OrderedDict.popitem`,
    see :ref:`the tutorial <tut-tour>` and :pep:`8`. Use ``x + 1`` and *emphasis* or **strong**
    words, a `link <https://example.org>`_ and a note [#]_.

    For example::

       >>> print("code is dropped")
       code is dropped

    .. index:: single: dropped entry

    .. note::

       Notes are prose and stay.

    .. code-block:: python

       also_dropped = True

    >>> 1 + 1
    2

    +--------+--------+
    | a grid | table  |
    +--------+--------+

    * first item
      continues here
    * second item: ``0.1
      - 0.3`` is not a list item

    .. versionchanged:: 3.11
       Changed in a “curly” way — with a dash.

    Closing paragraph with |release|.
    """)


def test_strip_rst_keeps_the_prose_and_drops_the_rest():
    assert prose.strip_rst(SOURCE).splitlines() == [
        "An Informal Tour",
        "The for statement calls len and popitem, see the tutorial and PEP 8. Use x + 1 and emphasis or "
        "strong words, a link and a note.",
        "For example:",
        "Notes are prose and stay.",
        "- first item continues here",
        "- second item: 0.1 - 0.3 is not a list item",
        'Changed in a "curly" way -- with a dash.',
        "Closing paragraph with 3.11.",
    ]


def test_strip_rst_output_is_ascii_without_markup():
    text = prose.strip_rst(SOURCE)
    assert text.isascii()
    for markup in ("``", ":func:", "::", ".. ", "*", "_`", "|"):
        assert markup not in text, markup


def test_build_writes_what_documents_reads(tmp_path):
    sources = tmp_path / "_sources"
    (sources / "tutorial").mkdir(parents=True)
    (sources / "c-api").mkdir()
    (sources / "tutorial" / "b.rst.txt").write_text("Second page.\n")
    (sources / "tutorial" / "a.rst.txt").write_text(SOURCE)
    (sources / "c-api" / "skipped.rst.txt").write_text("Not a prose section.\n")
    (sources / "glossary.rst.txt").write_text("Glossary\n========\n\nA term.\n")
    path = prose.build(sources, tmp_path / "docs.txt.xz")
    # path order: glossary.rst.txt, tutorial/a.rst.txt, tutorial/b.rst.txt
    assert prose.documents(path) == ("Glossary\nA term.", prose.strip_rst(SOURCE), "Second page.")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return prose.make_prose_corpus()


def test_shipped_corpus_is_a_few_megabytes_of_ascii_english(corpus):
    assert corpus.vocab_size == 256
    assert 3_000_000 < corpus.train_ids.numel() < 8_000_000
    both = torch.cat([corpus.train_ids, corpus.val_ids])
    assert int(both.max()) < 128  # ASCII
    counts = torch.bincount(both, minlength=256)
    assert counts.argmax() == ord(" ")  # the commonest byte of English prose
    letters = sum(int(counts[ord(c)]) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert letters / both.numel() > 0.7
    assert int(counts[ord(prose.DOCUMENT_SEPARATOR)]) == 0  # the separator never reaches the model
    assert corpus.describe().startswith("vocabulary 256 bytes, ")
    assert "seed" not in corpus.describe()


def test_the_corpus_ships_with_its_license():
    text = prose.LICENSE_PATH.read_text(encoding="utf-8")
    assert "Python Software Foundation" in text and "PSF" in text


def test_shipped_corpus_has_no_markup_left():
    text = "\n".join(prose.documents())
    for markup in (":func:`", ":meth:`", "``", "\n.. ", "::\n"):
        assert markup not in text, markup


def test_split_holds_out_whole_documents_deterministically(corpus):
    docs = prose.documents()
    held_out = [doc for i, doc in enumerate(docs) if i % prose.VALIDATION_EVERY == prose.VALIDATION_EVERY - 1]
    assert prose.ByteTokenizer().decode(corpus.val_ids) == "\n\n".join(held_out)
    again = prose.make_prose_corpus()
    assert torch.equal(again.train_ids, corpus.train_ids) and torch.equal(again.val_ids, corpus.val_ids)
    share = corpus.val_ids.numel() / (corpus.val_ids.numel() + corpus.train_ids.numel())
    assert 0.05 < share < 0.2
    train_text = prose.ByteTokenizer().decode(corpus.train_ids)
    assert all(doc not in train_text for doc in held_out if len(doc) > 2000)  # pages, not phrases, are held out


def test_other_split_fractions(corpus):
    coarser = prose.make_prose_corpus(validation_every=20)
    assert coarser.val_ids.numel() < corpus.val_ids.numel()
    assert coarser.train_ids.numel() + coarser.val_ids.numel() == corpus.train_ids.numel() + corpus.val_ids.numel()


@given(text=st.text(max_size=40))
def test_byte_tokenizer_round_trips_any_text(text):
    tokenizer = prose.ByteTokenizer()
    ids = tokenizer.encode(text)
    assert all(0 <= i < 256 for i in ids)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(torch.tensor(ids, dtype=torch.long)) == text


def test_train_reads_the_prose_corpus(corpus):
    model = train.build_model(corpus, seed=0, ffn="geglu", d_model=16, num_heads=2, num_layers=1)
    config = train.TrainConfig(steps=3, batch_size=2, context_length=16, eval_every=3, eval_batches=1)
    history = train.train(model, corpus, config, progress=False)
    assert model.lm_head.weight.shape == (256, 16)
    assert history.val_steps == [0, 3] and all(v == v for v in history.val_loss)
