"""Run kiln IR on real inputs: the reference semantics every pass is checked against.

```python
from kiln.interpret import run
(out,) = run(module, torch.randn(4, 8), 3)   # runs func.func @forward
```

aten IR runs op by op through torch (see :mod:`kiln.dialects.aten.interpreter`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from kiln.dialects.aten.interpreter import ArgumentError, make_interpreter, run_function


def run(module: ModuleOp, *args: object, name: str = "forward") -> tuple[object, ...]:
    """Run ``func.func @name`` on torch tensors / Python ints and return its results."""
    return run_function(module, args, name)


__all__ = ["ArgumentError", "make_interpreter", "run", "run_function"]
