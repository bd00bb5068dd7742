"""Correct answers to notebook 06 (exercises 6.1–6.9), written as three learners write them, for ``false_hints``.

Each learner is the text of notebook 06's nine exercise cells, run one after the other in one
namespace, as a kernel runs them (6.3 builds on that learner's 6.1, 6.5 on its 6.4, ...), with
notebook 06's imports before them (``torch``, ``nn``, ``math`` and the given ``RMSNorm``):

- ``solution``: notebook 06's own solution cells, read from the notebook (the course's answer, the
  library's arithmetic written as a learner writes it);
- ``handout``: the handout's words taken literally: ``torch.matmul``, ``view``/``transpose``, a
  float32 RoPE table from ``1 / θ^(2k/d)``, a softmax written out, FLOPs counted as floats;
- ``reassociated``: the same arithmetic in another order: ``W x`` as column vectors, an embedding
  as a one-hot product, w1 and w3 (and q, k, v) fused into one projection whose weights stay the
  interface's parameters, RoPE as ``x·cos + partner·sin`` from a float64 table, the scale as
  ``rsqrt`` on the queries, einsum, a mask by ``torch.where`` with the dtype's most negative number,
  key/value heads shared by ``expand``, parameters counted matrix by matrix.

Each cell's text is kept where ``inspect`` finds it (``linecache``, as IPython keeps a cell's), so
the source lints read it as they read a kernel's.
"""

from __future__ import annotations

import json
import linecache
from functools import cache

from prenorm_course.exercises.markers import exercise_header
from prenorm_course.exercises.paths import repo_root, solution_path

NOTEBOOK = "06_your_transformer.ipynb"  # its solution notebook holds the solution cells
IMPORTS = "import math\n\nimport torch\nfrom torch import nn\n\nfrom prenorm_lib import RMSNorm\n"
# what each checker is called with: names the learner's cells define
CHECKED = {"6.1": ("MyLinear",), "6.2": ("MyEmbedding",), "6.3": ("MySwiGLU",), "6.4": ("MyRoPE",),
           "6.5": ("MyAttention",), "6.6": ("MyBlock",), "6.7": ("MyTransformerLM",),
           "6.8": ("count_parameters", "forward_flops"), "6.9": ("MyCachedAttention",)}

