// A corrupt or unreadable database is a diagnostic, never a crash. The
// reader is the catalogue's (deltac/tuning_db.h, schema version 2, shared
// with the runtime); its messages name the file, the record and the field.
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/does-not-exist.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/truncated.json" 2>&1 | FileCheck %s --check-prefix=TRUNC
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/top-array.json" 2>&1 | FileCheck %s --check-prefix=TOP
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/wrong-format.json" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/wrong-version.json" 2>&1 | FileCheck %s --check-prefix=VERSION
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/records-not-array.json" 2>&1 | FileCheck %s --check-prefix=RECORDS
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-record.json" 2>&1 | FileCheck %s --check-prefix=FIELD
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-family.json" 2>&1 | FileCheck %s --check-prefix=FAMILY
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-chunk.json" 2>&1 | FileCheck %s --check-prefix=CHUNK
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/missing-field.json" 2>&1 | FileCheck %s --check-prefix=FIELDMISS
// RUN: not delta-opt %s -delta-select-schedule="tuning-db=%inputs/tuning/bad-knob.json" 2>&1 | FileCheck %s --check-prefix=KNOB

// MISSING: error: delta-select-schedule: tuning db '{{.*}}does-not-exist.json': cannot read the file
// TRUNC: error: delta-select-schedule: tuning db '{{.*}}truncated.json': not valid JSON
// TOP: tuning db '{{.*}}top-array.json': the top level must be an object
// FORMAT: tuning db '{{.*}}wrong-format.json': 'format' must be "deltac-tuning-db"
// VERSION: tuning db '{{.*}}wrong-version.json': 'version' must be 2 (got 1; version 1 databases are not read: tune again)
// RECORDS: tuning db '{{.*}}records-not-array.json': 'records' must be an array
// FIELD: record 1: field 'warps' must be an integer in 0..1048576 (got "four")
// FAMILY: record 0: field 'family' must be one of "cpu_recurrent", "cpu_decode", "cpu_chunked", "cuda_recurrent", "cuda_chunked" (got "tpu_fast")
// CHUNK: record 0: cpu_chunked: chunk = 48, expected one of 16, 32, 64
// FIELDMISS: record 0: field 'in_dtype' must be one of "f32", "bf16", "f16" (missing)
// KNOB: record 0: field 'warps' must be absent: cpu_recurrent has no such knob (got 4)
delta.layer @layer {variant = #delta.variant<delta>, heads = 4, key_dim = 64, value_dim = 64}
