# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""The small GPT-style Transformer the GPU benches train (bench/ddp_train.py's
scaling study, bench/gpu_attribution_models.py's energy per layer): token and
positional embeddings, pre-LayerNorm blocks of causal self-attention and a 4x
GELU (tanh) MLP in a ModuleList `blocks`, a final LayerNorm and an LM head.
PyTorch only, so it imports wherever the benches run."""
import torch
import torch.nn.functional as F


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2) for z in self.qkv(x).split(w, dim=-1))
        if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0: flash / memory-efficient kernels
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # older torch (e.g. Debian's 1.13, CPU tries only)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            scores = (q @ k.transpose(-2, -1)) / (w // self.heads) ** 0.5
            y = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, w))


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln2 = torch.nn.LayerNorm(width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class SmallGPT(torch.nn.Module):
    def __init__(self, vocab, tokens, width, heads, layers):
        super().__init__()
        self.tok_emb = torch.nn.Embedding(vocab, width)
        self.pos_emb = torch.nn.Embedding(tokens, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))
