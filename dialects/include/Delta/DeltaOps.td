//===- DeltaOps.td - delta dialect ops ---------------------*- tablegen -*-===//

#ifndef DELTA_OPS_TD
#define DELTA_OPS_TD

include "Delta/DeltaDialect.td"
include "Delta/DeltaAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// delta.layer: the spec
//===----------------------------------------------------------------------===//

def Delta_LayerOp : Delta_Op<"layer", [Symbol]> {
  let summary = "one delta-rule recurrence layer (the spec)";
  let description = [{
    Describes one layer: per sequence and value head j, with state h [K, V]:
    `h <- a_t (.) h; u = beta_t (v_t - h^T k_t); h <- h + k_t u^T;
     o_t = scale * h^T q_t`. See docs/dialect.md for every attribute and the
    verifier rules.

    ```mlir
    delta.layer @gdn {variant = #delta.variant<gated>, heads = 16,
                      v_heads = 32, key_dim = 128, value_dim = 128,
                      in_dtype = #delta.dtype<bf16>}
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    Delta_VariantAttr:$variant,
    I64Attr:$heads,
    OptionalAttr<I64Attr>:$v_heads,
    I64Attr:$key_dim,
    I64Attr:$value_dim,
    DefaultValuedAttr<Delta_DTypeAttr, "::mlir::delta::DType::f32">:$in_dtype,
    OptionalAttr<Delta_DTypeAttr>:$out_dtype,
    DefaultValuedAttr<Delta_DTypeAttr, "::mlir::delta::DType::f32">:$state_dtype,
    DefaultValuedAttr<Delta_LayoutAttr, "::mlir::delta::StateLayout::kv">:$state_layout,
    OptionalAttr<F64Attr>:$scale,
    DefaultValuedAttr<Delta_BetaRangeAttr, "::mlir::delta::BetaRange::zero_one">:$beta_range,
    DefaultValuedAttr<BoolAttr, "false">:$qk_l2norm,
    DefaultValuedAttr<BoolAttr, "false">:$beta_sigmoid,
    DefaultValuedAttr<BoolAttr, "false">:$gate_in_kernel,
    DefaultValuedAttr<BoolAttr, "false">:$initial_state,
    DefaultValuedAttr<BoolAttr, "false">:$final_state,
    DefaultValuedAttr<BoolAttr, "false">:$chunk_states,
    DefaultValuedAttr<BoolAttr, "false">:$varlen,
    DefaultValuedAttr<I64Attr, "1">:$decode_tokens,
    DefaultValuedAttr<Delta_ModeAttr, "::mlir::delta::Mode::automatic">:$mode,
    OptionalAttr<Delta_ScheduleArrayAttr>:$schedules
  );
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Value heads (HV); equals `heads` when `v_heads` is absent.
    int64_t getNumValueHeads() {
      return getVHeads() ? *getVHeads() : getHeads();
    }
    /// Output element type; equals `in_dtype` when `out_dtype` is absent.
    ::mlir::delta::DType getOutputDType() {
      return getOutDtype() ? *getOutDtype() : getInDtype();
    }
    /// The scale applied to q; 1/sqrt(K) when `scale` is absent.
    double getScaleOrDefault();
  }];
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

def Delta_TensorType : TypeDef<Delta_Dialect, "Tensor"> {
  let mnemonic = "tensor";
  let summary = "one tensor of a kernel: a layer input or an intermediate";
  let description = [{
    The layer's tensors (q, k, v, beta, g, h0, ...) and the intermediates
    the stages pass on (gate cumsum, A, w/u, chunk states, v_new, o, ht).
    Shapes and element types follow from the layer spec; the value names
    say which tensor is which.
  }];
}

//===----------------------------------------------------------------------===//
// delta.kernel: one lowered kernel of a layer
//===----------------------------------------------------------------------===//

def Delta_KernelOp : Delta_Op<"kernel", [Symbol, SingleBlock,
    IsolatedFromAbove, DeclareOpInterfaceMethods<OpAsmOpInterface,
    ["getAsmBlockArgumentNames"]>]> {
  let summary = "one kernel of a layer under one schedule";
  let description = [{
    Produced by `delta-lower-stages`: one per schedule of a `delta.layer`.
    The block arguments are the layer's tensors named by `inputs` (q, k, v,
    beta, then g, A_log, dt_bias, h0 as the spec has them); the stage ops
    compute from them, and `delta.yield` returns the tensors named by
    `outputs` (o, then ht and chunk_states as the spec has them).
    `delta-fuse-stages` groups stages into `delta.fused` regions.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefAttr:$layer,
                       Delta_ScheduleAttr:$schedule,
                       StrArrayAttr:$inputs,
                       StrArrayAttr:$outputs);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `of` $layer $schedule `inputs` $inputs `outputs` $outputs
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Inlines every delta.fused group of the body (the unfused graph).
    void unfuse();
  }];
}

def Delta_YieldOp : Delta_Op<"yield", [Pure, Terminator,
    ParentOneOf<["KernelOp", "FusedOp"]>]> {
  let summary = "the tensors a kernel or a fused group returns";
  let arguments = (ins Variadic<Delta_TensorType>:$values);
  let assemblyFormat = "($values^)? attr-dict";
}

def Delta_FusedOp : Delta_Op<"fused", [SingleBlock,
    HasParent<"KernelOp">, DeclareOpInterfaceMethods<OpAsmOpInterface,
    ["getAsmResultNames"]>]> {
  let summary = "stages that run as one kernel";
  let description = [{
    The stages in the body run together in one kernel, inside one loop over
    `over` (`chunks` or `tokens`); `stages` lists their names, in order.
    The body reads values from the enclosing kernel and yields the values
    used after the group; each result is printed with the name of the value
    it yields. Built by `delta-fuse-stages`.
  }];
  let arguments = (ins StrAttr:$over, StrArrayAttr:$stages);
  let results = (outs Variadic<Delta_TensorType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `over` $over $stages attr-dict-with-keyword (`->` type($results)^)? $body
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Stages
//===----------------------------------------------------------------------===//

class Delta_StageOp<string mnemonic, list<Trait> traits = []>
    : Delta_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>])>;

def Delta_ConvertOp : Delta_StageOp<"convert"> {
  let summary = "element conversion of one tensor";
  let description = [{
    Converts tensor `tensor` (q, k, v, h0, ht, o) between `from` and `to`
    around the template call, for dtypes the templates do not take.
  }];
  let arguments = (ins StrAttr:$tensor, Delta_TensorType:$input,
                       Delta_DTypeAttr:$from, Delta_DTypeAttr:$to);
  let results = (outs Delta_TensorType:$output);
  let assemblyFormat = "$tensor $input $from `to` $to attr-dict";
}

def Delta_BetaSigmoidOp : Delta_StageOp<"beta_sigmoid"> {
  let summary = "beta = range * sigmoid(beta_logits)";
  let arguments = (ins Delta_BetaRangeAttr:$range, Delta_TensorType:$logits);
  let results = (outs Delta_TensorType:$beta);
  let assemblyFormat = "$range $logits attr-dict";
}

def Delta_GateOp : Delta_StageOp<"gate"> {
  let summary = "g = -exp(A_log) * softplus(a + dt_bias)";
  let arguments = (ins Delta_TensorType:$a, Delta_TensorType:$A_log,
                       Delta_TensorType:$dt_bias, I64Attr:$width);
  let results = (outs Delta_TensorType:$g);
  let assemblyFormat = "$a `,` $A_log `,` $dt_bias `width` $width attr-dict";
}

def Delta_QKNormOp : Delta_StageOp<"qk_l2norm"> {
  let summary = "L2-normalise q and k rows: x / sqrt(sum x^2 + 1e-6)";
  let arguments = (ins Delta_TensorType:$q, Delta_TensorType:$k);
  let results = (outs Delta_TensorType:$q_n, Delta_TensorType:$k_n);
  let assemblyFormat = "$q `,` $k attr-dict";
}

def Delta_GateCumsumOp : Delta_StageOp<"gate_cumsum"> {
  let summary = "cumulative log-decay within each chunk";
  let arguments = (ins Delta_TensorType:$g, I64Attr:$chunk, I64Attr:$width);
  let results = (outs Delta_TensorType:$g_cum);
  let assemblyFormat = "$g `chunk` $chunk `width` $width attr-dict";
}

def Delta_KKTInverseOp : Delta_StageOp<"kkt_inverse"> {
  let summary = "A = (I + strictly-lower(diag(beta) K K^T * decay))^-1";
  let arguments = (ins Delta_TensorType:$k, Delta_TensorType:$beta,
                       Optional<Delta_TensorType>:$decay, I64Attr:$chunk);
  let results = (outs Delta_TensorType:$A);
  let assemblyFormat =
      "$k `,` $beta (`decay` $decay^)? `chunk` $chunk attr-dict";
}

def Delta_WYOp : Delta_StageOp<"wy"> {
  let summary = "W = A diag(beta) K (decayed), U = A diag(beta) V";
  let arguments = (ins Delta_TensorType:$A, Delta_TensorType:$k,
                       Delta_TensorType:$v, Delta_TensorType:$beta,
                       Optional<Delta_TensorType>:$decay, I64Attr:$chunk);
  let results = (outs Delta_TensorType:$w, Delta_TensorType:$u);
  let assemblyFormat =
      "$A `,` $k `,` $v `,` $beta (`decay` $decay^)? `chunk` $chunk attr-dict";
}

def Delta_StateScanOp : Delta_StageOp<"state_scan",
    [AttrSizedOperandSegments]> {
  let summary = "V' = U - W S; S <- decay_total * S + K_decayed^T V'";
  let description = [{
    Sequential over chunks: `h` holds the state at the start of every chunk
    (the chunk-end states when `save_chunk_states`), `v_new` is V', `ht` the
    final state.
  }];
  let arguments = (ins Delta_TensorType:$k, Delta_TensorType:$w,
                       Delta_TensorType:$u, Optional<Delta_TensorType>:$decay,
                       Optional<Delta_TensorType>:$h0, I64Attr:$chunk,
                       BoolAttr:$save_chunk_states);
  let results = (outs Delta_TensorType:$h, Delta_TensorType:$v_new,
                      Delta_TensorType:$ht);
  let assemblyFormat = [{
    $k `,` $w `,` $u (`decay` $decay^)? (`init` $h0^)? `chunk` $chunk attr-dict
  }];
}

def Delta_ChunkOutputOp : Delta_StageOp<"chunk_output"> {
  let summary = "O = Q S (decayed) + mask(Q K^T * decay) V'";
  let arguments = (ins Delta_TensorType:$q, Delta_TensorType:$k,
                       Delta_TensorType:$v_new, Delta_TensorType:$h,
                       Optional<Delta_TensorType>:$decay, I64Attr:$chunk);
  let results = (outs Delta_TensorType:$o);
  let assemblyFormat = [{
    $q `,` $k `,` $v_new `,` $h (`decay` $decay^)? `chunk` $chunk attr-dict
  }];
}

def Delta_RecurrentStepOp : Delta_StageOp<"recurrent_step",
    [AttrSizedOperandSegments]> {
  let summary = "the recurrence token by token, state kept on chip";
  let description = [{
    `h <- a_t (.) h; u = beta_t (v_t - h^T k_t); h <- h + k_t u^T;
     o_t = scale * h^T q_t` for every token; `ht` is the final state.
  }];
  let arguments = (ins Delta_VariantAttr:$variant, Delta_TensorType:$q,
                       Delta_TensorType:$k, Delta_TensorType:$v,
                       Delta_TensorType:$beta,
                       Optional<Delta_TensorType>:$decay,
                       Optional<Delta_TensorType>:$h0);
  let results = (outs Delta_TensorType:$o, Delta_TensorType:$ht);
  let assemblyFormat = [{
    $variant $q `,` $k `,` $v `,` $beta (`decay` $decay^)? (`init` $h0^)?
    attr-dict
  }];
}

#endif // DELTA_OPS_TD
