// delta-to-emitc: each layer's kernels become one emitc.file per target.
// The template instance is an emitc.call_opaque of the catalogue family's
// entry with the schedule's knobs as template arguments; the entry point
// checks the params with deltac::check_params and dispatches on the
// longest sequence with emitc.cmp / emitc.if; what EmitC does not express
// (spec match, helpers, host pre/post-processing) is emitc.verbatim text.
// RUN: delta-opt %s -delta-select-schedule="target=all warps=2" -delta-lower-stages -delta-fuse-stages -delta-to-emitc | FileCheck %s
// mlir-translate (which knows no delta dialect: the layer line is dropped)
// prints the same file deltac generate writes.
// RUN: delta-opt %s -delta-select-schedule="target=all warps=2" -delta-lower-stages -delta-fuse-stages -delta-to-emitc | grep -v "^  delta.layer" | mlir-translate --mlir-to-cpp --file-id=gdn_cpu.cpp > %t.cpp
// RUN: deltac generate %s --target=all --warps=2 --emit=cpp > %t.expected.cpp
// RUN: diff -B %t.cpp %t.expected.cpp
// RUN: delta-opt %s -delta-select-schedule="target=all warps=2" -delta-lower-stages -delta-fuse-stages -delta-to-emitc | grep -v "^  delta.layer" | mlir-translate --mlir-to-cpp --file-id=gdn_cuda.cu > %t.cu
// RUN: deltac generate %s --target=all --warps=2 --emit=cuda > %t.expected.cu
// RUN: diff -B %t.cu %t.expected.cu
// RUN: delta-opt %s -delta-select-schedule="target=cuda:sm_90a mode=recurrent" -delta-lower-stages -delta-fuse-stages -delta-to-emitc | FileCheck %s --check-prefix=SINGLE
// Stages split over several kernels have no catalogue template: an error.
// RUN: not delta-opt %s -delta-select-schedule -delta-lower-stages -delta-fuse-stages=fuse=none -delta-to-emitc 2>&1 | FileCheck %s --check-prefix=SPLIT

// The layer stays (the header and manifest are written from it); the
// kernels are gone.
// CHECK: delta.layer @gdn
// CHECK-NOT: delta.kernel
// CHECK-LABEL: emitc.file "gdn_cpu.cpp" {
// CHECK: include "gdn.h"
// CHECK-NEXT: include "deltac/check.h"
// CHECK-NEXT: include "deltac/cpu/launch.h"
// CHECK: func @run_gdn_cpu_decode(%arg0: !emitc.opaque<"deltac_fwd_params">, %arg1: !emitc.ptr<!emitc.opaque<"char">>, %arg2: !emitc.size_t) -> !emitc.opaque<"int"> {
// CHECK: %[[P:.*]] = literal "p" : !emitc.opaque<"deltac_fwd_params">
// CHECK-NEXT: call_opaque "deltac::cpu::decode"(%[[P]]) {template_args = [#emitc.opaque<"DELTAC_VARIANT_GATED">, 32 : i32, 64 : i32, 64 : i32]}
// CHECK: return
// CHECK: func @run_gdn_cpu_recurrent(
// CHECK: call_opaque "deltac::cpu::recurrent_tiled"(%{{.*}}) {template_args = [#emitc.opaque<"DELTAC_VARIANT_GATED">, 32 : i32, 64 : i32, 64 : i32]}
// CHECK: func @gdn_forward_cpu(%arg0: !emitc.ptr<!emitc.opaque<"const deltac_fwd_params">>, %arg1: !emitc.ptr<!emitc.opaque<"char">>, %arg2: !emitc.size_t) -> !emitc.opaque<"int"> attributes {specifiers = ["extern \22C\22"]} {
// CHECK: %[[RES:.*]] = "emitc.variable"() <{value = #emitc.opaque<"0">}> : () -> !emitc.lvalue<!emitc.opaque<"int">>
// CHECK: %[[MSG:.*]] = "emitc.variable"() <{value = #emitc.opaque<"std::string()">}>
// CHECK: %[[VIEW:.*]] = literal "view"
// CHECK: %[[MSGP:.*]] = address_of %[[MSG]]
// CHECK: %[[OK:.*]] = call_opaque "deltac::check_params"(%[[VIEW]], %[[MSGP]])
// CHECK: if %[[OK]] {
// CHECK: %[[LONGEST:.*]] = call_opaque "longestSequence"(%[[VIEW]])
// CHECK: %[[ONE:.*]] = "emitc.constant"() <{value = 1 : i64}> : () -> i64
// CHECK: %[[FITS:.*]] = cmp le, %[[LONGEST]], %[[ONE]]
// CHECK: if %[[FITS]] {
// CHECK: %[[R:.*]] = call @run_gdn_cpu_decode(
// CHECK-NEXT: assign %[[R]] : !emitc.opaque<"int"> to %[[RES]]
// CHECK: } else {
// CHECK: call @run_gdn_cpu_recurrent(
// CHECK: } else {
// CHECK: call_opaque "fail"(%arg1, %arg2,
// CHECK: %[[V:.*]] = load %[[RES]]
// CHECK-NEXT: return %[[V]]

