"""The block and the LM compile to one graph: ``torch._dynamo.explain`` finds no graph break.

A range check that reads a tensor's values (``if ids.max() >= vocab``) inside ``forward``
splits the compiled graph and, on a GPU, waits for the device every step. The library
keeps such checks where they are free (eager mode on the CPU, see
``validation.values_checked``); these tests hold that for every norm placement, every FFN,
each QK-norm form and each kind of positions, with and without explicit positions, and
show that the check, were it traced, is what breaks the graph.
"""

from __future__ import annotations

import pytest
import torch

from prenorm_lib import validation
from prenorm_lib.block import NORMS, TransformerBlock
from prenorm_lib.config import PLACEMENTS, ModelConfig
from prenorm_lib.ffn import FFN_KINDS
from prenorm_lib.model import TransformerLM
from prenorm_lib.positions import POSITION_KINDS

T = 8


def graph_breaks(module: torch.nn.Module, *args) -> tuple[int, list[str]]:
    torch._dynamo.reset()
    explained = torch._dynamo.explain(module)(*args)
    return explained.graph_break_count, [str(r.reason).splitlines()[0] for r in explained.break_reasons]


def positions() -> torch.Tensor:
    return torch.arange(T).expand(2, T)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("explicit_positions", [False, True], ids=["default-positions", "token_positions"])
def test_block_compiles_without_graph_breaks(norm, explicit_positions):
    if PLACEMENTS[norm].needs_layer:  # Mix-LN, LayerNorm Scaling: block 1 of a 4-block stack
        config = ModelConfig(vocab_size=1, context_length=16, d_model=16, num_layers=4, num_heads=4, d_ff=32, norm=norm)
        block = TransformerBlock.from_config(config, layer_index=1)
    else:
        block = TransformerBlock(16, 4, 32, max_seq_len=16, norm=norm, num_layers=2)
    args = (torch.randn(2, T, 16),) + ((positions(),) if explicit_positions else ())
    assert graph_breaks(block, *args) == (0, [])


@pytest.mark.parametrize("ffn", FFN_KINDS)
@pytest.mark.parametrize("qk_norm", [False, "per_head", "flat"])
def test_block_with_each_ffn_and_qk_norm_compiles_without_graph_breaks(ffn, qk_norm):
    block = TransformerBlock(16, 4, 32, max_seq_len=16, ffn=ffn, qk_norm=qk_norm)
    assert graph_breaks(block, torch.randn(2, T, 16), positions()) == (0, [])


@pytest.mark.parametrize("kind", POSITION_KINDS)
@pytest.mark.parametrize("explicit_positions", [False, True], ids=["default-positions", "token_positions"])
def test_lm_compiles_without_graph_breaks(kind, explicit_positions):
    lm = TransformerLM(40, 16, 16, 2, 4, 32, rope_theta=1e4 if kind == "rope" else None, positions=kind)
    args = (torch.randint(0, 40, (2, T)),) + ((positions(),) if explicit_positions else ())
    assert graph_breaks(lm, *args) == (0, [])


@pytest.mark.parametrize("options", [{"normaliser": "dyt", "qk_norm": True}, {"normaliser": "derf"},
                                     {"residual_scaling": "completep"}, {"norm": "mix_ln"}])
def test_lm_with_the_configs_options_compiles_without_graph_breaks(options):
    lm = TransformerLM(40, 16, 16, 4, 4, 32, **options)
    assert graph_breaks(lm, torch.randint(0, 40, (2, T)), positions()) == (0, [])


def test_a_traced_range_check_breaks_the_graph(monkeypatch):
    """The test above can fail: with the value checks traced, the LM's graph breaks."""
    monkeypatch.setattr(validation, "values_checked", lambda x: True)
    lm = TransformerLM(40, 16, 16, 1, 4, 32)
    count, reasons = graph_breaks(lm, torch.randint(0, 40, (2, T)), positions())
    assert count > 0, reasons


def test_range_checks_still_run_in_eager_mode_on_the_cpu():
    lm = TransformerLM(40, 16, 16, 1, 4, 32)
    with pytest.raises(ValueError, match="token_ids must lie in"):
        lm(torch.tensor([[1, 40]]))
    with pytest.raises(ValueError, match="token_positions must be < max_seq_len=16, got 16"):
        lm(torch.tensor([[1, 2]]), torch.tensor([0, 16]))
