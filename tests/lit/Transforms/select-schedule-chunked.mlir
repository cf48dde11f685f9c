// RUN: delta-opt %s -delta-select-schedule | FileCheck %s

// mode chunked: the catalogue's cpu_chunked, chunk deltac::kCpuDefaultChunk
// (32) unless asked otherwise (CUDA has no chunked family:
// see select-schedule-invalid.mlir).
// CHECK-LABEL: delta.layer @chunked_mode
// CHECK-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32 : i64}, max_tokens = 0, source = "default">]
delta.layer @chunked_mode {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>}
