"""Kernel census of training steps: what kiln's Triton pipeline launches per graph.

For zoo models (``benchmarks/zoo``, bench venv), one fwd + bwd step is traced the way
``torch.compile(model, backend="kiln")`` traces it (Dynamo, AOTAutograd, the min-cut
partitioner), and each graph AOTAutograd hands over (forward, backward) is compiled with
kiln's default pipeline for the Triton executor (kernels are generated, never run: the
step itself runs eagerly). Per graph it lists:

* launches (``kernel.launch``), by kernel kind; reductions; fused loop nodes;
* ATen externs by overload (views excluded), e.g. ``mm.default x14``;
* copy kernels (every node only loads and stores: a layout change) and fill kernels
  (nodes that load nothing: ``zeros``, ``full``), externs that copy (``clone``, ``copy``);
* bytes per kernel, estimated as the sizes of every buffer it reads or writes (a kernel
  that reads a slice of a buffer is charged the whole buffer), summed and the largest.

With ``--inductor`` the same step also goes through ``torch.compile`` with Inductor on
the CPU with ``cpu_backend="triton"``: Inductor's Triton scheduling (the GPU's SIMD fusion
rules) decides the kernels, which are generated but stubbed (see :func:`inductor_census`).
Comparable: launches and extern calls per graph, both from the same model and step on the
CPU. Not comparable: Inductor traces with its own decompositions (kiln's ``decompose`` pass
picks others), its partition may save other values, and on the GPU both sides call other
ATen attention ops (CPU: ``_scaled_dot_product_flash_attention_for_cpu``, CUDA: efficient
or flash attention) and cuBLAS may add split-K reduction kernels per ``mm``.

    PYTHONPATH=.:benchmarks /work/bench-venv/bin/python benchmarks/train_kernels.py \\
        --models hf_llama,hf_bert,hf_gpt2,hf_t5 [--inductor] [--detail]

The census is of the CPU graphs (the device decides only the attention overloads and
a few GPU-only passes: ``channels-last``, which leaves transformers alone).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.parser import Parser

from kiln.compiler import CompileOptions, compile_graph, extern_overloads
from kiln.dialects.kernel.kernel_ops import KernelOp
from kiln.dialects.kernel.program_ops import ExternOp, LaunchOp, byte_size, find_program
from kiln.dialects.loop.body_ops import LoadOp
from kiln.dialects.loop.ops import LoopNestOp
from kiln.frontends.input_aliases import InputAliases

COPY_EXTERNS = ("clone.default", "copy.default", "_to_copy.default", "contiguous.default")
FILL_EXTERNS = ("zeros.default", "full.default", "new_zeros.default", "zeros_like.default")


@dataclass
class KernelRow:
    name: str
    kind: str
    nodes: int
    what: str
    """``compute``, ``copy`` (every node only loads) or ``fill`` (a node loads nothing)."""
    numel: str
    rnumel: str
    bytes: int


@dataclass
class InductorGraph:
    launches: int
    kernels: int
    externs: Counter[str]


@dataclass
class GraphCensus:
    graph: str
    fx_nodes: int
    kernels: list[KernelRow] = field(default_factory=list[KernelRow])
    externs: Counter[str] = field(default_factory=Counter[str])
    inductor: InductorGraph | None = None

    @property
    def launches(self) -> int:
        return len(self.kernels)

    def count(self, what: str) -> int:
        return sum(1 for k in self.kernels if k.what == what)

    @property
    def reductions(self) -> int:
        return sum(1 for k in self.kernels if k.kind != "pointwise")

    @property
    def extern_calls(self) -> int:
        return sum(self.externs.values())

    @property
    def kernel_bytes(self) -> int:
        return sum(k.bytes for k in self.kernels)


def _buffer_bytes(ty: Any) -> int:
    size = byte_size(ty) if isinstance(ty, MemRefType) else None
    return size or 0


def _node_role(node: LoopNestOp) -> str:
    body = list(node.body.block.ops)
    loads = sum(1 for op in body if isinstance(op, LoadOp))
    if loads == 0:
        return "fill"
    # A load and the yield (casts aside): a layout change.
    others = [op for op in body if not isinstance(op, LoadOp) and op.name != "loop.yield"]
    return "copy" if node.name == "loop.pointwise" and not others else "compute"


def kernel_rows(module: ModuleOp) -> list[KernelRow]:
    """One row per ``kernel.launch`` of the module's program, in program order."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, KernelOp)}
    rows: list[KernelRow] = []
    for op in find_program(module).body.block.ops:
        if not isinstance(op, LaunchOp):
            continue
        kernel = kernels.get(op.kernel.root_reference.data)
        if kernel is None:  # lowered to a backend kernel already: count it plainly
            rows.append(KernelRow(op.kernel.root_reference.data, "?", 0, "compute", "?", "?", 0))
            continue
        nodes = kernel.nodes()
        roles = {_node_role(n) for n in nodes}
        what = "compute" if "compute" in roles else ("fill" if "fill" in roles else "copy")
        moved = sum(_buffer_bytes(v.type) for v in (*op.args, *op.outs))
        rows.append(
            KernelRow(
                kernel.sym_name.data,
                str(kernel.kernel_kind),
                len(nodes),
                what,
                kernel.numel.text,
                kernel.rnumel.text,
                moved,
            )
        )
    return rows