HANDOUT = {
    "6.1": '''# Exercise 6.1: Linear with the truncated-normal initialisation
class MyLinear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = (2 / (in_features + out_features)) ** 0.5
        weight = torch.empty((out_features, in_features), device=device, dtype=dtype)
        self.weight = nn.Parameter(nn.init.trunc_normal_(weight, std=std, a=-3 * std, b=3 * std))

    def forward(self, x):
        return torch.matmul(x, self.weight.t())
''',
    "6.2": '''# Exercise 6.2: Embedding, one row per token
class MyEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        table = torch.empty((num_embeddings, embedding_dim), device=device, dtype=dtype)
        self.weight = nn.Parameter(nn.init.trunc_normal_(table, mean=0, std=1, a=-3, b=3))

    def forward(self, token_ids):
        rows = self.weight[token_ids.flatten()]
        return rows.view(*token_ids.shape, self.weight.shape[1])
''',
    "6.3": '''# Exercise 6.3: the SwiGLU module
class MySwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = MyLinear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = MyLinear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = MyLinear(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x):
        a = self.w1(x)
        return self.w2(a / (1 + torch.exp(-a)) * self.w3(x))
''',
    "6.4": '''# Exercise 6.4: the RoPE module
class MyRoPE(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, device=device).float() / d_k))
        freqs = torch.outer(torch.arange(max_seq_len, device=device).float(), inv_freq)
        self.register_buffer("cos_cached", freqs.cos(), persistent=False)
        self.register_buffer("sin_cached", freqs.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos_cached[token_positions], self.sin_cached[token_positions]
        x0, x1 = x.unflatten(-1, (-1, 2)).unbind(-1)
        out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
        return out.flatten(-2).type_as(x)
''',
    "6.5": '''# Exercise 6.5: causal multi-head self-attention with RoPE
class MyAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.q_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.rope = MyRoPE(theta, self.d_k, max_seq_len, device=device) if theta is not None else None

    def forward(self, x, token_positions=None):
        *batch, seq_len, _ = x.shape
        q = self.q_proj(x).view(*batch, seq_len, self.num_heads, self.d_k).transpose(-3, -2)
        k = self.k_proj(x).view(*batch, seq_len, self.num_heads, self.d_k).transpose(-3, -2)
        v = self.v_proj(x).view(*batch, seq_len, self.num_heads, self.d_k).transpose(-3, -2)
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(seq_len, device=x.device)
            q = self.rope(q, token_positions[..., None, :])
            k = self.rope(k, token_positions[..., None, :])
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_k)
        mask = torch.tril(torch.ones(seq_len, seq_len, device=x.device))
        scores = scores.masked_fill(mask == 0, float("-inf"))
        scores = scores - scores.amax(dim=-1, keepdim=True)
        weights = scores.exp()
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.matmul(weights, v).transpose(-3, -2).reshape(*batch, seq_len, self.d_model)
        return self.output_proj(out)
''',
    "6.6": '''# Exercise 6.6: the pre-norm Transformer block
class MyBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attn = MyAttention(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.ffn = MySwiGLU(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x, token_positions=None):
        x = x + self.attn(self.ln1(x), token_positions=token_positions)
        x = x + self.ffn(self.ln2(x))
        return x
''',
    "6.7": '''# Exercise 6.7: the Transformer language model
class MyTransformerLM(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, num_layers, num_heads, d_ff, rope_theta,
                 device=None, dtype=None):
        super().__init__()
        self.token_embeddings = MyEmbedding(vocab_size, d_model, device=device, dtype=dtype)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(MyBlock(d_model, num_heads, d_ff, context_length, rope_theta, device=device,
                                       dtype=dtype))
        self.ln_final = RMSNorm(d_model, device=device, dtype=dtype)
        self.lm_head = MyLinear(d_model, vocab_size, device=device, dtype=dtype)

    def forward(self, token_ids, token_positions=None):
        x = self.token_embeddings(token_ids)
        for i in range(len(self.layers)):
            x = self.layers[i](x, token_positions)
        x = self.ln_final(x)
        return self.lm_head(x)
''',
    "6.8": '''# Exercise 6.8: parameters and forward FLOPs, counted by hand
def count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    embedding = vocab_size * d_model
    attention = 4 * d_model * d_model
    ffn = 3 * d_model * d_ff
    norms = 2 * d_model
    return embedding + num_layers * (attention + ffn + norms) + d_model + d_model * vocab_size


def forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    T, d, L = context_length, d_model, num_layers
    qkv, out = 3 * 2 * T * d * d, 2 * T * d * d
    scores, weighted = 2 * T * T * d, 2 * T * T * d
    return {"projections": float(L * (qkv + out)), "attention": float(L * (scores + weighted)),
            "feed-forward": float(L * 3 * 2 * T * d * d_ff), "lm_head": float(2 * T * d * vocab_size)}
''',
    "6.9": '''# Exercise 6.9: grouped-query attention with a KV cache
class MyCachedAttention(MyAttention):
    def __init__(self, d_model, num_heads, max_seq_len, theta, num_kv_heads=None, device=None, dtype=None):
        super().__init__(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.kv_cache = None
        self.n_kv = num_kv_heads or num_heads
        self.k_proj = MyLinear(d_model, self.n_kv * self.d_k, device=device, dtype=dtype)
        self.v_proj = MyLinear(d_model, self.n_kv * self.d_k, device=device, dtype=dtype)

    def forward(self, x, token_positions=None):
        *batch, seq_len, _ = x.shape
        start = 0 if self.kv_cache is None else self.kv_cache.length
        q = self.q_proj(x).view(*batch, seq_len, self.num_heads, self.d_k).transpose(-3, -2)
        k = self.k_proj(x).view(*batch, seq_len, self.n_kv, self.d_k).transpose(-3, -2)
        v = self.v_proj(x).view(*batch, seq_len, self.n_kv, self.d_k).transpose(-3, -2)
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(start, start + seq_len, device=x.device)
            q = self.rope(q, token_positions[..., None, :])
            k = self.rope(k, token_positions[..., None, :])
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(k, v)
        total, rep = k.shape[-2], self.num_heads // self.n_kv
        k = k[..., None, :, :].expand(*k.shape[:-2], rep, total, self.d_k).reshape(*batch, self.num_heads, total,
                                                                                    self.d_k)
        v = v[..., None, :, :].expand(*v.shape[:-2], rep, total, self.d_k).reshape(*batch, self.num_heads, total,
                                                                                    self.d_k)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_k)
        mask = torch.ones(seq_len, total, dtype=torch.bool, device=x.device).tril(diagonal=start)
        weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        out = torch.matmul(weights, v).transpose(-3, -2).reshape(*batch, seq_len, self.d_model)
        return self.output_proj(out)
''',
}

