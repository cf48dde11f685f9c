// RUN: delta-opt %s -delta-select-schedule | FileCheck %s

// mode chunked: one chunked schedule on CPU, chunk deltac::kCpuDefaultChunk
// (32) unless asked otherwise (CUDA has no chunked kernel:
// see select-schedule-invalid.mlir).
// CHECK-LABEL: delta.layer @chunked_mode
// CHECK-SAME: schedules = [#delta.schedule<target = cpu, mode = chunked, chunk = 32, tile_k = 64, tile_v = 64, warps = 1, stages = 1, max_tokens = 0, source = "default">]
delta.layer @chunked_mode {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>}