def extern_bytes(module: ModuleOp) -> int:
    return sum(
        sum(_buffer_bytes(v.type) for v in (*op.operands, *op.results))
        for op in find_program(module).body.block.ops
        if isinstance(op, ExternOp)
    )


Recorded = tuple[str, torch.fx.GraphModule, list[Any]]


def capture_training_graphs(model: torch.nn.Module, inputs: Sequence[Any]) -> list[Recorded]:
    """The forward and backward graphs of one training step as kiln's Dynamo backend gets
    them (AOTAutograd with the min-cut partitioner); the step runs eagerly."""
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    recorded: list[Recorded] = []

    def recorder(kind: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Any]:
        def compile_fn(gm: torch.fx.GraphModule, example: Sequence[Any]) -> Any:
            recorded.append((f"{kind}_{len(recorded)}", gm, list(example)))
            return gm

        return compile_fn

    backend = aot_autograd(
        fw_compiler=recorder("forward"),
        bw_compiler=recorder("backward"),
        partition_fn=min_cut_rematerialization_partition,
    )
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    out = compiled(*inputs)
    out.backward(torch.randn_like(out))
    return recorded


def kiln_census(
    name: str, gm: torch.fx.GraphModule, example: Sequence[Any], pipeline: str
) -> GraphCensus:
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    options = CompileOptions(executor="triton", verbose=False, graph_cache=False, pipeline=pipeline)
    aliases = InputAliases(gm)
    with unset_fake_temporarily():
        compiled = compile_graph(aliases.forwarding_inputs(gm), example, options, name=name)
    module = compiled.module
    census = GraphCensus(name, compiled.stats.fx_nodes, kernel_rows(module))
    census.externs = extern_overloads(module)
    return census


def gpu_census(model: torch.nn.Module, inputs: Sequence[Any], pipeline: str) -> list[GraphCensus]:
    """The step as kiln compiles it for a GPU, on this CPU: ``torch.compile`` with kiln's
    own Dynamo backend (so that a training forward returns its activations in the layout
    the backward reads, channels-last on a GPU, as it does there), every program marked
    ``cuda:0`` (``kiln.device``: the GPU's fusion, channels-last and prepacking
    decisions), kernels run in Triton's interpreter. Counted from each graph's last IR
    in ``debug_dir``. Not as on a GPU: ops whose decompositions this CPU build of torch
    cannot trace for CUDA tensors stay ATen calls (the embedding's backward), and the
    attention externs are the CPU's."""
    import functools
    import tempfile
    from unittest import mock

    from kiln.frontends.dynamo import kiln_backend
    from kiln.registry import default_registry

    with tempfile.TemporaryDirectory() as debug:
        options = {
            "executor": "triton",
            "debug_dir": debug,
            "graph_cache": False,
            "cuda_graphs": False,
            "verbose": False,
            "pipeline": pipeline,
        }
        torch._dynamo.reset()
        with mock.patch("kiln.compiler.gpu_device", return_value=torch.device("cuda", 0)):
            compiled = torch.compile(
                model, backend=functools.partial(kiln_backend, options=options)
            )
            out = compiled(*inputs)
            out.backward(torch.randn_like(out))
        graphs: list[GraphCensus] = []
        ctx = default_registry().make_context()
        dirs = sorted(Path(debug).iterdir(), key=lambda d: d.stat().st_mtime)
        for graph in dirs:
            last = max(graph.glob("*.mlir"), key=lambda f: int(f.name.split("_")[0]))
            module = Parser(ctx, last.read_text()).parse_module()
            fx_nodes = (graph / "fx_graph.py").read_text().count("torch.ops.")
            census = GraphCensus(graph.name, fx_nodes, kernel_rows(module))
            census.externs = extern_overloads(module)
            graphs.append(census)
    return graphs


