"""The handout's LM loaded into Hugging Face's LlamaForCausalLM gives the same logits (notebook 06, section 8);
without the q/k row permutation it does not."""

from __future__ import annotations

import pytest
import torch

from prenorm_lib import TransformerLM
from prenorm_lib.lab import llama

ARGS = dict(vocab_size=53, context_length=20, d_model=48, num_layers=2, num_heads=4, d_ff=96, rope_theta=700.0)


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    model = TransformerLM(**ARGS).eval()
    with torch.no_grad():  # gains away from 1, so every norm's place shows
        for name, p in model.named_parameters():
            if name.endswith(("ln1.weight", "ln2.weight", "ln_final.weight")):
                p.uniform_(0.5, 1.5)
    return model, llama.as_llama(model, **ARGS)


def test_the_same_logits(pair):
    model, hf = pair
    ids = torch.randint(53, (3, 20), generator=torch.Generator().manual_seed(1))
    assert llama.largest_logit_difference(model, hf, ids) < 1e-4


def test_without_the_permutation_the_logits_differ(pair):
    model, hf = pair
    state = {k: v for k, v in model.state_dict().items()}
    renamed = {llama.MODEL_NAMES.get(k, k): v for k, v in state.items()}
    renamed = {(f"model.layers.{k.split('.')[1]}.{llama.LAYER_NAMES[k.split('.', 2)[2]]}"
                if k.startswith("layers.") else k): v for k, v in renamed.items()}
    hf_unpermuted = type(hf)(hf.config).eval()
    hf_unpermuted.load_state_dict(renamed)
    ids = torch.randint(53, (2, 20), generator=torch.Generator().manual_seed(2))
    assert llama.largest_logit_difference(model, hf_unpermuted, ids) > 1e-2


def test_a_name_outside_the_handouts_is_refused():
    with pytest.raises(ValueError, match=r"'layers\.0\.attn\.rope\.cos' is not a name of the handout's state dict"):
        llama.llama_state_dict({"layers.0.attn.q_proj.weight": torch.zeros(4, 4),
                                "layers.0.attn.rope.cos": torch.zeros(2, 2)}, 2)
