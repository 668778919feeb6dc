"""The C++ every generated translation unit starts with: includes and scalar helpers.

The helpers give C++ the semantics of the IR (and so of torch) where C's differ:

* integer division and remainder never trap: a zero divisor sets the function's error
  flags (``KILN_ERR_DIV_ZERO``) and gives 0; ``INT_MIN / -1`` wraps; floor division
  and ``%`` on possibly negative index values round towards negative infinity;
* signed add/sub/mul wrap (done in unsigned arithmetic: C's overflow is undefined);
* shifts by the bit width or more give 0 (or -1 for a negative arithmetic shift);
* NaN-propagating ``maximumf``/``minimumf`` (torch.maximum), ``fmax``/``fmin`` for
  ``maxnumf``/``minnumf`` (torch.fmax); ``(a > b || a != a) ? a : b`` is two compares
  and a blend per vector where the three-way test was four compares (measured faster on
  a row max: docs/benchmarks/design-notes.md);
* float ``erf`` is an inline polynomial (``kiln_erff``, at most 1.66 ulp from the true
  value on every float) that vectorizes in place: glibc's vector ``erff`` dominated a
  GELU kernel's time (docs/benchmarks/design-notes.md);
* ``half`` is ``_Float16`` in memory and ``float`` in registers; ``bfloat16`` is its 16 bits
  in memory (round to nearest even on the way back, NaN kept), ``float`` in registers.

:func:`libmvec_declarations` redeclares the math functions glibc's libmvec has vector
versions of with ``__attribute__((simd))``, so ``#pragma omp simd`` loops call
``_ZGVeN16v_expf`` & co. instead of falling back to scalar code (glibc only does this
itself under ``-ffast-math``, which would break NaN semantics).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Sequence
from functools import cache

MATH_FUNCTIONS = (
    "acos acosh asin asinh atan atan2 atanh cbrt cos cosh erf erfc exp exp10 exp2 expm1 "
    "hypot log log10 log1p log2 pow sin sinh tan tanh"
).split()
"""Functions libmvec (glibc >= 2.35) vectorizes, in float (``f`` suffix) and double."""

_TWO_ARGUMENTS = frozenset({"atan2", "hypot", "pow"})

# The vector ABI variants GCC may call: SSE (b), AVX (c), AVX2 (d), AVX-512 (e).
_VARIANTS = {"f": ("bN4", "cN8", "dN8", "eN16"), "": ("bN2", "cN4", "dN4", "eN8")}


@cache
def libmvec_path() -> str | None:
    return ctypes.util.find_library("mvec")


@cache
def libmvec_functions() -> tuple[tuple[str, str, int], ...]:
    """``(name, C type, arity)`` of the math functions (``expf``, ``exp``, ...) with every
    vector variant in this machine's libmvec; empty without libmvec."""
    path = libmvec_path()
    if path is None:
        return ()
    try:
        library = ctypes.CDLL(path)
    except OSError:
        return ()
    found: list[tuple[str, str, int]] = []
    for suffix, variants in _VARIANTS.items():
        ctype = "float" if suffix else "double"
        for name in MATH_FUNCTIONS:
            arity = 2 if name in _TWO_ARGUMENTS else 1
            if all(hasattr(library, f"_ZGV{v}{'v' * arity}_{name}{suffix}") for v in variants):
                found.append((name + suffix, ctype, arity))
    return tuple(found)


def libmvec_declarations() -> str:
    lines = [
        f'{ctype} {name}({", ".join([ctype] * arity)}) __attribute__((__simd__("notinbranch")));'
        for name, ctype, arity in libmvec_functions()
    ]
    if not lines:
        return ""
    return 'extern "C" {\n' + "\n".join(lines) + "\n}\n"


