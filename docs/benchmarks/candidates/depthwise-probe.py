"""H200 probe (written in session 26, not run: no device time was left): a bfloat16 NHWC
depthwise convolution + scale + ReLU6 per shape, cuDNN (eager) against kiln's lowering,
summed kernel time and launches of one call. Small shapes are the dashboard's small size
(batch 2 at 64x64), large ones its large size (batch 32 at 224x224).

    PYTHONPATH=. python3 docs/benchmarks/candidates/depthwise-probe.py
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from kiln.frontends.dynamo import kiln_backend

SHAPES = [  # (batch, channels, height, width, window, stride)
    (2, 32, 32, 32, 3, 1),
    (2, 144, 16, 16, 3, 1),
    (2, 384, 4, 4, 3, 1),
    (2, 960, 2, 2, 3, 1),
    (2, 240, 8, 8, 5, 1),
    (8, 144, 56, 56, 3, 1),
    (8, 384, 14, 14, 3, 1),
    (32, 32, 112, 112, 3, 1),
    (32, 144, 56, 56, 3, 2),
    (32, 384, 14, 14, 3, 1),
    (32, 960, 7, 7, 3, 1),
    (32, 240, 28, 28, 5, 2),
]


def kernel_time(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, calls: int = 10):
    """Summed CUDA kernel microseconds and launches of one call."""
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn(x)
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(e.device_time_total for e in events) / calls, len(events) / calls


def block(channels: int, window: int, stride: int) -> torch.nn.Module:
    conv = torch.nn.Conv2d(channels, channels, window, stride, window // 2, groups=channels)
    return (
        torch.nn.Sequential(conv, torch.nn.ReLU6())
        .cuda()
        .to(torch.bfloat16)
        .to(memory_format=torch.channels_last)
        .eval()
    )


def main() -> None:
    for n, c, h, w, k, s in SHAPES:
        model = block(c, k, s)
        x = torch.randn(n, c, h, w, device="cuda", dtype=torch.bfloat16)
        x = x.to(memory_format=torch.channels_last)
        with torch.no_grad():
            cudnn = kernel_time(model, x)
            torch._dynamo.reset()
            compiled = torch.compile(model, backend=kiln_backend, options={"verbose": False})
            kiln = kernel_time(compiled, x)
        print(
            f"N{n} C{c} {h}x{w} k{k} s{s}: cuDNN {cudnn[0]:8.1f} us {cudnn[1]:5.0f} launches"
            f" | kiln {kiln[0]:8.1f} us {kiln[1]:4.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
