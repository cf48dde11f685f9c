// A corrupt or unreadable database is a diagnostic, never a crash.
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/does-not-exist.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/truncated.json" 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/top-array.json" 2>&1 | FileCheck %s --check-prefix=TOP
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/wrong-format.json" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/wrong-version.json" 2>&1 | FileCheck %s --check-prefix=VERSION
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/records-not-array.json" 2>&1 | FileCheck %s --check-prefix=RECORDS
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-record.json" 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-target.json" 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-chunk.json" 2>&1 | FileCheck %s --check-prefix=CHUNK
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/missing-field.json" 2>&1 | FileCheck %s --check-prefix=FIELDMISS
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-mode.json" 2>&1 | FileCheck %s --check-prefix=MODE

// MISSING: error: delta-select-schedule: tuning db '{{.*}}does-not-exist.json': cannot read: No such file or directory
// TRUNC: error: delta-select-schedule: tuning db '{{.*}}truncated.json': not valid JSON:
// TOP: tuning db '{{.*}}top-array.json': the top level must be an object
// FORMAT: tuning db '{{.*}}wrong-format.json': 'format' must be "deltac-tuning-db"
// VERSION: tuning db '{{.*}}wrong-version.json': 'version' must be 1
// RECORDS: tuning db '{{.*}}records-not-array.json': 'records' must be an array
// FIELD: record 1: field 'warps' must be an integer in 1..32 (got "four")
// TARGET: record 0: field 'target' must be one of "cpu", "cuda:sm_90a" (got "tpu")
// CHUNK: record 0: field 'chunk' must be 0, 16, 32 or 64 (got 48)
// FIELDMISS: record 0: field 'in_dtype' must be one of "f32", "bf16", "f16" (missing)
// MODE: record 0: field 'mode' must be one of "chunked", "recurrent" (got "auto")
delta.layer @layer {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
