"""The host layer both backends share: the wrapper that runs a ``kernel.program``.

* :mod:`~kiln.backends.host.walker`: one walk over the program (naming, allocation,
  liveness-driven release of arguments, frees, buffer reuse, extern calls, host scalar
  arithmetic, results) with hooks for what differs per device (kernel launch, argument
  checks, allocation and view calls, the function's prologue);
* :mod:`~kiln.backends.host.externs`: ``kernel.extern`` bodies as ATen calls;
* :mod:`~kiln.backends.host.scalars`: host arithmetic on sizes and scalars as Python.

The backends (:mod:`kiln.backends.cpp`, :mod:`kiln.backends.triton`) import this
package and never each other.
"""
