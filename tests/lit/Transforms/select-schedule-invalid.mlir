// RUN: not delta-opt %s -delta-select-schedule="target=cuda:sm_90a" 2>&1 | FileCheck %s --check-prefix=CUDA
// RUN: not delta-opt %s -delta-select-schedule="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not delta-opt %s -delta-select-schedule="mode=fast" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not delta-opt %s -delta-select-schedule="chunk=48" 2>&1 | FileCheck %s --check-prefix=CHUNK
// RUN: not delta-opt %s -delta-select-schedule="tile-k=20" 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not delta-opt %s -delta-select-schedule="tile-v=512" 2>&1 | FileCheck %s --check-prefix=TILEV
// RUN: not delta-opt %s -delta-select-schedule="warps=33" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not delta-opt %s -delta-select-schedule="stages=9" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not delta-opt %s -delta-select-schedule="mode=recurrent" -split-input-file 2>&1 | FileCheck %s --check-prefix=STATES

// CUDA: error: 'delta.layer' op mode = chunked on target cuda:sm_90a: no chunked CUDA kernel exists yet; use mode = recurrent or auto (auto uses the recurrent kernel on CUDA)
// TARGET: error: delta-select-schedule: unknown target 'tpu': expected cpu, cuda:sm_90a or all
// MODE: error: delta-select-schedule: unknown mode 'fast': expected auto, chunked or recurrent
// CHUNK: error: delta-select-schedule: chunk must be 0 (auto), 16, 32 or 64, got 48
// TILE: error: delta-select-schedule: tile-k must be 0 (auto) or a multiple of 16 in 16..256, got 20
// TILEV: error: delta-select-schedule: tile-v must be 0 (auto) or a multiple of 16 in 16..256, got 512
// WARPS: error: delta-select-schedule: warps must be 0 (auto) or in 1..32, got 33
// STAGES: error: delta-select-schedule: stages must be 0 (auto) or in 1..8, got 9
// STATES: error: 'delta.layer' op 'chunk_states' needs mode = chunked, but the schedule mode is recurrent
delta.layer @layer {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>, chunk_states = true}
