// Entry header of the CPU kernels:
//   deltac::cpu::recurrent<Var, KC, VC>(p)        token-by-token recurrence
//   deltac::cpu::chunked<Var, Chunk, KC, VC>(p)   chunked WY/UT form
// Both assume p was validated (deltac/check.h): host pointers, in_dtype F32
// or BF16 (bf16 = raw uint16), out_dtype F32 or BF16, f32 state in either
// layout, K and V multiples of 16. KC/VC = 0 read K/V from p; otherwise they
// must equal p.K/p.V. p.scale == 0 means 1/sqrt(K). Work is spread over
// sequences x value heads on p.threads OpenMP threads (0 = all); recurrent
// calls with at most one token per sequence (decode) take decode.h's path,
// which also splits a head's column tiles over threads.
#ifndef DELTAC_CPU_FORWARD_H
#define DELTAC_CPU_FORWARD_H

#include "deltac/cpu/chunked.h"
#include "deltac/cpu/recurrent.h"

#endif  // DELTAC_CPU_FORWARD_H