def inductor_census(model: torch.nn.Module, inputs: Sequence[Any]) -> list[InductorGraph]:
    """Inductor's view of the same training step: ``torch.compile`` with Inductor's own
    AOTAutograd (its decompositions), on the CPU with ``cpu_backend="triton"`` so that the
    GPU's Triton scheduling decides the kernels. There is no Triton CPU driver here: the
    backend hash is faked and every kernel is a stub that does nothing, so the step's
    numbers are garbage, but the generated wrappers (one per graph, forward first) are
    Inductor's. Counts: launches (``.run(`` calls in ``call``), kernel definitions,
    extern calls (``extern_kernels.*``, ``torch.ops.aten.*``)."""
    from unittest import mock

    import torch._inductor.config as config
    from torch._inductor import async_compile
    from torch._inductor.utils import run_and_get_code

    class Stub:
        def run(self, *args: Any, **kwargs: Any) -> None:
            del args, kwargs

    def step() -> None:
        out = torch.compile(model)(*inputs)
        out.backward(torch.randn_like(out))

    torch._dynamo.reset()
    with (
        config.patch(cpu_backend="triton", fx_graph_cache=False, compile_threads=1),
        mock.patch("torch.utils._triton.triton_hash_with_backend", return_value="census"),
        mock.patch.object(async_compile.AsyncCompile, "triton", return_value=Stub()),
    ):
        _, sources = run_and_get_code(step)
    graphs: list[InductorGraph] = []
    for code in sources:
        call = code[code.find("def call(") :]
        externs: Counter[str] = Counter()
        for op in re.findall(r"\bextern_kernels\.(\w+)\(", call):
            externs[op] += 1
        for op in re.findall(r"\btorch\.ops\.aten\.(\w+\.\w+)\(", call):
            externs[op] += 1
        graphs.append(
            InductorGraph(
                len(re.findall(r"\.run\(", call)),
                len(re.findall(r"= async_compile\.triton\(", code)),
                externs,
            )
        )
    return graphs


def _extern_text(externs: Counter[str]) -> str:
    return ", ".join(f"{op} x{n}" for op, n in externs.most_common()) or "-"


def report(model: str, graphs: list[GraphCensus], detail: bool) -> None:
    print(f"\n## {model}\n")
    print(
        "| graph | FX nodes | launches | reductions | copy kernels | fill kernels | "
        "kernel MB (est.) | extern calls | Inductor launches (kernels) | Inductor extern calls |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g in graphs:
        ind = g.inductor
        ind_k = "-" if ind is None else f"{ind.launches} ({ind.kernels})"
        ind_e = "-" if ind is None else str(sum(ind.externs.values()))
        print(
            f"| {g.graph} | {g.fx_nodes} | {g.launches} | {g.reductions} | {g.count('copy')} | "
            f"{g.count('fill')} | {g.kernel_bytes / 1e6:.2f} | {g.extern_calls} | {ind_k} | {ind_e} |"
        )
    for g in graphs:
        print(f"\n{g.graph} externs: {_extern_text(g.externs)}")
        if g.inductor is not None:
            print(f"{g.graph} Inductor externs: {_extern_text(g.inductor.externs)}")
        if detail:
            for k in g.kernels:
                print(
                    f"  {k.name:12} {k.kind:10} nodes {k.nodes:2} {k.what:7} "
                    f"{k.numel:>8} x {k.rnumel:<6} {k.bytes / 1e3:9.1f} KB"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="hf_llama,hf_bert,hf_gpt2,hf_t5")
    parser.add_argument("--size", default="small")
    parser.add_argument("--inductor", action="store_true")
    parser.add_argument("--detail", action="store_true", help="one line per kernel")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="kiln's GPU decisions through its Dynamo backend (see gpu_census; slow: "
        "the step runs in Triton's interpreter)",
    )
    parser.add_argument(
        "--passes",
        default="",
        help="passes of the default pipeline with options, +-separated, in place of those "
        "passes (merge-products{cpu=true gpu=true}): the census of a variant",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from train_step_profile import with_pass_options
    from zoo import registry

    pipeline = with_pass_options(args.passes)

    specs = registry()
    for name in args.models.split(","):
        model, inputs = specs[name].build(args.size)
        model.train()
        if args.gpu:
            graphs = gpu_census(model, inputs, pipeline)
        else:
            graphs = [
                kiln_census(*graph, pipeline) for graph in capture_training_graphs(model, inputs)
            ]
        if args.inductor:
            inductor = inductor_census(model, inputs)
            if len(inductor) == len(graphs):  # the same graph breaks: pair them in order
                for census, view in zip(graphs, inductor, strict=True):
                    census.inductor = view
            else:
                print(f"{name}: Inductor made {len(inductor)} graphs, kiln {len(graphs)}")
        report(name, graphs, args.detail)


if __name__ == "__main__":
    main()
