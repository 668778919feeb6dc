"""The C++ every generated translation unit starts with: includes and scalar helpers.

The helpers give C++ the semantics of the IR (and so of torch) where C's differ:

* integer division and remainder never trap: a zero divisor sets the function's error
  flags (``KILN_ERR_DIV_ZERO``) and gives 0; ``INT_MIN / -1`` wraps; floor division
  and ``%`` on possibly negative index values round towards negative infinity;
* signed add/sub/mul wrap (done in unsigned arithmetic: C's overflow is undefined);
* shifts by the bit width or more give 0 (or -1 for a negative arithmetic shift);
* NaN-propagating ``maximumf``/``minimumf`` (torch.maximum), ``fmax``/``fmin`` for
  ``maxnumf``/``minnumf`` (torch.fmax);
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

template <typename T> KILN_INLINE T kiln_maximumf(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <typename T> KILN_INLINE T kiln_minimumf(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
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


def prelude() -> str:
    """The full prelude for this machine (helpers, then the libmvec declarations)."""
    return PRELUDE + "\n" + libmvec_declarations()


__all__ = ["MATH_FUNCTIONS", "PRELUDE", "libmvec_declarations", "libmvec_functions", "libmvec_path", "prelude"]