REASSOCIATED = {
    "6.1": '''# Exercise 6.1: Linear with the truncated-normal initialisation
class MyLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        sigma = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        torch.nn.init.trunc_normal_(self.weight, 0.0, sigma, -3.0 * sigma, 3.0 * sigma)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.weight @ x.unsqueeze(-1)).squeeze(-1)  # W x, each row of x a column vector
''',
    "6.2": '''# Exercise 6.2: Embedding, one row per token
class MyEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        torch.nn.init.trunc_normal_(self.weight, 0.0, 1.0, -3.0, 3.0)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        one_hot = torch.nn.functional.one_hot(token_ids, self.weight.shape[0]).to(self.weight.dtype)
        return one_hot @ self.weight  # picks row token_ids of the table
''',
    "6.3": '''# Exercise 6.3: the SwiGLU module
class MySwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int, device=None, dtype=None):
        super().__init__()
        self.w1 = MyLinear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = MyLinear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = MyLinear(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        both = torch.cat((self.w1.weight, self.w3.weight))  # one (2·d_ff, d_model) projection
        gate, value = torch.einsum("...d,fd->...f", x, both).chunk(2, dim=-1)
        return self.w2(nn.functional.silu(gate) * value)
''',
    "6.4": '''# Exercise 6.4: the RoPE module
class MyRoPE(nn.Module):
    def __init__(self, theta: float, d_k: int, max_seq_len: int, device=None):
        super().__init__()
        k = torch.arange(d_k // 2, dtype=torch.float64, device=device)
        positions = torch.arange(max_seq_len, dtype=torch.float64, device=device)
        angles = positions[:, None] * torch.exp(-2 * k / d_k * math.log(theta))[None, :]
        self.register_buffer("c", angles.cos(), persistent=False)  # float64, cast at use
        self.register_buffer("s", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor) -> torch.Tensor:
        c = self.c[token_positions].repeat_interleave(2, dim=-1)  # every channel its pair's cos
        s = self.s[token_positions].repeat_interleave(2, dim=-1)
        partner = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (−x₁, x₀) in each pair
        return (x * c + partner * s).to(x.dtype)
''',
    "6.5": '''# Exercise 6.5: causal multi-head self-attention with RoPE
class MyAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int, theta: float | None, device=None, dtype=None):
        super().__init__()
        self.heads, self.width = num_heads, d_model // num_heads
        self.q_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = MyLinear(d_model, d_model, device=device, dtype=dtype)
        self.rope = None if theta is None else MyRoPE(theta, self.width, max_seq_len, device=device)

    def project(self, x, n_kv):  # q, k, v from one fused projection: (..., heads, T, width) each
        fused = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight))
        q, k, v = torch.einsum("...td,ed->...te", x, fused).split(
            [self.heads * self.width, n_kv * self.width, n_kv * self.width], dim=-1)
        return [t.unflatten(-1, (-1, self.width)).movedim(-2, -3) for t in (q, k, v)]

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        T = x.shape[-2]
        q, k, v = self.project(x, self.heads)
        if self.rope is not None:
            at = (torch.arange(T, device=x.device) if token_positions is None else token_positions).unsqueeze(-2)
            q, k = self.rope(q, at), self.rope(k, at)
        q = q * torch.rsqrt(torch.tensor(float(self.width), dtype=q.dtype))
        scores = torch.einsum("...qd,...kd->...qk", q, k)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = torch.where(causal, scores, torch.finfo(scores.dtype).min)
        out = torch.einsum("...hqk,...hkd->...qhd", scores.softmax(dim=-1), v)
        return self.output_proj(out.flatten(-2))
''',
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
        return (h := torch.add(x, self.attn(self.ln1(x), token_positions))) + self.ffn(self.ln2(h))
''',
    "6.7": '''# Exercise 6.7: the Transformer language model
import functools


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
        stream = functools.reduce(lambda h, layer: layer(h, token_positions), self.layers,
                                  self.token_embeddings(token_ids))
        return self.lm_head(self.ln_final(stream))
''',
    "6.8": '''# Exercise 6.8: parameters and forward FLOPs, counted by hand
def count_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    """Matrix by matrix, as the model's state dict lists them."""
    block = [(d_model,), (d_model, d_model), (d_model, d_model), (d_model, d_model), (d_model, d_model),
             (d_model,), (d_ff, d_model), (d_model, d_ff), (d_ff, d_model)]
    shapes = [(vocab_size, d_model), *block * num_layers, (d_model,), (vocab_size, d_model)]
    return sum(math.prod(shape) for shape in shapes)


def forward_flops(vocab_size, context_length, d_model, num_layers, num_heads, d_ff):
    def matmul(m, n, p):  # (m × n)·(n × p)
        return 2 * m * n * p

    T, d_head = context_length, d_model // num_heads
    per_head = matmul(T, d_head, T) + matmul(T, T, d_head)  # Q Kᵀ, then the weights times V
    return {"projections": num_layers * 4 * matmul(T, d_model, d_model),
            "attention": num_layers * num_heads * per_head,
            "feed-forward": num_layers * (matmul(T, d_model, d_ff) * 2 + matmul(T, d_ff, d_model)),
            "lm_head": matmul(T, d_model, vocab_size)}
''',
    "6.9": '''# Exercise 6.9: grouped-query attention with a KV cache
class MyCachedAttention(MyAttention):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int, theta: float | None,
                 num_kv_heads: int | None = None, device=None, dtype=None):
        super().__init__(d_model, num_heads, max_seq_len, theta, device=device, dtype=dtype)
        self.kv_cache = None  # a KVCache while generating (prenorm_lib.generation.kv_caching puts one here)
        self.kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
        self.k_proj = MyLinear(d_model, self.kv_heads * self.width, device=device, dtype=dtype)
        self.v_proj = MyLinear(d_model, self.kv_heads * self.width, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor | None = None) -> torch.Tensor:
        T = x.shape[-2]
        past = self.kv_cache.length if self.kv_cache is not None else 0
        q, k, v = self.project(x, self.kv_heads)
        if self.rope is not None:
            at = torch.arange(past, past + T, device=x.device) if token_positions is None else token_positions
            q, k = self.rope(q, at.unsqueeze(-2)), self.rope(k, at.unsqueeze(-2))
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(k, v)
        group = self.heads // self.kv_heads
        k, v = (t.unsqueeze(-3).expand(*t.shape[:-2], group, *t.shape[-2:]).flatten(-4, -3) for t in (k, v))
        q = q * torch.rsqrt(torch.tensor(float(self.width), dtype=q.dtype))
        scores = torch.einsum("...qd,...kd->...qk", q, k)
        allowed = torch.arange(k.shape[-2], device=x.device) <= torch.arange(past, past + T, device=x.device)[:, None]
        scores = torch.where(allowed, scores, torch.finfo(scores.dtype).min)
        out = torch.einsum("...hqk,...hkd->...qhd", scores.softmax(dim=-1), v)
        return self.output_proj(out.flatten(-2))
