"""The ``cpp`` Dialect object."""

from __future__ import annotations

from xdsl.ir import Dialect

from kiln.dialects.cpp.attributes import LoopKindAttr
from kiln.dialects.cpp.func_ops import FuncOp, ReturnOp
from kiln.dialects.cpp.loop_ops import ForOp, YieldOp
from kiln.dialects.cpp.memory_ops import (
    AllocaOp,
    AtomicAddOp,
    CheckIndexOp,
    IndexOp,
    LoadOp,
    StoreOp,
)
from kiln.dialects.cpp.tile_ops import TransposeTileOp

Cpp = Dialect(
    "cpp",
    [
        FuncOp,
        ReturnOp,
        ForOp,
        YieldOp,
        LoadOp,
        StoreOp,
        AtomicAddOp,
        IndexOp,
        AllocaOp,
        CheckIndexOp,
        TransposeTileOp,
    ],
    [LoopKindAttr],
)
