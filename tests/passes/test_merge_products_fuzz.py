"""Hypothesis fuzzing of ``merge-products`` end to end on the CPU: random groups of
products sharing an operand (``tests/product_groups.py``) compiled through the default
pipeline with ``merge-products{cpu=true}`` (the C++ executor) against eager. The same
groups as on a GPU: ``tests/backends/triton/test_triton_fuzz.py``."""

from __future__ import annotations

import os

import torch
from hypothesis import given
from product_groups import Products, check_products, products
from test_graph_fuzz import fuzz

from kiln.compile_options import DEFAULT_PIPELINE
from kiln.compiler import CompileOptions

EXAMPLES = int(os.environ.get("KILN_FUZZ_EXAMPLES", "100")) // 4

CPU_PIPELINE = DEFAULT_PIPELINE.replace("merge-products", "merge-products{cpu=true}")


@fuzz(EXAMPLES)
@given(products())
def test_random_product_groups_merged_on_the_cpu(program: Products) -> None:
    options = CompileOptions(executor="cpp", verbose=False, pipeline=CPU_PIPELINE)
    compiled = check_products(program, options)
    if program.shared == "left" and not program.bias and not any(program.returned):
        # Consumed projections of one input always merge: one product is left.
        assert compiled.stats.externs.get("aten::mm.default", 0) == 1, compiled.stats.externs


def test_the_cpu_check_sees_a_merge() -> None:
    # The fuzz test's merge assertion holds where it should (a test that cannot fail
    # would not know): three consumed projections become one product.
    program = Products(torch.float32, "left", 6, 5, (3, 4, 7), True, False, (False,) * 3)
    options = CompileOptions(executor="cpp", verbose=False, pipeline=CPU_PIPELINE)
    assert check_products(program, options).stats.externs.get("aten::mm.default") == 1
    plain = CompileOptions(executor="cpp", verbose=False)
    assert check_products(program, plain).stats.externs.get("aten::mm.default") == 3
