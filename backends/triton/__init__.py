"""The Triton backend: ``triton.kernel`` printed as ``@triton.jit`` Python
(:mod:`~kiln.backends.triton.emit`), a wrapper that runs a ``kernel.program``
(:mod:`~kiln.backends.triton.wrapper`), and the runtime that compiles, caches, launches
and autotunes (:mod:`~kiln.backends.triton.runtime`, :mod:`~kiln.backends.triton.autotune`).
"""
