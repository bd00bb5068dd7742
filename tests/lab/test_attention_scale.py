"""The pieces of the 1/√d_k experiment: removing the scale, reading attention weights, the sentences."""

import math

import pytest
import torch

from prenorm_lib.lab.data import NOUNS, make_corpus
from prenorm_lib.lab.experiments import attention_scale as exp
from prenorm_lib.lab.train import build_model


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(n_train_sentences=200, n_val_sentences=50)


def test_removing_the_scale_gives_raw_dot_products(corpus):
    scaled = build_model(corpus, seed=3, num_heads=2)
    unscaled = exp.remove_score_scale(build_model(corpus, seed=3, num_heads=2))
    x = torch.randn(2, 7, 64)
    attn, raw = scaled.layers[0].attn, unscaled.layers[0].attn
    q, k = attn.queries_and_keys(x)  # (B, H, T, d_head), rotated
    torch.testing.assert_close(raw.attention_logits(x), q @ k.transpose(-2, -1))
    torch.testing.assert_close(attn.attention_logits(x), q @ k.transpose(-2, -1) / math.sqrt(attn.d_head))
    assert [n for n, _ in scaled.named_parameters()] == [n for n, _ in unscaled.named_parameters()]


def test_unscaled_layer_equals_torch_attention_with_scale_one(corpus):
    model = exp.remove_score_scale(build_model(corpus, seed=1, num_heads=2))
    attn = model.layers[0].attn
    x = torch.randn(1, 5, 64)
    q, k = attn.queries_and_keys(x)  # the hook has multiplied q by √d_head
    q_raw = q / math.sqrt(attn.d_head)  # the query the projection and RoPE produce
    v = attn.split_heads(attn.v_proj(x))
    heads = torch.nn.functional.scaled_dot_product_attention(q_raw, k, v, is_causal=True, scale=1.0)  # softmax(q·k)
    want = attn.output_proj(heads.transpose(1, 2).flatten(-2))
    torch.testing.assert_close(attn(x), want, atol=1e-5, rtol=1e-4)


def test_attention_probabilities_are_causal_rows_that_reproduce_the_layer(corpus):
    model = build_model(corpus, seed=0, num_heads=2)
    ids = corpus.val_ids[:9].unsqueeze(0)  # (1, 9)
    maps = exp.attention_probabilities(model, ids)  # (L, 1, H, 9, 9)
    assert maps.shape == (2, 1, 2, 9, 9)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 1, 2, 9))
    assert bool((maps.triu(1) == 0).all())
    inputs = []
    hook = model.layers[0].attn.register_forward_pre_hook(lambda _m, args: inputs.append(args[0]))
    model(ids)
    hook.remove()
    attn = model.layers[0].attn
    heads = maps[0] @ attn.split_heads(attn.v_proj(inputs[0]))  # (1, H, 9, d_head)
    torch.testing.assert_close(attn.output_proj(heads.transpose(1, 2).flatten(-2)), attn(inputs[0]),
                               atol=1e-5, rtol=1e-4)


def test_attractor_sentences_point_at_the_subject_and_the_verb():
    nouns = {word: number for pair in NOUNS for number, word in enumerate(pair)}
    for words, subject, verb in exp.attractor_sentences(20):
        assert words[0] == "<eos>" and words[subject] in nouns
        assert verb - subject >= 4
        between = [nouns[w] for w in words[subject + 1:verb] if w in nouns]
        assert any(number != nouns[words[subject]] for number in between)  # an attractor stands between


def test_entropy_of_uniform_rows():
    p = torch.ones(4, 4).tril()
    p = p / p.sum(-1, keepdim=True)
    want = sum(math.log(t) for t in (2, 3, 4)) / 3
    assert exp.mean_entropy(p) == pytest.approx(want, rel=1e-6)
