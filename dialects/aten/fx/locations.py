"""Source locations for imported ops: the FX node's name and the source line.

```mlir
%relu = aten.relu.default(%addmm) : (...) -> tensor<2x4xf32> loc("relu"("model.py":12:0))
%t = aten.t.default(%w) : (...) -> tensor<8x4xf32>
    loc("t"(callsite(".../torch/nn/modules/linear.py":134:0 at "model.py":11:0)))
```

The location is an MLIR name location (``NameLoc``) around the innermost frame of
``node.meta["stack_trace"]`` (a ``FileLineColLoc``; column 0, FX records none). When
that frame is inside torch itself (``nn.Linear.forward``), it becomes a ``callsite``
of it at the innermost frame outside torch, the line the user wrote. Without a stack
trace it is the bare name. All of these print with ``Printer(print_debuginfo=True)``
and parse back.
"""

from __future__ import annotations

import os
import re

import torch
from xdsl.dialects.builtin import (
    CallSiteLoc,
    FileLineColLoc,
    IntAttr,
    NameLoc,
    NoneAttr,
    StringAttr,
)
from xdsl.ir import Attribute

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
# Frames in torch (nn.Linear.forward, ...) and in kiln's capture wrappers are not where
# the user wrote the op.
_LIBRARY_DIRS = (
    os.path.dirname(torch.__file__) + os.sep,
    os.path.dirname(os.path.realpath(__file__)) + os.sep,
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep + "capture.py",
)


def _is_library_frame(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS)


class LocationBuilder:
    """Builds node locations, caching the parsed frames per stack-trace string."""

    def __init__(self) -> None:
        self._frames: dict[str, Attribute] = {}
        self._none = NoneAttr()

    def frame(self, stack_trace: str | None) -> Attribute:
        """The location of an FX stack trace, or ``NoneAttr`` when there is none."""
        if not stack_trace:
            return self._none
        location = self._frames.get(stack_trace)
        if location is None:
            location = self._parse(stack_trace)
            self._frames[stack_trace] = location
        return location

    def _parse(self, stack_trace: str) -> Attribute:
        # FX stack traces list frames outermost first.
        frames = [(name, int(line)) for name, line in _FRAME.findall(stack_trace)]
        if not frames:
            return self._none
        innermost = _file_loc(*frames[-1])
        if not _is_library_frame(frames[-1][0]):
            return innermost
        for name, line in reversed(frames):
            if not _is_library_frame(name):
                return CallSiteLoc(innermost, _file_loc(name, line))
        return innermost

    def node_location(self, name: str, stack_trace: str | None) -> NameLoc:
        return NameLoc(StringAttr(name), self.frame(stack_trace))


def _file_loc(filename: str, line: int) -> FileLineColLoc:
    return FileLineColLoc(StringAttr(filename), IntAttr(line), IntAttr(0))
