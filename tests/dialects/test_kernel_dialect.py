"""The kernel dialect: round trip, builders, attributes and verifiers."""

from __future__ import annotations

from io import StringIO

import pytest
import sympy
from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, SymbolRefAttr, f32
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from kiln.dialects.kernel import (
    AllocOp,
    ConfigAttr,
    FreeOp,
    KernelKind,
    KernelOp,
    LaunchOp,
    ProgramOp,
    ReturnOp,
    ReuseOp,
    YieldOp,
)
from kiln.dialects.kernel.program_ops import byte_size, can_reuse
from kiln.registry import make_context

MODULE = """
builtin.module {
  kernel.kernel @kernel0 persistent [4] x [8] (%x: memref<4x8xf32>) -> (memref<4x8xf32>) attributes {tiling = #kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>, configs = [#kernel.config<XBLOCK = 1, RBLOCK = 8, num_warps = 1, num_stages = 1>], reduction_hint = "inner"} {
    %m = loop.reduction max [4] reduce [8] (%x) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>) -> memref<4xf32> {
    ^bb0(%d0: index, %r0: index, %in0: memref<4x8xf32>):
      %v = loop.load %in0["8*d0 + r0"] : memref<4x8xf32>
      loop.yield %v : f32
    }
    %e = loop.pointwise [4, 8] (%x, %m) {kernel.vars = [#loop.expr<"d0">, #loop.expr<"r0">]} : (memref<4x8xf32>, memref<4xf32>) -> memref<4x8xf32> {
    ^bb0(%d0: index, %d1: index, %in0: memref<4x8xf32>, %in1: memref<4xf32>):
      %a = loop.load %in0["8*d0 + d1"] : memref<4x8xf32>
      %b = loop.load %in1["d0"] : memref<4xf32>
      %c = arith.subf %a, %b : f32
      loop.yield %c : f32
    }
    kernel.yield %e : memref<4x8xf32>
  }
  kernel.program @forward(%x: memref<4x8xf32>, %w: memref<8x3xf32>) -> memref<4x3xf32> attributes {kiln.outputs = "0"} {
    %0 = kernel.alloc : memref<4x8xf32>
    kernel.launch @kernel0(%x) outs(%0) : (memref<4x8xf32>) -> (memref<4x8xf32>)
    %1 = kernel.extern (%0, %w) : (memref<4x8xf32>, memref<8x3xf32>) -> memref<4x3xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>):
      %c = aten.mm.default(%a, %b) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      kernel.yield %c : tensor<4x3xf32>
    }
    %2 = kernel.reuse %0 : memref<4x8xf32> -> memref<32xf32>
    kernel.free %2 : memref<32xf32>
    kernel.return %1 : memref<4x3xf32>
  }
}
"""


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def test_round_trip() -> None:
    module = parse(MODULE)
    module.verify()
    assert str(module) == MODULE.strip()
    assert parse(str(module)).is_structurally_equivalent(module)
    generic = StringIO()
    Printer(stream=generic, print_generic_format=True).print_op(module)
    assert parse(generic.getvalue()).is_structurally_equivalent(module)


def test_accessors() -> None:
    module = parse(MODULE)
    kernel, program = list(module.ops)
    assert isinstance(kernel, KernelOp)
    assert isinstance(program, ProgramOp)
    assert kernel.kernel_kind is KernelKind.PERSISTENT
    assert [n.name for n in kernel.nodes()] == ["loop.reduction", "loop.pointwise"]
    assert list(kernel.buffer_args()) == list(kernel.body.block.args)
    assert not kernel.sym_args()
    assert kernel.tiling is not None
    assert kernel.tiling.value("RBLOCK") == 8
    assert kernel.tiling.value("YBLOCK") is None


def test_build_and_verify() -> None:
    ty = MemRefType(f32, [4])
    block = Block(arg_types=[ty])
    block.add_op(ReturnOp(block.args[0]))
    program = ProgramOp("identity", FunctionType.from_lists([ty], [ty]), Region(block))
    ModuleOp([program]).verify()
    alloc = AllocOp(ty)
    free = FreeOp(alloc.result)
    block.insert_ops_before([alloc, free], block.last_op)  # pyright: ignore[reportArgumentType]
    ModuleOp([program.clone()]).verify()


