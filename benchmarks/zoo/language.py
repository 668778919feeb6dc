"""Language models from Hugging Face transformers, built from configs in code (random
weights, no downloads): encoder LMs, decoder LMs (learned positions, RoPE, GQA, SwiGLU,
sliding windows) and encoder-decoders.

small: batch 1, 32 tokens, width 128, 2 layers, a 2048-token vocabulary (latency-bound);
large: batch 8 x 512 tokens at width 768 (GPT-2/BERT base widths), 4 layers, real
vocabulary sizes; the LLaMA-style decoders batch 4 x 1024 at width 1024. Every model
returns its logits (one tensor), with dropout 0 and no KV cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from zoo import Built, ModelSpec, randint, seeded
from zoo.compat import import_transformers


class Logits(nn.Module):
    """A transformers model called with keyword inputs, returning ``.logits``."""

    def __init__(self, model: nn.Module, names: tuple[str, ...], use_cache: bool | None) -> None:
        super().__init__()
        self.model, self.names, self.use_cache = model, names, use_cache

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = dict(zip(self.names, inputs, strict=True))
        if self.use_cache is not None:  # decoders: no KV cache in the outputs
            kwargs["use_cache"] = self.use_cache
        return self.model(**kwargs).logits


def _tokens(size: str, batch_large: int = 8, seq_large: int = 512) -> tuple[int, int]:
    return (1, 32) if size == "small" else (batch_large, seq_large)


def _spec(
    name: str,
    family: str,
    model_class: str,
    config_class: str,
    config: Callable[[str], dict[str, Any]],
    inputs: tuple[str, ...] = ("input_ids",),
    batch_large: int = 8,
    seq_large: int = 512,
) -> ModelSpec:
    def build(size: str) -> Built:
        transformers = import_transformers()
        cfg = getattr(transformers, config_class)(**config(size))
        cls = getattr(transformers, model_class)
        decoder = "decoder" in family or "encoder-decoder" in family
        model = seeded(lambda: Logits(cls(cfg), inputs, False if decoder else None))
        batch, seq = _tokens(size, batch_large, seq_large)
        vocab = cfg.vocab_size
        ids = tuple(randint(vocab, batch, seq, seed=2 + k) for k in range(len(inputs)))
        return model, ids

    return ModelSpec(name, "transformers", family, build)


def _sized(table: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    """A config builder from a table: a ``(small, large)`` pair is picked by size, any other
    value is the same at both sizes."""

    def config(size: str) -> dict[str, Any]:
        pick = 0 if size == "small" else 1
        return {k: v[pick] if isinstance(v, tuple) else v for k, v in table.items()}

    return config


# Widths and layers: small 128 wide, 2 layers; large at the base models' widths, 4 layers.
# Feed-forward widths are 4x the model width unless the architecture says otherwise.
_bert = _sized(
    dict(
        vocab_size=(2048, 30522),
        hidden_size=(128, 768),
        num_hidden_layers=(2, 4),
        num_attention_heads=(4, 12),
        intermediate_size=(512, 3072),
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
)
_distilbert = _sized(
    dict(
        vocab_size=(2048, 30522),
        dim=(128, 768),
        n_layers=(2, 4),
        n_heads=(4, 12),
        hidden_dim=(512, 3072),
        max_position_embeddings=512,
        dropout=0.0,
        attention_dropout=0.0,
    )
)
_gpt2 = _sized(
    dict(
        vocab_size=(2048, 50257),
        n_embd=(128, 768),
        n_layer=(2, 4),
        n_head=(4, 12),
        n_positions=1024,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
)
_opt = _sized(
    dict(
        vocab_size=(2048, 50272),
        hidden_size=(128, 768),
        word_embed_proj_dim=(128, 768),
        num_hidden_layers=(2, 4),
        num_attention_heads=(4, 12),
        ffn_dim=(512, 3072),
        max_position_embeddings=1024,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        layerdrop=0.0,
    )
)
# T5 v1.1: gated GELU feed-forward, untied head, relative position buckets; 64-wide heads.
_t5 = _sized(
    dict(
        vocab_size=(2048, 32128),
        d_model=(128, 768),
        d_kv=64,
        d_ff=(320, 2048),
        num_layers=(2, 4),
        num_decoder_layers=(2, 4),
        num_heads=(2, 12),
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        dropout_rate=0.0,
        decoder_start_token_id=0,
    )
)
_bart = _sized(
    dict(
        vocab_size=(2048, 50265),
        d_model=(128, 768),
        encoder_layers=(2, 4),
        decoder_layers=(2, 4),
        encoder_attention_heads=(4, 12),
        decoder_attention_heads=(4, 12),
        encoder_ffn_dim=(512, 3072),
        decoder_ffn_dim=(512, 3072),
        max_position_embeddings=1024,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
    )
)
# RoPE, grouped-query attention (4 query heads per KV head), SwiGLU, RMSNorm.
_LLAMA_LIKE: dict[str, Any] = dict(
    vocab_size=(2048, 32000),
    hidden_size=(128, 1024),
    intermediate_size=(352, 2816),
    num_hidden_layers=(2, 4),
    num_attention_heads=(4, 16),
    num_key_value_heads=(1, 4),
    max_position_embeddings=2048,
    attention_dropout=0.0,
)
_llama_like = _sized(_LLAMA_LIKE)
# A sliding window shorter than the sequence, so that the window mask matters.
_mistral = _sized({**_LLAMA_LIKE, "sliding_window": (16, 256)})


SPECS: list[ModelSpec] = [
    _spec("hf_bert", "encoder-lm", "BertForMaskedLM", "BertConfig", _bert),
    _spec("hf_distilbert", "encoder-lm", "DistilBertForMaskedLM", "DistilBertConfig", _distilbert),
    _spec("hf_gpt2", "decoder-lm", "GPT2LMHeadModel", "GPT2Config", _gpt2),
    _spec("hf_opt", "decoder-lm", "OPTForCausalLM", "OPTConfig", _opt),
    _spec(
        "hf_llama",
        "decoder-lm-rope-gqa",
        "LlamaForCausalLM",
        "LlamaConfig",
        _llama_like,
        batch_large=4,
        seq_large=1024,
    ),
    _spec(
        "hf_mistral",
        "decoder-lm-rope-gqa",
        "MistralForCausalLM",
        "MistralConfig",
        _mistral,
        batch_large=4,
        seq_large=1024,
    ),
    _spec(
        "hf_qwen2",
        "decoder-lm-rope-gqa",
        "Qwen2ForCausalLM",
        "Qwen2Config",
        _llama_like,
        batch_large=4,
        seq_large=1024,
    ),
    _spec(
        "hf_t5",
        "encoder-decoder",
        "T5ForConditionalGeneration",
        "T5Config",
        _t5,
        inputs=("input_ids", "decoder_input_ids"),
    ),
    _spec(
        "hf_bart",
        "encoder-decoder",
        "BartForConditionalGeneration",
        "BartConfig",
        _bart,
        inputs=("input_ids", "decoder_input_ids"),
    ),
]


def gpt2_layers(layers: int) -> Built:
    """GPT-2 at width 128 with ``layers`` layers (batch 1 x 32 tokens): the compile-time
    scaling family."""
    transformers = import_transformers()
    cfg = transformers.GPT2Config(
        vocab_size=2048,
        n_embd=128,
        n_layer=layers,
        n_head=4,
        n_positions=1024,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = seeded(lambda: Logits(transformers.GPT2LMHeadModel(cfg), ("input_ids",), False))
    return model, (randint(2048, 1, 32),)
