"""lower-to-triton's parts: planning a kernel, building triton ops for its index
expressions, bodies and reductions (see :mod:`kiln.passes.lower_to_triton`)."""
