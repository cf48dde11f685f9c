// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=all tuning-db=%inputs/tuning/good.json" | FileCheck %s
// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=cpu mode=chunked tuning-db=%inputs/tuning/good.json" | FileCheck %s --check-prefix=CHK
// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=all tuning-db=%inputs/tuning/good.json tile-v=32" | FileCheck %s --check-prefix=OVR
// RUN: delta-opt %s -split-input-file -delta-select-schedule="target=cpu mode=chunked tuning-db=%inputs/tuning/good.json chunk=16" | FileCheck %s --check-prefix=OVRC

// A record (schema 2: family, variant, K, V, in_dtype, max_tokens bucket,
// the family's knobs) sets the knobs of the kernel of its family whose
// every length its bucket holds; the smallest such bucket wins.
// CHECK-LABEL: delta.layer @gdn
// CHECK-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 16 : i64}, max_tokens = 1, source = "tuning-db">, #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 16 : i64}, max_tokens = 0, source = "tuning-db">, #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 16 : i64, warps = 2 : i64}, max_tokens = 16, source = "tuning-db">, #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 32 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 1 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "tuning-db">]
// CHK-LABEL: delta.layer @gdn
// CHK-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 64 : i64}, max_tokens = 0, source = "tuning-db">]
// Explicit options win over the database.
// OVR-LABEL: delta.layer @gdn
// OVR-SAME: #delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "override">
// OVR-SAME: #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 0, source = "override">
// OVR-SAME: #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 32 : i64, warps = 2 : i64}, max_tokens = 16, source = "override">
// OVR-SAME: #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 32 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 1 : i64, tile_v = 32 : i64, warps = 8 : i64}, max_tokens = 0, source = "override">
// OVRC-LABEL: delta.layer @gdn
// OVRC-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 16 : i64}, max_tokens = 0, source = "override">]
delta.layer @gdn {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<bf16>}

// -----

// A different in_dtype does not match: the catalogue's defaults.
// CHECK-LABEL: delta.layer @gdn_f32
// CHECK-SAME: #delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 32 : i64}, max_tokens = 1, source = "default">
// CHK-LABEL: delta.layer @gdn_f32
// CHK-SAME: schedules = [#delta.schedule<target = cpu, family = "cpu_chunked", knobs = {chunk = 32 : i64}, max_tokens = 0, source = "default">]
delta.layer @gdn_f32 {variant = #delta.variant<gated>, heads = 16, v_heads = 32, key_dim = 128, value_dim = 128, in_dtype = #delta.dtype<f32>}

// -----

// Buckets: the cpu_decode record (max_tokens 8) holds the decode kernel's
// one-token calls; the cpu_recurrent record (max_tokens 64) does not hold
// every length of the unbounded recurrent kernel: defaults there.
// CHECK-LABEL: delta.layer @kda
// CHECK-SAME: #delta.schedule<target = cpu, family = "cpu_decode", knobs = {tile_v = 16 : i64}, max_tokens = 1, source = "tuning-db">
// CHECK-SAME: #delta.schedule<target = cpu, family = "cpu_recurrent", knobs = {tile_v = 32 : i64}, max_tokens = 0, source = "default">
// On CUDA the cuda_recurrent record's bucket (max_tokens 16) holds the
// recurrent kernel's calls under auto (at most 16 tokens); no cuda_chunked
// record for it: defaults.
// CHECK-SAME: #delta.schedule<target = sm_90a, family = "cuda_recurrent", knobs = {tile_v = 16 : i64, warps = 2 : i64}, max_tokens = 16, source = "tuning-db">
// CHECK-SAME: #delta.schedule<target = sm_90a, family = "cuda_chunked", knobs = {chunk = 32 : i64, fuse = 0 : i64, scan = 0 : i64, split = 0 : i64, stages = 2 : i64, tile_v = 64 : i64, warps = 8 : i64}, max_tokens = 0, source = "default">
delta.layer @kda {variant = #delta.variant<kda>, heads = 2, key_dim = 64, value_dim = 64}
