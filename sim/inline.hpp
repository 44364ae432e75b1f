#pragma once
/// LOCKSIM_ALWAYS_INLINE: for the few hot-path functions that must be inlined whatever the compiler's size
/// heuristics decide (each one measured: bench/README.md). GCC's heuristics flip with small edits to the
/// function; an out-of-line call there costs more than the function's own work.
#if defined(__GNUC__) || defined(__clang__)
#define LOCKSIM_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define LOCKSIM_ALWAYS_INLINE inline
#endif
