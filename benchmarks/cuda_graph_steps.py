"""Wall time per step with kiln's default CUDA graphs (``cuda_graphs="auto"``), without
them, and with Inductor's ``mode="reduce-overhead"``, on zoo models at the small size,
float32, inference and a training step (forward + backward); for kiln's default, whether
each compiled graph replays CUDA graphs (``CudaGraphRunner`` counters).

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/cuda_graph_steps.py hf_gpt2,hf_llama [infer,train]

Needs a GPU and the ``bench`` extra. Steps are timed back to back (30 after 5 warm-ups),
synchronised at both ends: wall time, as a user's loop sees it.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
import zoo.compat  # noqa: F401  (zoo import order: compat first)
from zoo import registry

from kiln.backends.triton.cudagraphs import CudaGraphRunner
from kiln.frontends.dynamo import kiln_backend


def _runner_counts() -> str:
    # type(), not isinstance(): gc also lists dead weak proxies.
    runners = [o for o in gc.get_objects() if type(o) is CudaGraphRunner]
    return "; ".join(
        f"plain calls {r.plain_calls}, graphs {sum(len(v) for v in r.graphs.values())}, "
        f"excluded signatures {len(r.plain)}"
        for r in runners
    )


def main(names: list[str], modes: list[str]) -> None:
    for name in names:
        for mode in modes:
            model, inputs = registry()[name].build("small")
            model = model.to("cuda").train(mode == "train")
            inputs = tuple(i.to("cuda") for i in inputs)

            def step(
                f: Callable[..., Any], mode: str = mode, inputs: tuple[Any, ...] = inputs
            ) -> None:
                if mode == "train":
                    out = f(*inputs)
                    out = out[0] if isinstance(out, (tuple, list)) else out
                    getattr(out, "logits", out).float().sum().backward()
                else:
                    with torch.no_grad():
                        f(*inputs)

            for backend in ("kiln", "kiln-no-graphs", "inductor-ro"):
                torch._dynamo.reset()
                gc.collect()
                if backend == "inductor-ro":
                    f = torch.compile(model, mode="reduce-overhead")
                else:
                    graphs = "auto" if backend == "kiln" else False
                    f = torch.compile(model, backend=kiln_backend, options={"cuda_graphs": graphs})
                for _ in range(5):
                    step(f)
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(30):
                    step(f)
                torch.cuda.synchronize()
                ms = (time.perf_counter() - start) / 30 * 1e3
                counts = f"  [{_runner_counts()}]" if backend == "kiln" else ""
                print(f"{name} {mode} {backend}: {ms:.3f} ms/step{counts}", flush=True)


if __name__ == "__main__":
    main(
        sys.argv[1].split(",") if len(sys.argv) > 1 else ["hf_gpt2", "hf_llama"],
        sys.argv[2].split(",") if len(sys.argv) > 2 else ["infer", "train"],
    )
