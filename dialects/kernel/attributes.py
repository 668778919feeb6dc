"""Attributes of the kernel dialect: kernel kinds and launch configurations."""

from __future__ import annotations

from collections.abc import Mapping
from enum import auto

from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Data, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class KernelKind(StrEnum):
    """How a kernel iterates.

    ``fuse`` produces ``pointwise`` (rnumel 1) and ``reduction`` kernels; ``tile`` refines
    a reduction into ``persistent`` (the whole reduction in one block), ``looped`` (a loop
    over reduction blocks with an accumulator) or ``split`` (the first stage of a split
    reduction: partial results for chunks of the reduction), and a kernel holding a
    matrix product (:mod:`kiln.dialects.loop.dot`) into ``matmul``: ``YBLOCK`` x
    ``XBLOCK`` output tiles over ``ynumel`` rows, a loop over ``RBLOCK`` chunks of the
    product's inner dimension, its pointwise nodes the epilogue.
    """

    POINTWISE = auto()
    REDUCTION = auto()
    PERSISTENT = auto()
    LOOPED = auto()
    SPLIT = auto()
    MATMUL = auto()

    @property
    def reduces(self) -> bool:
        return self is not KernelKind.POINTWISE


@irdl_attr_definition
class KernelKindAttr(EnumAttribute[KernelKind], SpacedOpaqueSyntaxAttribute):
    """``#kernel<kind reduction>`` (in ``kernel.kernel``'s syntax just ``reduction``)."""

    name = "kernel.kind"


CONFIG_KEYS = ("YBLOCK", "XBLOCK", "RBLOCK", "num_warps", "num_stages")
"""The launch parameters a config may set, in printing order."""


@irdl_attr_definition
class ConfigAttr(Data[tuple[tuple[str, int], ...]]):
    """One launch configuration of a kernel: block sizes and Triton's warps and stages.

    ``XBLOCK``/``YBLOCK`` tile the kernel's pointwise space (``YBLOCK`` only for 2-D
    tiles), ``RBLOCK`` its reduction space; a reduction is persistent when ``RBLOCK`` covers
    ``rnumel``. Every value is a positive integer.

    ```mlir
    #kernel.config<XBLOCK = 8, RBLOCK = 16, num_warps = 2, num_stages = 1>
    ```
    """

    name = "kernel.config"

    @staticmethod
    def of(values: Mapping[str, int]) -> ConfigAttr:
        """A config from a mapping, keys in :data:`CONFIG_KEYS` order."""
        return ConfigAttr(tuple((k, int(values[k])) for k in CONFIG_KEYS if k in values))

    def value(self, key: str, default: int | None = None) -> int | None:
        """The value of ``key`` (e.g. ``XBLOCK``), or ``default``."""
        return dict(self.data).get(key, default)

    def as_dict(self) -> dict[str, int]:
        return dict(self.data)

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[tuple[str, int], ...]:
        def entry() -> tuple[str, int]:
            pos = parser.pos
            key = parser.parse_identifier("expected a config key")
            if key not in CONFIG_KEYS:
                parser.raise_error(
                    f"unknown config key '{key}' (one of {', '.join(CONFIG_KEYS)})", pos
                )
            parser.parse_punctuation("=")
            return key, parser.parse_integer(allow_boolean=False, allow_negative=False)

        return tuple(parser.parse_comma_separated_list(parser.Delimiter.ANGLE, entry))

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string("<")
        printer.print_string(", ".join(f"{k} = {v}" for k, v in self.data))
        printer.print_string(">")

    def verify(self) -> None:
        keys = [k for k, _ in self.data]
        if len(set(keys)) != len(keys):
            raise VerifyException(f"kernel.config: repeated key in {keys}")
        for key, value in self.data:
            if key not in CONFIG_KEYS:
                raise VerifyException(f"kernel.config: unknown key '{key}'")
            if value <= 0:
                raise VerifyException(f"kernel.config: {key} must be positive, got {value}")
        order = [CONFIG_KEYS.index(k) for k in keys]
        if order != sorted(order):
            raise VerifyException(f"kernel.config: keys must come in the order {CONFIG_KEYS}")


__all__ = ["CONFIG_KEYS", "ConfigAttr", "KernelKind", "KernelKindAttr"]