def test_config_attr() -> None:
    config = ConfigAttr.of({"num_warps": 4, "XBLOCK": 64, "RBLOCK": 8})
    assert str(config) == "#kernel.config<XBLOCK = 64, RBLOCK = 8, num_warps = 4>"
    assert config.as_dict() == {"XBLOCK": 64, "RBLOCK": 8, "num_warps": 4}
    with pytest.raises(VerifyException, match="must be positive"):
        ConfigAttr((("XBLOCK", 0),))
    with pytest.raises(VerifyException, match="keys must come in the order"):
        ConfigAttr((("RBLOCK", 1), ("XBLOCK", 1)))
    with pytest.raises(ParseError, match="unknown config key 'ZBLOCK'"):
        parse('"test.op"() {c = #kernel.config<ZBLOCK = 1>} : () -> ()')


def test_reuse_compatibility() -> None:
    assert byte_size(MemRefType(f32, [4, 8])) == 128
    assert byte_size(MemRefType(f32, [-1, 8])) is None
    assert can_reuse(MemRefType(f32, [4, 8]), MemRefType(f32, [32]))
    assert not can_reuse(MemRefType(f32, [4, 8]), MemRefType(f32, [16]))
    assert can_reuse(MemRefType(f32, [-1, 8]), MemRefType(f32, [-1, 8]))
    assert not can_reuse(MemRefType(f32, [-1, 8]), MemRefType(f32, [8, -1]))


BAD_PROGRAMS = {
    "use_after_free": (
        """
        %b = kernel.alloc : memref<4xf32>
        kernel.free %b : memref<4xf32>
        kernel.return %b : memref<4xf32>
        """,
        "kernel.return uses %b after its kernel.free",
    ),
    "double_free": (
        """
        %b = kernel.alloc : memref<4xf32>
        kernel.free %b : memref<4xf32>
        kernel.free %b : memref<4xf32>
        kernel.return %x : memref<4xf32>
        """,
        "%b is freed twice",
    ),
    "free_argument": (
        """
        kernel.free %x : memref<4xf32>
        kernel.return %x : memref<4xf32>
        """,
        "%x is a program argument",
    ),
    "read_before_write": (
        """
        %b = kernel.alloc : memref<4xf32>
        kernel.return %b : memref<4xf32>
        """,
        "kernel.return reads %b before anything writes it",
    ),
    "return_type": (
        """
        %b = kernel.alloc : memref<8xf32>
        kernel.return %x : memref<4xf32>
        """,
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PROGRAMS))
def test_lifetime_verifier(case: str) -> None:
    body, message = BAD_PROGRAMS[case]
    text = f"kernel.program @p(%x: memref<4xf32>) -> memref<4xf32> {{\n{body}\n}}"
    module = parse(text)
    if message is None:
        module.verify()  # an unused allocation is allowed (buffer-reuse frees it)
        return
    with pytest.raises(VerifyException, match=message):
        module.verify()


def test_launch_checks_its_kernel() -> None:
    module = parse(MODULE)
    program = list(module.ops)[1]
    launch = next(op for op in program.walk() if isinstance(op, LaunchOp))
    launch.kernel = SymbolRefAttr("missing")
    with pytest.raises(VerifyException, match=r"'@missing' is not a kernel\.kernel"):
        module.verify()


def test_kernel_signature_is_checked() -> None:
    kernel = KernelOp("k", KernelKind.POINTWISE, sympy.Integer(4), 2, [], [])
    kernel.body.block.add_op(YieldOp())
    with pytest.raises(VerifyException, match="a pointwise kernel has rnumel 1, not 2"):
        kernel.verify()


def test_reuse_shapes() -> None:
    module = parse(
        """
        kernel.program @p() {
          %b = kernel.alloc : memref<4xf32>
          %c = kernel.reuse %b : memref<4xf32> -> memref<2x2xf32>
          kernel.return
        }
        """
    )
    module.verify()
    reuse = next(op for op in module.walk() if isinstance(op, ReuseOp))
    assert reuse.result.type == MemRefType(f32, [2, 2])
