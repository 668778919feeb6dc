"""Lowering ``kernel.kernel`` to the cpp dialect (the ``lower-to-cpp`` pass's parts).

:mod:`.analysis` (node levels and stages), :mod:`.space` (the loop nest),
:mod:`.accumulators` (reduction states), :mod:`.emit` (building cpp IR),
:mod:`.kernel` (one kernel to one ``cpp.func``), :mod:`.provenance` (comment lines).
"""
