"""The transformers architectures of the correctness sweep (``benchmarks/arch_sweep.py``),
built small from their configs with random weights, offline: ``HF``, and ``ODD_HF``, the
same models on padded attention masks of odd lengths (``arch_sweep_zoo.registry`` lists
them with the timm and torchvision ones)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from arch_sweep_zoo import Arch, Built, Output, randint, randn, seeded

_HF_SPECS: dict[str, tuple[str, str, dict[str, Any]]] = {}
"""Each ``HF`` entry's model class, config class and config, by name: the odd-size
variants (``ODD_HF``) reuse them."""


def _hf(
    name: str,
    model_class: str,
    config_class: str,
    config: dict[str, Any],
    inputs: Callable[[Any, int], tuple[Any, ...]] | None = None,
    names: tuple[str, ...] = ("input_ids",),
    decoder: bool = False,
    attr: str = "logits",
    seq: int = 32,
    suffix: str = "",
) -> Arch:
    """``inputs(cfg, seed)`` builds the input tuple; by default token ids in
    ``[0, vocab)`` for each of ``names``, batch 1 x ``seq``."""
    if not suffix:
        _HF_SPECS[name] = (model_class, config_class, config)

    def build() -> Built:
        from zoo.compat import import_transformers

        transformers = import_transformers()
        cfg = getattr(transformers, config_class)(**config)
        cls = getattr(transformers, model_class)
        model = seeded(lambda: Output(cls(cfg), names, False if decoder else None, attr))

        def make(seed: int) -> tuple[Any, ...]:
            if inputs is not None:
                return inputs(cfg, seed)
            vocab = cfg.vocab_size
            return tuple(randint(vocab, 1, seq, seed=seed + k) for k in range(len(names)))

        return model, make

    return Arch(f"hf_{name}{suffix}", "transformers", build)


V = 1024
"""Vocabulary of the language models."""
_DROP0 = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
_BERTLIKE = dict(
    vocab_size=V,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=128,
    **_DROP0,
)
_LLAMALIKE = dict(
    vocab_size=V,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    attention_dropout=0.0,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)
_SEQ2SEQ = dict(
    vocab_size=V,
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    max_position_embeddings=128,
    dropout=0.0,
    attention_dropout=0.0,
    activation_dropout=0.0,
    encoder_layerdrop=0.0,
    decoder_layerdrop=0.0,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=2,
)
_ENC_DEC = ("input_ids", "decoder_input_ids")


def _pixels(res: int, batch: int = 1) -> Callable[[Any, int], tuple[Any, ...]]:
    return lambda cfg, seed: (randn(batch, 3, res, res, seed=seed),)


def _masked(seq: int, pad: int, left: bool = False) -> Callable[[Any, int], tuple[Any, ...]]:
    """Batch 2 of ``seq`` tokens and an attention mask: the first row whole, the second
    with ``pad`` padding positions (at the end, or at the start: ``left``)."""

    def make(cfg: Any, seed: int) -> tuple[Any, ...]:
        ids = randint(cfg.vocab_size, 2, seq, seed=seed, low=3)
        mask = torch.ones(2, seq, dtype=torch.long)
        if left:
            mask[1, :pad] = 0
        else:
            mask[1, seq - pad :] = 0
        return ids, mask

    return make


def _whisper_inputs(cfg: Any, seed: int) -> tuple[Any, ...]:
    frames = 2 * cfg.max_source_positions
    return (
        randn(1, cfg.num_mel_bins, frames, seed=seed),
        randint(cfg.vocab_size, 1, 16, seed=seed + 1),
    )


def _clip_inputs(cfg: Any, seed: int) -> tuple[Any, ...]:
    return (
        randint(cfg.text_config.vocab_size, 2, 16, seed=seed),
        randn(2, 3, cfg.vision_config.image_size, cfg.vision_config.image_size, seed=seed + 1),
    )


def _audio_inputs(cfg: Any, seed: int) -> tuple[Any, ...]:
    return (randn(1, 4000, seed=seed),)


_IMAGE_VIT = dict(
    image_size=32,
    patch_size=4,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    num_labels=10,
    **_DROP0,
)

HF: list[Arch] = [
    _hf("roberta", "RobertaForMaskedLM", "RobertaConfig", {**_BERTLIKE, "pad_token_id": 1}),
    _hf(
        "albert",
        "AlbertForMaskedLM",
        "AlbertConfig",
        {**_BERTLIKE, "embedding_size": 32},
    ),
    _hf("electra", "ElectraForMaskedLM", "ElectraConfig", {**_BERTLIKE, "embedding_size": 32}),
    _hf(
        "deberta_v2",
        "DebertaV2ForMaskedLM",
        "DebertaV2Config",
        {
            **_BERTLIKE,
            "relative_attention": True,
            "position_buckets": 16,
            "pos_att_type": ["p2c", "c2p"],
        },
    ),
    _hf(
        "deberta",
        "DebertaForMaskedLM",
        "DebertaConfig",
        {**_BERTLIKE, "relative_attention": True, "pos_att_type": ["p2c", "c2p"]},
    ),
    _hf(
        "mobilebert",
        "MobileBertForMaskedLM",
        "MobileBertConfig",
        {
            **_BERTLIKE,
            "embedding_size": 32,
            "intra_bottleneck_size": 32,
            "true_hidden_size": 32,
            "num_feedforward_networks": 2,
        },
    ),
    _hf(
        "xlnet",
        "XLNetLMHeadModel",
        "XLNetConfig",
        dict(vocab_size=V, d_model=64, n_layer=2, n_head=4, d_inner=128, dropout=0.0),
    ),
    _hf(
        "gpt_neo",
        "GPTNeoForCausalLM",
        "GPTNeoConfig",
        dict(
            vocab_size=V,
            hidden_size=64,
            num_layers=2,
            num_heads=4,
            attention_types=[[["global", "local"], 1]],
            window_size=8,
            max_position_embeddings=128,
            embed_dropout=0.0,
            attention_dropout=0.0,
            resid_dropout=0.0,
        ),
        decoder=True,
    ),
    _hf(
        "gptj",
        "GPTJForCausalLM",
        "GPTJConfig",
        dict(
            vocab_size=V,
            n_embd=64,
            n_layer=2,
            n_head=4,
            rotary_dim=8,
            n_positions=128,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        ),
        decoder=True,
    ),
    _hf(
        "gpt_neox",
        "GPTNeoXForCausalLM",
        "GPTNeoXConfig",
        dict(
            vocab_size=V,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            rotary_pct=0.25,
            max_position_embeddings=128,
            attention_dropout=0.0,
            hidden_dropout=0.0,
        ),
        decoder=True,
    ),
    _hf(
        "bloom",
        "BloomForCausalLM",
        "BloomConfig",
        dict(
            vocab_size=V,
            hidden_size=64,
            n_layer=2,
            n_head=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        ),
        decoder=True,
    ),
    _hf(
        "falcon",
        "FalconForCausalLM",
        "FalconConfig",
        dict(
            vocab_size=V,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        ),
        decoder=True,
    ),
    _hf(
        "phi",
        "PhiForCausalLM",
        "PhiConfig",
        dict(
            vocab_size=V,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            partial_rotary_factor=0.5,
            max_position_embeddings=128,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attention_dropout=0.0,
        ),
        decoder=True,
    ),
    _hf("phi3", "Phi3ForCausalLM", "Phi3Config", dict(_LLAMALIKE), decoder=True),
    _hf(
        "gemma",
        "GemmaForCausalLM",
        "GemmaConfig",
        {**_LLAMALIKE, "head_dim": 16, "num_key_value_heads": 1},
        decoder=True,
    ),
    _hf(
        "gemma2",
        "Gemma2ForCausalLM",
        "Gemma2Config",
        {
            **_LLAMALIKE,
            "head_dim": 16,
            "sliding_window": 8,
            "query_pre_attn_scalar": 16,
        },
        decoder=True,
    ),
    _hf(
        "stablelm",
        "StableLmForCausalLM",
        "StableLmConfig",
        {**_LLAMALIKE, "partial_rotary_factor": 0.25},
        decoder=True,
    ),
    _hf(
        "mpt",
        "MptForCausalLM",
        "MptConfig",
        dict(vocab_size=V, d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=128),
        decoder=True,
    ),
    _hf(
        "codegen",
        "CodeGenForCausalLM",
        "CodeGenConfig",
        dict(
            vocab_size=V,
            n_embd=64,
            n_layer=2,
            n_head=4,
            rotary_dim=8,
            n_positions=128,
            n_ctx=128,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        ),
        decoder=True,
    ),
    _hf(
        "pegasus",
        "PegasusForConditionalGeneration",
        "PegasusConfig",
        dict(_SEQ2SEQ),
        names=_ENC_DEC,
        decoder=True,
    ),
    _hf(
        "mbart",
        "MBartForConditionalGeneration",
        "MBartConfig",
        dict(_SEQ2SEQ),
        names=_ENC_DEC,
        decoder=True,
    ),
    _hf("marian", "MarianMTModel", "MarianConfig", dict(_SEQ2SEQ), names=_ENC_DEC, decoder=True),
    _hf(
        "whisper",
        "WhisperForConditionalGeneration",
        "WhisperConfig",
        {
            **_SEQ2SEQ,
            "num_mel_bins": 16,
            "max_source_positions": 32,
            "max_target_positions": 64,
        },
        inputs=_whisper_inputs,
        names=("input_features", "decoder_input_ids"),
        decoder=True,
    ),
    _hf(
        "vit",
        "ViTForImageClassification",
        "ViTConfig",
        dict(_IMAGE_VIT),
        inputs=_pixels(32, 2),
        names=("pixel_values",),
    ),
    _hf(
        "swin",
        "SwinForImageClassification",
        "SwinConfig",
        dict(
            image_size=32,
            patch_size=2,
            embed_dim=32,
            depths=[1, 1],
            num_heads=[2, 4],
            window_size=4,
            num_labels=10,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            drop_path_rate=0.0,
        ),
        inputs=_pixels(32, 2),
        names=("pixel_values",),
    ),
    _hf(
        "convnext",
        "ConvNextForImageClassification",
        "ConvNextConfig",
        dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1], num_labels=10),
        inputs=_pixels(64, 2),
        names=("pixel_values",),
    ),
    _hf(
        "clip",
        "CLIPModel",
        "CLIPConfig",
        dict(
            text_config=dict(
                vocab_size=V,
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                max_position_embeddings=32,
            ),
            vision_config=dict(
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                image_size=32,
                patch_size=8,
            ),
            projection_dim=32,
        ),
        inputs=_clip_inputs,
        names=("input_ids", "pixel_values"),
        attr="logits_per_image",
    ),
    _hf(
        "wav2vec2",
        "Wav2Vec2ForCTC",
        "Wav2Vec2Config",
        dict(
            vocab_size=32,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            conv_dim=(32, 32, 32),
            conv_stride=(5, 2, 2),
            conv_kernel=(10, 3, 3),
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            feat_proj_dropout=0.0,
            final_dropout=0.0,
            layerdrop=0.0,
            mask_time_prob=0.0,
        ),
        inputs=_audio_inputs,
        names=("input_values",),
    ),
    _hf(
        "mixtral",
        "MixtralForCausalLM",
        "MixtralConfig",
        {**_LLAMALIKE, "num_local_experts": 4, "num_experts_per_tok": 2},
        decoder=True,
    ),
    _hf(
        "qwen2_moe",
        "Qwen2MoeForCausalLM",
        "Qwen2MoeConfig",
        {
            **_LLAMALIKE,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 64,
            "num_experts": 4,
            "num_experts_per_tok": 2,
        },
        decoder=True,
    ),
    _hf("qwen3", "Qwen3ForCausalLM", "Qwen3Config", {**_LLAMALIKE, "head_dim": 16}, decoder=True),
    _hf("olmo2", "Olmo2ForCausalLM", "Olmo2Config", dict(_LLAMALIKE), decoder=True),
    _hf("cohere", "CohereForCausalLM", "CohereConfig", dict(_LLAMALIKE), decoder=True),
    _hf(
        "starcoder2",
        "Starcoder2ForCausalLM",
        "Starcoder2Config",
        {**_LLAMALIKE, "residual_dropout": 0.0, "embedding_dropout": 0.0},
        decoder=True,
    ),
    _hf(
        "deepseek_v3",
        "DeepseekV3ForCausalLM",
        "DeepseekV3Config",
        {
            **_LLAMALIKE,
            "num_key_value_heads": 4,
            "moe_intermediate_size": 32,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_group": 1,
            "topk_group": 1,
            "first_k_dense_replace": 1,
            "kv_lora_rank": 16,
            "q_lora_rank": 32,
            "qk_rope_head_dim": 8,
            "qk_nope_head_dim": 8,
            "v_head_dim": 16,
        },
        decoder=True,
    ),
    _hf(
        "roformer",
        "RoFormerForMaskedLM",
        "RoFormerConfig",
        {**_BERTLIKE, "embedding_size": 64},
    ),
    _hf(
        "xglm",
        "XGLMForCausalLM",
        "XGLMConfig",
        dict(
            vocab_size=V,
            d_model=64,
            num_layers=2,
            attention_heads=4,
            ffn_dim=128,
            max_position_embeddings=128,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            layerdrop=0.0,
            pad_token_id=0,
        ),
        decoder=True,
    ),
    _hf(
        "biogpt",
        "BioGptForCausalLM",
        "BioGptConfig",
        {**_BERTLIKE, "pad_token_id": 0, "layerdrop": 0.0, "activation_dropout": 0.0},
        decoder=True,
    ),
    _hf(
        "blenderbot",
        "BlenderbotForConditionalGeneration",
        "BlenderbotConfig",
        dict(_SEQ2SEQ),
        names=_ENC_DEC,
        decoder=True,
    ),
    _hf(
        "modernbert",
        "ModernBertForMaskedLM",
        "ModernBertConfig",
        dict(
            vocab_size=V,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=3,
            num_attention_heads=4,
            local_attention=8,
            global_attn_every_n_layers=2,
            max_position_embeddings=128,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            sep_token_id=3,
            cls_token_id=4,
        ),
    ),
    _hf(
        "fnet",
        "FNetForMaskedLM",
        "FNetConfig",
        {
            k: v
            for k, v in _BERTLIKE.items()
            if k not in ("num_attention_heads", "attention_probs_dropout_prob")
        },
    ),
    _hf(
        "squeezebert",
        "SqueezeBertForMaskedLM",
        "SqueezeBertConfig",
        {
            **_BERTLIKE,
            "embedding_size": 64,
            "q_groups": 2,
            "k_groups": 2,
            "v_groups": 2,
            "post_attention_groups": 2,
            "intermediate_groups": 4,
            "output_groups": 4,
        },
    ),
    _hf(
        "deit",
        "DeiTForImageClassification",
        "DeiTConfig",
        dict(_IMAGE_VIT),
        inputs=_pixels(32, 2),
        names=("pixel_values",),
    ),
    _hf(
        "beit",
        "BeitForImageClassification",
        "BeitConfig",
        {**_IMAGE_VIT, "use_relative_position_bias": True, "drop_path_rate": 0.0},
        inputs=_pixels(32, 2),
        names=("pixel_values",),
    ),
    _hf(
        "segformer",
        "SegformerForImageClassification",
        "SegformerConfig",
        dict(
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[32, 64],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            drop_path_rate=0.0,
            num_labels=10,
        ),
        inputs=_pixels(64, 2),
        names=("pixel_values",),
    ),
    _hf(
        "mobilevit",
        "MobileViTForImageClassification",
        "MobileViTConfig",
        dict(
            image_size=64,
            hidden_sizes=[32, 48, 64],
            neck_hidden_sizes=[8, 8, 16, 24, 32, 40, 80],
            num_labels=10,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            classifier_dropout_prob=0.0,
        ),
        inputs=_pixels(64, 2),
        names=("pixel_values",),
    ),
    _hf(
        "dinov2",
        "Dinov2ForImageClassification",
        "Dinov2Config",
        {**_IMAGE_VIT, "drop_path_rate": 0.0},
        inputs=_pixels(32, 2),
        names=("pixel_values",),
    ),
    _hf(
        "olmoe",
        "OlmoeForCausalLM",
        "OlmoeConfig",
        {**_LLAMALIKE, "num_experts": 4, "num_experts_per_tok": 2},
        decoder=True,
    ),
]


_MASK = ("input_ids", "attention_mask")


def _odd_hf(
    name: str,
    inputs: Callable[[Any, int], tuple[Any, ...]],
    names: tuple[str, ...] = _MASK,
    decoder: bool = False,
    suffix: str = "_mask_odd",
    config: dict[str, Any] | None = None,
) -> Arch:
    """The ``HF`` entry ``name`` on other inputs (and ``config`` changes)."""
    model_class, config_class, base = _HF_SPECS[name]
    return _hf(
        name,
        model_class,
        config_class,
        {**base, **(config or {})},
        inputs=inputs,
        names=names,
        decoder=decoder,
        suffix=suffix,
    )


ODD_HF: list[Arch] = [
    # Attention masks with padding, odd lengths.
    _odd_hf("roberta", _masked(29, 7)),
    _odd_hf("deberta_v2", _masked(29, 7)),
    _odd_hf("gpt_neox", _masked(29, 5, left=True), decoder=True),
    _odd_hf("qwen3", _masked(29, 5, left=True), decoder=True),
    _odd_hf("gemma2", _masked(29, 5, left=True), decoder=True),
    _odd_hf("bloom", _masked(29, 5, left=True), decoder=True),
    _odd_hf(
        "vit", _pixels(36, 3), names=("pixel_values",), suffix="_odd", config={"image_size": 36}
    ),
]
