"""The dashboard's accuracy gate on one training task, for layouts and executors the
dashboard does not run: eager channels-last, kiln with the GPU's channels-last decisions
forced on the CPU, or any kiln executor.

A row failing the gate (``dashboard_task.accuracy``) may be a wrong result or a rounding
spread the gate's perturbed eager runs do not show (TF32 convolutions of another layout):
eager itself in another layout tells the two apart.

    python benchmarks/accuracy_gate.py --model tv_shufflenet_v2_x1_0 --variants eager-cl,kiln
    python benchmarks/accuracy_gate.py --device cuda --variants eager-cl --no-tf32
    python benchmarks/accuracy_gate.py --variants kiln-triton --gpu-layouts
    python benchmarks/accuracy_gate.py --device cuda --variants kiln \
        --pipeline "$(python -c 'import kiln.compiler as c; print(c.DEFAULT_PIPELINE)' \
                      | sed 's/channels-last/channels-last{saved-nhwc=false}/')"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))

import zoo
from dashboard_task import Reference, Task, accuracy, channels_last, clone_all

from kiln.frontends.dynamo import kiln_backend


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="tv_shufflenet_v2_x1_0")
    p.add_argument("--size", default="small")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--variants",
        default="eager-cl,kiln",
        help="eager-cl (eager channels-last), kiln, kiln-<executor> (cpp, triton)",
    )
    p.add_argument("--no-tf32", action="store_true", help="cuDNN and cuBLAS without TF32")
    p.add_argument(
        "--gpu-layouts",
        action="store_true",
        help="channels-last decides as on the GPU (saved activations NHWC) on any device",
    )
    p.add_argument(
        "--pipeline",
        help="kiln's pass pipeline, e.g. the default with channels-last{saved-nhwc=false}",
    )
    args = p.parse_args()
    if args.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    if args.gpu_layouts:
        import kiln.passes.channels_last as channels_last_pass

        channels_last_pass._on_gpu = lambda module: True  # pyright: ignore[reportPrivateUsage]
    spec = zoo.registry()[args.model]
    base, inputs = spec.build(args.size)
    task = Task(spec, args.size, "train", args.dtype, torch.device(args.device), base, inputs)
    model, x = task.instance()
    ref = Reference(clone_all(task.step(model, model, x)), 0.0)
    for variant in args.variants.split(","):
        torch._dynamo.reset()
        model, x = task.instance()
        if variant == "eager-cl":
            model, x = channels_last(model, x)
            fn = model
        else:
            options: dict[str, Any] = {"verbose": False}
            if args.pipeline:
                options["pipeline"] = args.pipeline
            if variant.startswith("kiln-"):
                options["executor"] = variant.removeprefix("kiln-")
            fn = torch.compile(model, backend=kiln_backend, options=options)
        acc = accuracy(task, clone_all(task.step(fn, model, x)), ref)
        print(f"{variant}: {acc.err_eager:.1e} vs eager; {acc.reason or 'passes'}", flush=True)


if __name__ == "__main__":
    main()