PRELUDE = r"""#include <cmath>
#include <cstdint>
#include <cstring>

#define KILN_INLINE static inline __attribute__((always_inline))

enum { KILN_ERR_INDEX = 1, KILN_ERR_DIV_ZERO = 2 };

typedef _Float16 kiln_half;
typedef uint16_t kiln_bf16;

KILN_INLINE float kiln_round_half(float x) { return (float)(kiln_half)x; }
KILN_INLINE float kiln_bf16_to_float(kiln_bf16 b) {
  uint32_t u = (uint32_t)b << 16; float f; std::memcpy(&f, &u, 4); return f;
}
KILN_INLINE kiln_bf16 kiln_float_to_bf16(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (kiln_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (kiln_bf16)(u >> 16);
}
KILN_INLINE float kiln_round_bf16(float x) { return kiln_bf16_to_float(kiln_float_to_bf16(x)); }

// Float to integer as x86's truncating conversions (cvttsd2si: what eager runs), where
// C++ leaves NaN and out-of-range values undefined: those give INT64_MIN / INT32_MIN,
// and a narrower integer is the low bits of the int32 (eager: float64 3e9 -> int16 0).
KILN_INLINE int64_t kiln_fptosi64(double x) {
  return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}
KILN_INLINE int32_t kiln_fptosi32(double x) {
  return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}

// a if a is NaN, else b if b is NaN, else the larger (b on ties): compares and blends
// per vector (a reduction's accumulator chain is one of them). Spelled as three nested
// choices: GCC (-fno-trapping-math) left a chain of `(a > b || a != a) ? a : b`, the
// same function, scalar in a 3x3 max pool over NHWC (18.5 against 1.7 ms a call).
template <typename T> KILN_INLINE T kiln_maximumf(T a, T b) { return (a != a) ? a : ((b != b) ? b : ((a > b) ? a : b)); }
template <typename T> KILN_INLINE T kiln_minimumf(T a, T b) { return (a != a) ? a : ((b != b) ? b : ((a < b) ? a : b)); }

// erf for float, inline so that loops vectorize it without a call (libmvec's erff cost
// half the time of a GELU kernel). |x| < 0.875: x * P(x^2); up to erfc(x) < 2^-25 (where
// erf rounds to 1): 1 - Q(u), Q a degree-14 fit of erfc in u = x * 0.64f - 1.56f
// (fitted to the float u, so u's rounding is the fit's). Checked against erf in double
// on every float: at most 1.66 ulp (glibc's erff 0.97, ATen's vectorized erf about
// 1.5e-7 absolute); NaN, infinities and -0 are kept.
KILN_INLINE float kiln_erff(float x) {
  float a = __builtin_fabsf(x);
  float t = a * a;
  float s = 8.694667485542595e-05f;
  s = __builtin_fmaf(s, t, -0.0008215559646487236f);
  s = __builtin_fmaf(s, t, 0.005207134410738945f);
  s = __builtin_fmaf(s, t, -0.02686174027621746f);
  s = __builtin_fmaf(s, t, 0.11283735930919647f);
  s = __builtin_fmaf(s, t, -0.37612634897232056f);
  float small = __builtin_fmaf(a, 1.128379225730896f, __builtin_fmaf(a, -5.863538343753305e-08f, (a * t) * s));
  float u = __builtin_fmaf(a, 0.6399999856948853f, -1.559999942779541f);
  float q = -0.0006021616281941533f;
  q = __builtin_fmaf(q, u, 0.00020407761621754616f);
  q = __builtin_fmaf(q, u, 0.0037633893080055714f);
  q = __builtin_fmaf(q, u, -0.004320776555687189f);
  q = __builtin_fmaf(q, u, -0.0060988059267401695f);
  q = __builtin_fmaf(q, u, 0.017899535596370697f);
  q = __builtin_fmaf(q, u, -0.01480699423700571f);
  q = __builtin_fmaf(q, u, -0.009044619277119637f);
  q = __builtin_fmaf(q, u, 0.04370319843292236f);
  q = __builtin_fmaf(q, u, -0.06701677292585373f);
  q = __builtin_fmaf(q, u, 0.06378819048404694f);
  q = __builtin_fmaf(q, u, -0.04105019196867943f);
  q = __builtin_fmaf(q, u, 0.017649132758378983f);
  q = __builtin_fmaf(q, u, -0.004633744712918997f);
  q = __builtin_fmaf(q, u, 0.0005665422067977488f);
  float large = 1.0f - q;
  large = large > 1.0f ? 1.0f : large;
  large = a >= 3.919206f ? 1.0f : large;
  return __builtin_copysignf(a < 0.875f ? small : large, x);
}

template <typename T> struct kiln_unsigned;
template <> struct kiln_unsigned<int8_t> { typedef uint8_t type; };
template <> struct kiln_unsigned<int16_t> { typedef uint16_t type; };
template <> struct kiln_unsigned<int32_t> { typedef uint32_t type; };
template <> struct kiln_unsigned<int64_t> { typedef uint64_t type; };
template <> struct kiln_unsigned<uint8_t> { typedef uint8_t type; };
template <> struct kiln_unsigned<uint16_t> { typedef uint16_t type; };
template <> struct kiln_unsigned<uint32_t> { typedef uint32_t type; };
template <> struct kiln_unsigned<uint64_t> { typedef uint64_t type; };
#define KILN_U(T) typename kiln_unsigned<T>::type

template <typename T> KILN_INLINE T kiln_addi(T a, T b) { return (T)((KILN_U(T))a + (KILN_U(T))b); }
template <typename T> KILN_INLINE T kiln_subi(T a, T b) { return (T)((KILN_U(T))a - (KILN_U(T))b); }
template <typename T> KILN_INLINE T kiln_muli(T a, T b) { return (T)((KILN_U(T))a * (KILN_U(T))b); }
template <typename T> KILN_INLINE T kiln_negi(T a) { return (T)(-(KILN_U(T))a); }

// Division: b == 0 gives 0 (the caller sets the error flag); -1 is handled apart
// because INT_MIN / -1 traps on x86.
template <typename T> KILN_INLINE T kiln_divsi(T a, T b) {
  return b == 0 ? (T)0 : (b == -1 ? kiln_negi(a) : (T)(a / b));
}
template <typename T> KILN_INLINE T kiln_remsi(T a, T b) {
  return (b == 0 || b == -1) ? (T)0 : (T)(a % b);
}
template <typename T> KILN_INLINE T kiln_floordivsi(T a, T b) {
  T q = kiln_divsi(a, b);
  return (b != 0 && (a % (b == -1 ? (T)1 : b)) != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <typename T> KILN_INLINE T kiln_ceildivsi(T a, T b) {
  T q = kiln_divsi(a, b);
  return (b != 0 && (a % (b == -1 ? (T)1 : b)) != 0 && ((a < 0) == (b < 0))) ? (T)(q + 1) : q;
}
template <typename T> KILN_INLINE T kiln_divui(T a, T b) {
  typedef KILN_U(T) U; return b == 0 ? (T)0 : (T)((U)a / (U)b);
}
template <typename T> KILN_INLINE T kiln_remui(T a, T b) {
  typedef KILN_U(T) U; return b == 0 ? (T)0 : (T)((U)a % (U)b);
}
template <typename T> KILN_INLINE T kiln_ceildivui(T a, T b) {
  typedef KILN_U(T) U; return b == 0 ? (T)0 : (T)((U)a / (U)b + ((U)a % (U)b != 0));
}
template <typename T> KILN_INLINE T kiln_shli(T a, T b) {
  typedef KILN_U(T) U;
  return ((U)b >= sizeof(T) * 8) ? (T)0 : (T)((U)a << (U)b);
}
template <typename T> KILN_INLINE T kiln_shrsi(T a, T b) {
  typedef KILN_U(T) U;
  return ((U)b >= sizeof(T) * 8) ? (T)(a < 0 ? -1 : 0) : (T)(a >> (U)b);
}
template <typename T> KILN_INLINE T kiln_shrui(T a, T b) {
  typedef KILN_U(T) U;
  return ((U)b >= sizeof(T) * 8) ? (T)0 : (T)((U)a >> (U)b);
}
template <typename T> KILN_INLINE T kiln_ipowi(T base, T exp) {
  if (exp < 0) return base == 1 ? (T)1 : (base == -1 ? ((exp & 1) ? (T)-1 : (T)1) : (T)0);
  T result = 1;
  while (exp) { if (exp & 1) result = kiln_muli(result, base); base = kiln_muli(base, base); exp >>= 1; }
  return result;
}

template <typename To, typename From> KILN_INLINE To kiln_bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
  To y; std::memcpy(&y, &x, sizeof(To)); return y;
}

// Index arithmetic that floors (Python's // and %) for possibly negative values.
KILN_INLINE int64_t kiln_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
KILN_INLINE int64_t kiln_mod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""


def transpose16() -> str:
    """``kiln_transpose16(src, stride, dst)``: ``dst[a * 16 + b] = src[a + b * stride]``
    for 4-byte elements (``cpp.transpose_tile``). The 16 rows are loaded whole and
    transposed in registers: stage ``b`` (8, 4, 2, 1) swaps bit ``b`` of the row and
    column indices with one two-source shuffle per row (64 in all, no gather)."""
    # Straight-line code on named vectors, so that all 16 rows stay in registers.
    lines = [
        "typedef uint32_t kiln_u32x16 __attribute__((vector_size(64)));",
        "typedef uint32_t kiln_u32x16_unaligned __attribute__((vector_size(64), aligned(4), may_alias));",
        "template <typename T> KILN_INLINE void kiln_transpose16(const T* src, int64_t stride, T* dst) {",
        '  static_assert(sizeof(T) == 4, "kiln_transpose16 moves 4-byte elements");',
    ]
    lines += [
        f"  kiln_u32x16 r{i} = *(const kiln_u32x16_unaligned*)(src + {i} * stride);"
        for i in range(16)
    ]
    lines.append("  kiln_u32x16 x, y;")
    for b in (8, 4, 2, 1):
        low = ", ".join(str(j if j & b == 0 else 16 + j - b) for j in range(16))
        high = ", ".join(str(j + b if j & b == 0 else 16 + j) for j in range(16))
        for i in range(16):
            if i & b:
                continue
            lines.append(
                f"  x = r{i}; y = r{i + b}; r{i} = __builtin_shufflevector(x, y, {low}); "
                f"r{i + b} = __builtin_shufflevector(x, y, {high});"
            )
    lines += [f"  *(kiln_u32x16_unaligned*)(dst + {i} * 16) = r{i};" for i in range(16)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def prelude() -> str:
    """The full prelude for this machine (helpers, then the libmvec declarations)."""
    return PRELUDE + "\n" + transpose16() + "\n" + libmvec_declarations()


HEADER = """\
// Generated by kiln's C++ backend: OpenMP kernels, one extern "C" function each,
// returning 0 or the error flags they raised (KILN_ERR_*).
"""


def unit_source(texts: Sequence[str], entries: Sequence[tuple[str, str]] = ()) -> str:
    """A translation unit holding these functions' C++ (:func:`~kiln.backends.cpp.emit.emit_function`)
    and the Python entries of the ``(name, argument kinds)`` in ``entries``
    (:mod:`kiln.backends.cpp.python_entry`; its support code is in every unit)."""
    from kiln.backends.cpp.python_entry import entries_source

    return "\n".join([HEADER, prelude(), *texts, entries_source(entries)])


__all__ = [
    "HEADER",
    "MATH_FUNCTIONS",
    "PRELUDE",
    "libmvec_declarations",
    "libmvec_functions",
    "libmvec_path",
    "prelude",
    "transpose16",
    "unit_source",
]
