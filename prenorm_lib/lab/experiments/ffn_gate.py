"""The gate with its narrower hidden layer: SwiGLU against SiLU with exactly SwiGLU's FFN weights.

Notebook 02 §6. ``ffn_controls`` showed that ReLU given SwiGLU's weight count (d_ff = 288)
still ends above SwiGLU. The rest of the gap is not yet "the gate": SwiGLU's gate is a SiLU,
and SiLU alone already ends below ReLU. A SiLU FFN with d_ff = 288 has the same activation
and the same number of weights as SwiGLU (2 · 64 · 288 = 3 · 64 · 192 = 36,864); what
differs is SwiGLU's product with a linear value branch *and* its hidden width, 192 units
against 288 (its weights split over three matrices). This control moves both at once and
cannot tell them apart. It is paired seed by seed with ``ffn_ablation``'s SwiGLU runs (every
setting is taken from ``ffn_ablation.CONFIG``, and the runs are made by
``ffn_controls.run_seed``, the same code as the other controls).
"""

from __future__ import annotations

from typing import Any

from prenorm_lib.lab.experiments import ffn_ablation as ablation
from prenorm_lib.lab.experiments import ffn_controls as controls

DESCRIPTION = ("FFN ablation control: SiLU at SwiGLU's parameter count (d_ff 288): the gate together with "
               "SwiGLU's narrower hidden layer")

CONFIG: dict[str, Any] = {
    **{key: value for key, value in ablation.CONFIG.items() if key not in ("ffns", "lr")},
    # name → (FFN kind, d_ff, learning rate), as in ffn_controls
    "variants": {"silu_d288": ["silu", controls.MATCHED_D_FF, ablation.CONFIG["lr"]]},
}

FINGERPRINT: dict[str, Any] = dict(controls.FINGERPRINT)

run_seed = controls.run_seed
