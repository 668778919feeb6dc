"""Vision models from torchvision and timm, random weights (``weights=None``,
``pretrained=False``).

small: batch 2 at 64x64 (224 where the architecture needs it); large: batch 32 at 224x224.
Batch 2, not 1: training, batch norm normalizes each channel over the batch and the map, and
one 64x64 image leaves 2x2 maps at the last stages, whose statistics over 4 values make the
gradients ill-conditioned (eager float32 was 30% off float64 on ShuffleNet's; at batch 2,
2e-4), so that no backend could be judged against them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from zoo import Built, ModelSpec, randn, seeded
from zoo.compat import import_timm, import_torchvision

_SMALL_RES = 64


def _image(size: str, res_small: int = _SMALL_RES) -> tuple[int, int]:
    """(batch, resolution)."""
    return (2, res_small) if size == "small" else (32, 224)


def _torchvision(name: str, family: str, res_small: int = _SMALL_RES) -> ModelSpec:
    def build(size: str) -> Built:
        import_torchvision()
        import torchvision.models as models

        factory: Callable[..., nn.Module] = getattr(models, name)
        batch, res = _image(size, res_small)
        return seeded(lambda: factory(weights=None)), (randn(batch, 3, res, res),)

    return ModelSpec(f"tv_{name}", "torchvision", family, build)


def _timm(
    name: str,
    family: str,
    res_small: int = _SMALL_RES,
    takes_img_size: bool = True,
    **kwargs: Any,
) -> ModelSpec:
    def build(size: str) -> Built:
        timm = import_timm()
        batch, res = _image(size, res_small)
        extra = dict(kwargs)
        if takes_img_size:
            extra["img_size"] = res
        model = seeded(lambda: timm.create_model(name, pretrained=False, **extra))
        return model, (randn(batch, 3, res, res),)

    short = name.split("_patch")[0].removesuffix("_224")
    return ModelSpec(f"timm_{short}", "timm", family, build)


SPECS: list[ModelSpec] = [
    _torchvision("resnet18", "cnn"),
    _torchvision("resnet50", "cnn"),
    _torchvision("mobilenet_v2", "depthwise-cnn"),
    _torchvision("mobilenet_v3_small", "depthwise-cnn"),
    _torchvision("shufflenet_v2_x1_0", "depthwise-cnn"),
    _torchvision("efficientnet_b0", "depthwise-cnn"),
    _timm("convnext_atto", "convnext", takes_img_size=False),
    _timm("vit_tiny_patch16_224", "vit"),
    _timm("vit_small_patch16_224", "vit"),
    _timm("deit_tiny_distilled_patch16_224", "vit"),
    _timm("mixer_s16_224", "mixer"),
    # Swin's windows need the resolution its relative-position tables were built for.
    _timm("swin_tiny_patch4_window7_224", "window-vit", res_small=224, takes_img_size=False),
]
