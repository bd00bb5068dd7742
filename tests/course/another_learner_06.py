"""A second learner's answers to notebook 06: every check passes, and none of it is written as the solutions are.

Other attribute names (no ``context_length``, ``num_heads`` or ``rope`` on the modules), einsum and
index_select instead of ``@`` and indexing, RoPE as complex multiplication with tables of other
names, positions counted inside the attention. ``tests/course/test_06_later_cells.py`` runs the
notebook's later cells (training, sampling, Llama, the cache) on these, as a learner's Run All does.
Each entry is the code of one exercise cell, header line first.
"""

ANSWERS = {
    "6.1": '''# Exercise 6.1: Linear with the truncated-normal initialisation
class MyLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        sigma = (2.0 / (in_features + out_features)) ** 0.5
        w = torch.empty(out_features, in_features, device=device, dtype=dtype)
        self.weight = nn.Parameter(nn.init.trunc_normal_(w, 0.0, sigma, -3 * sigma, 3 * sigma))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("...i,oi->...o", x, self.weight)''',
    "6.2": '''# Exercise 6.2: Embedding, one row per token
class MyEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None):
        super().__init__()
        w = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        self.weight = nn.Parameter(nn.init.trunc_normal_(w, 0.0, 1.0, -3.0, 3.0))

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.weight.index_select(0, token_ids.reshape(-1)).reshape(*token_ids.shape, -1)''',
    "6.3": '''# Exercise 6.3: the SwiGLU module
class MySwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None):
        super().__init__()
        self.w1, self.w3 = MyLinear(d_model, d_ff, device, dtype), MyLinear(d_model, d_ff, device, dtype)
        self.w2 = MyLinear(d_ff, d_model, device, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))''',
    "6.4": '''# Exercise 6.4: the RoPE module
class MyRoPE(nn.Module):
    def __init__(self, theta: float, d_k: int, max_seq_len: int, device=None):
        super().__init__()
        k = torch.arange(d_k // 2, dtype=torch.float64)
        turns = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), theta ** (-2 * k / d_k))
        self.register_buffer("table", torch.polar(torch.ones_like(turns), turns).to(torch.complex64).to(device),
                             persistent=False)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor) -> torch.Tensor:
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
        turned = pairs * self.table[token_positions]
        return torch.view_as_real(turned).reshape(x.shape).to(x.dtype)''',
    "6.5": '''# Exercise 6.5: causal multi-head self-attention with RoPE
class MyAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int, theta: float | None, device=None, dtype=None):
        super().__init__()
        self.h, self.dh = num_heads, d_model // num_heads
        for name in ("q_proj", "k_proj", "v_proj", "output_proj"):
            setattr(self, name, MyLinear(d_model, d_model, device=device, dtype=dtype))
        self.rotary = MyRoPE(theta, self.dh, max_seq_len, device=device) if theta is not None else None

    def split(self, t):
        return t.view(*t.shape[:-1], -1, self.dh).movedim(-2, -3)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        n = x.shape[-2]
        where = torch.arange(n, device=x.device) if token_positions is None else token_positions
        q, k, v = self.split(self.q_proj(x)), self.split(self.k_proj(x)), self.split(self.v_proj(x))
        if self.rotary is not None:
            q, k = self.rotary(q, where[..., None, :]), self.rotary(k, where[..., None, :])
        scores = torch.einsum("...qd,...kd->...qk", q, k) * self.dh ** -0.5
        allowed = torch.arange(n, device=x.device)[None, :] <= torch.arange(n, device=x.device)[:, None]
        probs = torch.softmax(torch.where(allowed, scores, float("-inf")), dim=-1)
        return self.output_proj(torch.einsum("...qk,...kd->...qd", probs, v).movedim(-3, -2).flatten(-2))''',
    "6.6": '''# Exercise 6.6: the pre-norm Transformer block
class MyBlock(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int, max_seq_len: int, theta: float,
                 device=None, dtype=None):
        super().__init__()
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)  # notebook 01's norms, given
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MyAttention(d_model, num_heads, max_seq_len, theta, device, dtype)
        self.ffn = MySwiGLU(d_model, d_ff, device, dtype)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), token_positions)
        return x + self.ffn(self.ln2(x))''',
    "6.7": '''# Exercise 6.7: the Transformer language model
class MyTransformerLM(nn.Module):
    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_layers: int, num_heads: int,
                 d_ff: int, rope_theta: float, device=None, dtype=None):
        super().__init__()
        self.token_embeddings = MyEmbedding(vocab_size, d_model, device, dtype)
        self.layers = nn.ModuleList([MyBlock(d_model, num_heads, d_ff, context_length, rope_theta, device, dtype)
                                     for _ in range(num_layers)])
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = MyLinear(d_model, vocab_size, device, dtype)

    def forward(self, token_ids: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        h = self.token_embeddings(token_ids)
        for block in self.layers:
            h = block(h, token_positions)
        return self.lm_head(self.ln_final(h))''',
    "6.8": '''# Exercise 6.8: parameters and forward FLOPs, counted by hand
def count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    """The number of trainable parameters of the handout's TransformerLM of this shape."""
    attention, ffn, norms = 4 * d_model**2, 3 * d_model * d_ff, 2 * d_model
    return vocab_size * d_model + num_layers * (attention + ffn + norms) + d_model + d_model * vocab_size


def forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    """FLOPs of the matrix multiplies of one forward pass over context_length tokens, by part."""
    d_head, T = d_model // num_heads, context_length
    return {"projections": 4 * (2 * T * d_model * d_model) * num_layers,
            "attention": num_heads * 2 * (2 * T * d_head * T) * num_layers,
            "feed-forward": (2 * 2 * T * d_model * d_ff + 2 * T * d_ff * d_model) * num_layers,
            "lm_head": 2 * T * d_model * vocab_size}''',
    "6.9": '''# Exercise 6.9: grouped-query attention with a KV cache
class MyCachedAttention(MyAttention):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int, theta: float | None,
                 num_kv_heads: int | None = None, device=None, dtype=None):
        super().__init__(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.kv_cache = None  # a KVCache while generating (prenorm_lib.generation.kv_caching puts one here)
        self.groups = num_heads // (num_kv_heads or num_heads)
        self.k_proj = MyLinear(d_model, d_model // self.groups, device=device, dtype=dtype)
        self.v_proj = MyLinear(d_model, d_model // self.groups, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        n = x.shape[-2]
        first = self.kv_cache.length if self.kv_cache is not None else 0
        where = torch.arange(first, first + n) if token_positions is None else token_positions
        q, k, v = self.split(self.q_proj(x)), self.split(self.k_proj(x)), self.split(self.v_proj(x))
        if self.rotary is not None:
            q, k = self.rotary(q, where[..., None, :]), self.rotary(k, where[..., None, :])
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(k, v)
        k, v = (t.repeat_interleave(self.groups, dim=-3) for t in (k, v))
        scores = torch.einsum("...qd,...kd->...qk", q, k) * self.dh ** -0.5
        allowed = torch.arange(k.shape[-2])[None, :] <= torch.arange(first, first + n)[:, None]
        probs = torch.softmax(torch.where(allowed, scores, float("-inf")), dim=-1)
        return self.output_proj(torch.einsum("...qk,...kd->...qd", probs, v).movedim(-3, -2).flatten(-2))''',
}
