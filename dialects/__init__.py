"""kiln's dialects: aten (ATen ops), later loop, kernel, triton and cpp."""
