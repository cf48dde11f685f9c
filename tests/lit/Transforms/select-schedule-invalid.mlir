// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=cuda:sm_90a" 2>&1 | FileCheck %s --check-prefix=CUDA
// RUN: not delta-opt %s -delta-select-schedule="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not delta-opt %s -delta-select-schedule="mode=fast" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not delta-opt %s -delta-select-schedule="chunk=48" 2>&1 | FileCheck %s --check-prefix=CHUNK
// RUN: not delta-opt %s -delta-select-schedule="tile-k=32" 2>&1 | FileCheck %s --check-prefix=TILEK
// RUN: not delta-opt %s -delta-select-schedule="warps=2" 2>&1 | FileCheck %s --check-prefix=NOWARPS
// RUN: not delta-opt %s -delta-select-schedule="stages=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not delta-opt %s -delta-select-schedule="mode=recurrent" -split-input-file 2>&1 | FileCheck %s --check-prefix=STATES
// RUN: not delta-opt %s -split-input-file -delta-select-schedule="target=all mode=recurrent tile-v=48" 2>&1 | FileCheck %s --check-prefix=TILEV
// RUN: not delta-opt %s -split-input-file -delta-select-schedule="target=all mode=recurrent warps=3" 2>&1 | FileCheck %s --check-prefix=WARPS

// Mode chunked on CUDA is cuda_chunked alone; every K, V in 16..256 has a
// legal config (the V <= 2K limit went with the scan that reads raw v rows),
// so the widest layer (@wide below) selects cleanly too. A call the family
// cannot take (a state pool) falls back at run time: tests/catalogue.
// CUDA-NOT: error:
// CUDA: delta.layer @wide
// CUDA-SAME: family = "cuda_chunked"
// CUDA-NOT: error:
// TARGET: error: delta-select-schedule: unknown target 'tpu': expected cpu, cuda:sm_90a or all
// MODE: error: delta-select-schedule: unknown mode 'fast': expected auto, chunked or recurrent
// Knob values are the catalogue's (check_config), for the chosen family.
// CHUNK: error: 'delta.layer' op delta-select-schedule: on cpu: cpu_chunked: chunk = 48, expected one of 16, 32, 64
// A knob no chosen family reads is refused (tile_k: no kernel reads it).
// TILEK: error: 'delta.layer' op delta-select-schedule: option tile_k = 32 is read by no kernel chosen for this layer (cpu_chunked)
// NOWARPS: error: 'delta.layer' op delta-select-schedule: option warps = 2 is read by no kernel chosen for this layer (cpu_chunked)
// NEG: error: delta-select-schedule: stages must be 0 (default) or a value the catalogue lists, got -1
// STATES: error: 'delta.layer' op 'chunk_states' needs mode = chunked, but the schedule mode is recurrent
// TILEV: error: 'delta.layer' op delta-select-schedule: on cpu: cpu_decode: tile_v = 48, expected one of 16, 32, 64, 128
// WARPS: error: 'delta.layer' op delta-select-schedule: on cuda:sm_90a: cuda_recurrent: warps = 3, expected one of 1, 2, 4, 8
delta.layer @layer {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64, mode = #delta.mode<chunked>, chunk_states = true}

// -----

delta.layer @plain {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 64}

// -----

delta.layer @wide {variant = #delta.variant<gated>, heads = 4, key_dim = 64, value_dim = 256, mode = #delta.mode<chunked>}
