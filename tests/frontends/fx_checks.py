"""Structural checks of an imported FX graph, shared by the frontend tests."""

from __future__ import annotations

import io
from typing import Any

import torch
import torch.fx
from torch.fx.immutable_collections import immutable_dict, immutable_list
from xdsl.dialects.builtin import (
    DictionaryAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    TensorType,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer

from kiln.dialects.aten import AtenOp, GenericOp
from kiln.frontends.fx import NAME_ATTR, OUTPUTS_ATTR, rebuild_outputs
from kiln.registry import make_context


def the_function(module: ModuleOp) -> FuncOp:
    (function,) = module.ops
    assert isinstance(function, FuncOp)
    return function


def print_with_locations(module: ModuleOp) -> str:
    stream = io.StringIO()
    Printer(stream=stream, print_debuginfo=True).print_op(module)
    return stream.getvalue()


def assert_round_trips(module: ModuleOp) -> None:
    """Verifies; prints, parses back and prints identically, with and without locations."""
    module.verify()
    text = str(module)
    reparsed = Parser(make_context(), text).parse_module()
    reparsed.verify()
    assert str(reparsed) == text
    with_locations = print_with_locations(module)
    reparsed = Parser(make_context(), with_locations).parse_module()
    assert print_with_locations(reparsed) == with_locations


def node_ops(module: ModuleOp) -> dict[str, Operation]:
    """The op named after each FX node by its location."""
    ops: dict[str, Operation] = {}
    for op in the_function(module).body.walk():
        if isinstance(op.location, NameLoc):
            ops.setdefault(op.location.desc.data, op)
    return ops


def arg_names(module: ModuleOp) -> list[str]:
    attrs = the_function(module).arg_attrs
    assert attrs is not None
    names: list[str] = []
    for attr in attrs.data:
        assert isinstance(attr, DictionaryAttr)
        name = attr.data[NAME_ATTR]
        assert isinstance(name, StringAttr)
        names.append(name.data)
    return names


def assert_faithful(gm: torch.fx.GraphModule, module: ModuleOp) -> None:
    """One argument per placeholder (same names and order), one op per ATen node (same
    overload), and ``kiln.outputs`` rebuilds the graph's output structure."""
    assert_round_trips(module)
    placeholders = [n.name for n in gm.graph.find_nodes(op="placeholder")]
    assert arg_names(module)[: len(placeholders)] == placeholders
    ops = node_ops(module)
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        op = ops[node.name]
        assert isinstance(op, AtenOp)
        schema = node.target._schema
        overload = schema.overload_name or "default"
        if isinstance(op, GenericOp):
            assert op.overload_name.startswith(schema.name + ".")
        elif op.name != f"aten.{schema.name.partition('::')[2]}.{overload}":
            # Python numbers in tensor slots select the Scalar overload.
            assert op.name.startswith(f"aten.{schema.name.partition('::')[2]}.")
    function = the_function(module)
    assert OUTPUTS_ATTR in function.attributes
    terminator = function.body.block.last_op
    assert isinstance(terminator, ReturnOp)
    assert_same_structure(
        rebuild_outputs(function, list(terminator.arguments)), output_structure(gm)
    )


def output_structure(gm: torch.fx.GraphModule) -> Any:
    (output,) = gm.graph.find_nodes(op="output")
    return output.args[0]


def assert_same_structure(rebuilt: Any, expected: Any) -> None:
    """Same containers and None positions; SSA values where FX has nodes."""
    if isinstance(expected, torch.fx.Node):
        assert rebuilt is not None
        assert not isinstance(rebuilt, list | tuple | dict)
        return
    # FX stores containers as immutable_list / immutable_dict; the graph returns the
    # plain list / dict they stand for.
    container = {immutable_list: list, immutable_dict: dict}.get(type(expected), type(expected))
    assert type(rebuilt) is container, (rebuilt, expected)
    if isinstance(expected, list | tuple):
        assert len(rebuilt) == len(expected)
        for r, e in zip(rebuilt, expected, strict=True):
            assert_same_structure(r, e)
    elif isinstance(expected, dict):
        assert rebuilt.keys() == expected.keys()
        for key in expected:
            assert_same_structure(rebuilt[key], expected[key])
    else:
        assert rebuilt == expected


def dynamic_dims(module: ModuleOp) -> int:
    """How many ``?`` dims the function's tensor arguments have."""
    count = 0
    for ty in the_function(module).function_type.inputs.data:
        if isinstance(ty, TensorType):
            count += sum(1 for d in ty.get_shape() if d < 0)
    return count
