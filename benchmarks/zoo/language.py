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


def _width(size: str, small: Any, large: Any) -> Any:
    return small if size == "small" else large


def _bert(size: str) -> dict[str, Any]:
    h = _width(size, 128, 768)
    return dict(
        vocab_size=_width(size, 2048, 30522),
        hidden_size=h,
        num_hidden_layers=_width(size, 2, 4),
        num_attention_heads=_width(size, 4, 12),
        intermediate_size=4 * h,
        max_position_embeddings=512,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def _distilbert(size: str) -> dict[str, Any]:
    h = _width(size, 128, 768)
    return dict(
        vocab_size=_width(size, 2048, 30522),
        dim=h,
        n_layers=_width(size, 2, 4),
        n_heads=_width(size, 4, 12),
        hidden_dim=4 * h,
        max_position_embeddings=512,
        dropout=0.0,
        attention_dropout=0.0,
    )


def _gpt2(size: str) -> dict[str, Any]:
    return dict(
        vocab_size=_width(size, 2048, 50257),
        n_embd=_width(size, 128, 768),
        n_layer=_width(size, 2, 4),
        n_head=_width(size, 4, 12),
        n_positions=1024,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )


def _opt(size: str) -> dict[str, Any]:
    h = _width(size, 128, 768)
    return dict(
        vocab_size=_width(size, 2048, 50272),
        hidden_size=h,
        word_embed_proj_dim=h,
        num_hidden_layers=_width(size, 2, 4),
        num_attention_heads=_width(size, 4, 12),
        ffn_dim=4 * h,
        max_position_embeddings=1024,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        layerdrop=0.0,
    )


def _t5(size: str) -> dict[str, Any]:
    # T5 v1.1: gated GELU feed-forward, untied head, relative position buckets.
    h = _width(size, 128, 768)
    return dict(
        vocab_size=_width(size, 2048, 32128),
        d_model=h,
        d_kv=64,
        d_ff=_width(size, 320, 2048),
        num_layers=_width(size, 2, 4),
        num_decoder_layers=_width(size, 2, 4),
        num_heads=h // 64,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        dropout_rate=0.0,
        decoder_start_token_id=0,
    )


def _bart(size: str) -> dict[str, Any]:
    h = _width(size, 128, 768)
    layers = _width(size, 2, 4)
    heads = _width(size, 4, 12)
    return dict(
        vocab_size=_width(size, 2048, 50265),
        d_model=h,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=4 * h,
        decoder_ffn_dim=4 * h,
        max_position_embeddings=1024,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
    )


def _llama_like(size: str, **extra: Any) -> dict[str, Any]:
    # RoPE, grouped-query attention (4 query heads per KV head), SwiGLU, RMSNorm.
    h = _width(size, 128, 1024)
    heads = _width(size, 4, 16)
    return dict(
        vocab_size=_width(size, 2048, 32000),
        hidden_size=h,
        intermediate_size=_width(size, 352, 2816),
        num_hidden_layers=_width(size, 2, 4),
        num_attention_heads=heads,
        num_key_value_heads=heads // 4 if heads >= 4 else 1,
        max_position_embeddings=2048,
        attention_dropout=0.0,
        **extra,
    )


def _mistral(size: str) -> dict[str, Any]:
    # A sliding window shorter than the sequence, so that the window mask matters.
    return _llama_like(size, sliding_window=_width(size, 16, 256))


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