// The CUDA file: mode auto is cuda_recurrent (at most 16 tokens), then
// cuda_chunked; the warps option reaches both templates.
// CHECK-LABEL: emitc.file "gdn_cuda.cu" {
// CHECK: include "deltac/cuda/launch_recurrent.cuh"
// CHECK-NEXT: include "deltac/cuda/launch_chunked.cuh"
// CHECK: func @run_gdn_cuda_recurrent(
// CHECK: call_opaque "deltac::cuda::recurrent_cfg"(%{{.*}}, %{{.*}}) {template_args = [#emitc.opaque<"DELTAC_VARIANT_GATED">, 64 : i32, 64 : i32, #emitc.opaque<"float">, 32 : i32, 2 : i32]} : (!emitc.opaque<"deltac_fwd_params">, !emitc.opaque<"cudaStream_t">) -> !emitc.opaque<"cudaError_t">
// CHECK: func @run_gdn_cuda_chunked(
// CHECK: call_opaque "deltac::cuda::chunked_cfg"(%{{.*}}, %{{.*}}) {template_args = [#emitc.opaque<"DELTAC_VARIANT_GATED">, 64 : i32, 64 : i32, #emitc.opaque<"float">, 64 : i32, 64 : i32, 2 : i32, 1 : i32, 0 : i32, 0 : i32, 0 : i32]} : (!emitc.opaque<"deltac_fwd_params">, !emitc.opaque<"cudaStream_t">) -> !emitc.opaque<"cudaError_t">
// Two CUDA kernels, the last unbounded: the dispatch bounds the longest
// sequence by T and nothing on the host reads cu_seqlens.
// CHECK: func @gdn_forward_cuda(
// CHECK: %[[CVIEW:.*]] = literal "view"
// CHECK: %[[COK:.*]] = call_opaque "deltac::check_params"(%[[CVIEW]], %{{[^,]*}}, %{{[^)]*}}) :
// CHECK: if %[[COK]] {
// CHECK: %[[CLONGEST:.*]] = literal "int64_t(view.T)"
// CHECK: %[[SIXTEEN:.*]] = "emitc.constant"() <{value = 16 : i64}> : () -> i64
// CHECK: %[[CFITS:.*]] = cmp le, %[[CLONGEST]], %[[SIXTEEN]]
// CHECK: if %[[CFITS]] {
// CHECK: call @run_gdn_cuda_recurrent(
// CHECK: } else {
// CHECK: call @run_gdn_cuda_chunked(

// One CUDA kernel (mode recurrent): check_params leaves the device
// cu_seqlens alone and nothing dispatches.
// SINGLE: func @gdn_forward_cuda(
// SINGLE: %[[NOHOST:.*]] = "emitc.constant"() <{value = false}> : () -> i1
// SINGLE: call_opaque "deltac::check_params"(%{{.*}}, %{{.*}}, %[[NOHOST]])
// SINGLE-NOT: longestSequence

// SPLIT: error: 'delta.fused' op is a second fused group: the catalogue's cpu_decode template (deltac::cpu::decode) runs every stage in one kernel (delta-fuse-stages fuse=all)
delta.layer @gdn {variant = #delta.variant<gated>, heads = 2, key_dim = 64, value_dim = 64, qk_l2norm = true, final_state = true}
