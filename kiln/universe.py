"""kiln's dialects and passes for the stock ``xdsl-opt`` (entry point ``xdsl.universe``).

pyproject declares ``[project.entry-points."xdsl.universe"] kiln =
"kiln.universe:KILN_UNIVERSE"``, so with kiln installed ``xdsl-opt -p decompose in.mlir``
parses aten IR and runs kiln's passes. Everything here is a lazy factory: xDSL loads
every universe each time ``xdsl-opt`` starts, and a failing import here would break
``xdsl-opt`` for everyone, so this module imports nothing heavy.

xDSL rejects two universes that define the same name. kiln's ``cse``, ``dce`` and
``canonicalize`` are therefore left out: in ``xdsl-opt`` those names are xDSL's own
passes, which treat aten ops the same way (through the ops' ``Pure`` and
canonicalization traits).
"""

from __future__ import annotations

from xdsl.transforms import get_all_passes
from xdsl.universe import Universe

from kiln.registry import kiln_dialect_factories, kiln_pass_factories, kiln_target_factories


def _kiln_universe() -> Universe:
    upstream_passes = get_all_passes()
    return Universe(
        all_dialects=kiln_dialect_factories(),
        all_passes={
            name: factory
            for name, factory in kiln_pass_factories().items()
            if name not in upstream_passes
        },
        all_targets=kiln_target_factories(),
    )


KILN_UNIVERSE = _kiln_universe()
"""The Universe xDSL's multiverse discovers through the ``xdsl.universe`` entry point."""
