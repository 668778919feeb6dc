"""The architectures of the correctness sweep (``benchmarks/arch_sweep.py``): timm and
torchvision models built small, with random weights, offline, plus odd sizes; the
transformers models and their padded-mask variants are in ``arch_sweep_hf.py``. Each
:class:`Arch` builds ``(module, make_inputs)``; ``make_inputs(seed)`` gives a fresh input
tuple. :func:`registry` lists them all by name."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

MakeInputs = Callable[[int], tuple[Any, ...]]
Built = tuple[nn.Module, MakeInputs]


@dataclass(frozen=True)
class Arch:
    name: str
    source: str
    """timm, transformers, torchvision or custom."""
    build: Callable[[], Built]


# --------------------------------------------------------------------------------------
# Inputs and helpers


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def randint(high: int, *shape: int, seed: int, low: int = 0) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed))


def seeded(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    from zoo import seeded as zoo_seeded

    return zoo_seeded(build, seed)


def image_inputs(batch: int, res: int, channels: int = 3) -> MakeInputs:
    return lambda seed: (randn(batch, channels, res, res, seed=seed),)


class Output(nn.Module):
    """A transformers model called with keyword inputs, returning one output field
    (``logits`` by default)."""

    def __init__(
        self,
        model: nn.Module,
        names: tuple[str, ...],
        use_cache: bool | None,
        attr: str = "logits",
    ) -> None:
        super().__init__()
        self.model, self.names, self.use_cache, self.attr = model, names, use_cache, attr

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = dict(zip(self.names, inputs, strict=True))
        if self.use_cache is not None:
            kwargs["use_cache"] = self.use_cache
        return getattr(self.model(**kwargs), self.attr)


# --------------------------------------------------------------------------------------
# The architectures


def _timm(
    name: str,
    res: int = 64,
    batch: int = 2,
    img_size: bool = False,
    num_classes: int = 10,
    suffix: str = "",
    **kwargs: Any,
) -> Arch:
    def build() -> Built:
        from zoo.compat import import_timm

        timm = import_timm()
        extra = dict(kwargs)
        if img_size:
            extra["img_size"] = res
        model = seeded(
            lambda: timm.create_model(name, pretrained=False, num_classes=num_classes, **extra)
        )
        return model, image_inputs(batch, res)

    return Arch(f"timm_{name}{suffix}", "timm", build)


def _timm_class(name: str, module: str, cls: str, res: int, batch: int, **kwargs: Any) -> Arch:
    """A timm model class built directly (variants whose registered sizes cannot be
    overridden through ``create_model``)."""

    def build() -> Built:
        from zoo.compat import import_timm

        import_timm()
        mod = importlib.import_module(f"timm.models.{module}")
        model = seeded(lambda: getattr(mod, cls)(**kwargs))
        return model, image_inputs(batch, res)

    return Arch(f"timm_{name}", "timm", build)


def _mlp_mixer(kind: str) -> Built:
    """gMLP or ResMLP, 2 blocks at width 128 (their registered variants fix the depth)."""
    from zoo.compat import import_timm

    import_timm()
    from timm.layers import GatedMlp
    from timm.models import mlp_mixer

    def build() -> nn.Module:
        common: dict[str, Any] = dict(
            num_classes=10, img_size=64, patch_size=16, num_blocks=2, embed_dim=128
        )
        if kind == "gmlp":
            return mlp_mixer.MlpMixer(
                mlp_ratio=6,
                block_layer=mlp_mixer.SpatialGatingBlock,
                mlp_layer=GatedMlp,
                **common,
            )
        return mlp_mixer.MlpMixer(
            mlp_ratio=4, block_layer=mlp_mixer.ResBlock, norm_layer=mlp_mixer.Affine, **common
        )

    return seeded(build), image_inputs(2, 64)


TIMM: list[Arch] = [
    _timm("resnet18d"),
    _timm("resnest14d"),
    _timm("regnetx_002"),
    _timm("regnety_002"),
    _timm("densenet121"),
    _timm("efficientnet_lite0"),
    _timm("mobilenetv3_large_100"),
    _timm("ghostnet_100"),
    _timm("mobilevit_xxs"),
    _timm("levit_128s", img_size=True),
    _timm("poolformer_s12"),
    _timm_class(
        "convmixer_64_2",
        "convmixer",
        "ConvMixer",
        64,
        2,
        dim=64,
        depth=2,
        kernel_size=5,
        patch_size=4,
        num_classes=10,
    ),
    _timm("coat_lite_tiny", img_size=True),
    _timm("cait_xxs24_224", img_size=True, depth=2),
    _timm("xcit_nano_12_p16_224", img_size=True, depth=2),
    _timm("pit_ti_224", img_size=True),
    _timm("tnt_s_patch16_224", img_size=True, depth=2),
    _timm(
        "beit_base_patch16_224",
        img_size=True,
        depth=2,
        embed_dim=64,
        num_heads=2,
    ),
    _timm("eva02_tiny_patch14_224", res=56, img_size=True, depth=2),
    _timm("efficientformer_l1", res=224, batch=1),
    _timm("edgenext_xx_small"),
    _timm("repvgg_a0"),
    _timm("dla34"),
    _timm("hrnet_w18_small"),
    _timm("inception_v3", res=96, batch=1),
    _timm("nf_resnet26"),
    _timm("nfnet_l0"),
    _timm("cspresnet50"),
    _timm("ese_vovnet19b_dw"),
    _timm("gcvit_xxtiny", img_size=True),
    _timm("maxvit_nano_rw_256", img_size=True),
    _timm_class(
        "focalnet_tiny_srf_small",
        "focalnet",
        "FocalNet",
        64,
        2,
        depths=(1, 1, 1, 1),
        embed_dim=32,
        focal_levels=(2, 2, 2, 2),
        focal_windows=(3, 3, 3, 3),
        num_classes=10,
    ),
    _timm("crossvit_tiny_240", res=240, batch=1),
    _timm("twins_svt_small", img_size=True, depths=(1, 1, 1, 1)),
    _timm("sequencer2d_s", layers=(1, 1, 1, 1)),
    _timm("convnextv2_atto"),
    _timm("mobilenetv4_conv_small"),
    _timm("fastvit_t8"),
    _timm("efficientvit_b0"),
    _timm("rexnet_100"),
    _timm("hgnetv2_b0"),
    _timm("lcnet_050"),
    _timm("mixnet_s"),
    _timm("res2net50_14w_8s"),
    _timm("skresnet18"),
    _timm("gernet_s"),
    _timm("dpn48b"),
    _timm("selecsls42b"),
    _timm("cspdarknet53"),
    _timm("xception41"),
    _timm("halonet26t", res=256, batch=1),
    _timm("lambda_resnet26t", res=128, batch=1, img_size=True),
    _timm("sebotnet33ts_256", res=64, img_size=True),
    _timm("visformer_tiny", res=224, batch=1, img_size=True),
    _timm("volo_d1_224", img_size=True),
    _timm("deit3_small_patch16_224", img_size=True, depth=2),
    _timm("vit_relpos_small_patch16_224", img_size=True, depth=2),
    _timm("flexivit_small", img_size=True, depth=2),
    _timm("mvitv2_tiny", res=224, batch=1),
    _timm("hiera_tiny_224", res=224, batch=1),
    _timm("davit_tiny", depths=(1, 1, 1, 1)),
    _timm("inception_next_tiny", depths=(1, 1, 1, 1)),
    _timm("efficientformerv2_s0", res=224, batch=1),
    _timm("tiny_vit_5m_224", res=224, batch=1),
    _timm("pvt_v2_b0"),
    _timm("repvit_m0_9"),
    _timm("convit_tiny", img_size=True, depth=2),
    _timm("coatnet_nano_rw_224", img_size=True),
    Arch("timm_gmlp_small", "timm", lambda: _mlp_mixer("gmlp")),
    Arch("timm_resmlp_small", "timm", lambda: _mlp_mixer("resmlp")),
]


def _torchvision(name: str, res: int = 64, batch: int = 2, suffix: str = "", **kwargs: Any) -> Arch:
    def build() -> Built:
        from zoo.compat import import_torchvision

        import_torchvision()
        import torchvision.models as models

        factory: Callable[..., nn.Module] = getattr(models, name)
        model = seeded(lambda: factory(weights=None, num_classes=10, **kwargs))
        return model, image_inputs(batch, res)

    return Arch(f"tv_{name}{suffix}", "torchvision", build)


def _torchvision_class(
    name: str, module: str, cls: str, res: int, batch: int, **kwargs: Any
) -> Arch:
    def build() -> Built:
        from zoo.compat import import_torchvision

        import_torchvision()
        mod = importlib.import_module(f"torchvision.models.{module}")
        model = seeded(lambda: getattr(mod, cls)(**kwargs))
        return model, image_inputs(batch, res)

    return Arch(f"tv_{name}", "torchvision", build)


def _tv_maxvit_small() -> nn.Module:
    from torchvision.models.maxvit import MaxVit

    return MaxVit(
        input_size=(64, 64),
        stem_channels=16,
        partition_size=2,
        block_channels=[16, 32],
        block_layers=[1, 1],
        head_dim=8,
        stochastic_depth_prob=0.0,
        num_classes=10,
    )


def _tv_swin_small() -> nn.Module:
    from torchvision.models.swin_transformer import SwinTransformer

    return SwinTransformer(
        patch_size=[4, 4],
        embed_dim=32,
        depths=[1, 1, 1, 1],
        num_heads=[2, 2, 2, 2],
        window_size=[7, 7],
        stochastic_depth_prob=0.0,
        num_classes=10,
    )


def _built(name: str, factory: Callable[[], nn.Module], res: int, batch: int) -> Arch:
    def build() -> Built:
        from zoo.compat import import_torchvision

        import_torchvision()
        return seeded(factory), image_inputs(batch, res)

    return Arch(f"tv_{name}", "torchvision", build)


TORCHVISION: list[Arch] = [
    _torchvision("resnext50_32x4d"),
    _torchvision("wide_resnet50_2"),
    _torchvision("densenet121"),
    _torchvision("googlenet", aux_logits=False, init_weights=True),
    _torchvision("mnasnet0_5"),
    _torchvision("regnet_y_400mf"),
    _torchvision("squeezenet1_1"),
    _torchvision("vgg11_bn"),
    _torchvision("alexnet", res=64),
    _torchvision("convnext_tiny"),
    _torchvision_class(
        "vit_small",
        "vision_transformer",
        "VisionTransformer",
        32,
        2,
        image_size=32,
        patch_size=8,
        num_layers=2,
        num_heads=4,
        hidden_dim=64,
        mlp_dim=128,
        num_classes=10,
    ),
    _torchvision("vit_b_16", res=224, batch=1),
    _built("swin_small", _tv_swin_small, 224, 1),
    _torchvision("swin_t", res=224, batch=1),
    _built("maxvit_small", _tv_maxvit_small, 64, 2),
    _torchvision("efficientnet_v2_s"),
    _torchvision("mobilenet_v3_large"),
    _torchvision("shufflenet_v2_x0_5"),
    _torchvision("inception_v3", res=96, batch=1, aux_logits=False, init_weights=True),
    _torchvision("resnet34"),
]


ODD: list[Arch] = [
    # Sizes that are not multiples of any tile (57x57 images, batch 3); the language
    # models on padded masks of 29 tokens are arch_sweep_hf.ODD_HF.
    _timm("resnet18d", res=57, batch=3, suffix="_odd"),
    _timm("efficientnet_lite0", res=67, batch=3, suffix="_odd"),
    _timm("convnextv2_atto", res=61, batch=3, suffix="_odd"),
    _timm("poolformer_s12", res=67, batch=3, suffix="_odd"),
    _timm("dla34", res=96, batch=3, suffix="_odd"),
    _timm("deit3_small_patch16_224", res=48, batch=3, img_size=True, depth=2, suffix="_odd"),
    _torchvision("mobilenet_v3_large", res=71, batch=3, suffix="_odd"),
    _torchvision("densenet121", res=67, batch=3, suffix="_odd"),
    _torchvision(
        "inception_v3", res=99, batch=1, aux_logits=False, init_weights=True, suffix="_odd"
    ),
]


def registry() -> dict[str, Arch]:
    from arch_sweep_hf import HF, ODD_HF

    return {arch.name: arch for arch in [*TIMM, *HF, *TORCHVISION, *ODD, *ODD_HF]}