''',
}


@cache
def solution_cells() -> dict[str, str]:
    """Notebook 06's exercise cells as the solutions notebook holds them (markers are comments: they run as is)."""
    notebook = json.loads(solution_path(repo_root(), NOTEBOOK).read_text(encoding="utf-8"))
    cells = {}
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        header = exercise_header(source) if cell["cell_type"] == "code" else None
        if header is not None:
            cells[header[0]] = source
    if set(cells) != set(CHECKED):
        raise ValueError(f"{NOTEBOOK} must hold exercise cells {sorted(CHECKED)}, found {sorted(cells)}")
    return cells


def run_cells(name: str, cells: dict[str, str]) -> dict[str, object]:
    """A kernel's namespace after notebook 06's imports and ``cells`` (in exercise order), each cell's text
    kept in ``linecache`` under its own name, as IPython keeps it."""
    namespace: dict[str, object] = {"__name__": f"learner_{name}"}
    for number, (exercise_id, source) in enumerate([("imports", IMPORTS), *sorted(cells.items())]):
        filename = f"<{name} learner, cell {number}: {exercise_id}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # the course's own answers, run as a kernel runs them
    return namespace


@cache
def learners() -> dict[str, dict[str, object]]:
    """The three learners' namespaces, by name."""
    return {"solution": run_cells("solution", solution_cells()), "handout": run_cells("handout", HANDOUT),
            "reassociated": run_cells("reassociated", REASSOCIATED)}


def forms(exercise_id: str) -> dict[str, tuple]:
    """Exercise ``exercise_id``'s correct answers: learner name -> the arguments its checker is called with."""
    return {name: tuple(namespace[n] for n in CHECKED[exercise_id]) for name, namespace in learners().items()}
