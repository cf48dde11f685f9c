// RUN: delta-opt %s -delta-select-schedule="mode=chunked chunk=64" | FileCheck %s --check-prefix=CHUNK
// RUN: delta-opt %s -delta-select-schedule="tile-v=16" | FileCheck %s --check-prefix=AUTO
// RUN: delta-opt %s -delta-select-schedule="mode=recurrent" | FileCheck %s --check-prefix=REC
// RUN: delta-opt %s -delta-select-schedule="target=cuda:sm_90a warps=2 tile-v=16" | FileCheck %s --check-prefix=WARPS
// RUN: delta-opt %s -delta-select-schedule="target=all warps=8" | FileCheck %s --check-prefix=ALL
// RUN: delta-opt %s -delta-select-schedule="target=sm_90a" | FileCheck %s --check-prefix=SHORT
// RUN: delta-opt %s -delta-select-schedule="target=sm_90a split=4 fuse=1" | FileCheck %s --check-prefix=SPLIT

// Explicit options win and mark the schedule as "override".
// CHUNK: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64 : i64}, max_tokens = 0, source = "override">]

// They apply to every chosen family that reads the knob: auto on CPU is
// cpu_decode (1-token calls) and cpu_recurrent.
// AUTO: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 16 : i64}, max_tokens = 1, source = "override">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16 : i64}, max_tokens = 0, source = "override">]

// A mode override replaces the layer's mode.
// REC: delta.layer @layer
// REC-SAME: mode = #delta.mode<recurrent>
// REC-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 0, source = "default">]

// On CUDA auto is cuda_recurrent (at most 16 tokens) and cuda_chunked: both
// read tile_v and warps.
// WARPS: schedules = [#delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 16 : i64, warps = 2 : i64}, max_tokens = 16, source = "override">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 2 : i64, tile_v = 16 : i64, warps = 2 : i64}, max_tokens = 0, source = "override">]

// With target=all, a CUDA knob leaves the CPU families alone.
// ALL: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 0, source = "default">, #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 8 : i64}, max_tokens = 16, source = "override">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 2 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "override">]

// cuda_chunked's run-time knobs: split (0 = the kernel's rule) and fuse.
// SPLIT: #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 16, source = "default">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 64 : i64, fuse = 1 : i64, scan = 0 : i64, split = 4 : i64, stages = 2 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "override">

// SHORT: #delta.schedule<target = sm_90a, family = "cuda_recurrent"
delta.layer @layer {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>}
