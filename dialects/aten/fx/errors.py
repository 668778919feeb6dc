"""The one exception the FX importer raises."""

from __future__ import annotations


class FxImportError(Exception):
    """An FX node cannot be represented in kiln IR.

    The message names the node (``node 'view_3' (call_function aten.view.default)``) and
    says why, so that a user can find it in ``gm.graph`` or ``gm.code``.
    """

    def __init__(self, node_description: str, reason: str) -> None:
        super().__init__(f"{node_description}: {reason}")
        self.node_description = node_description
        self.reason = reason
