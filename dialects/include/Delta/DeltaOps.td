//===- DeltaOps.td - delta dialect ops ---------------------*- tablegen -*-===//

#ifndef DELTA_OPS_TD
#define DELTA_OPS_TD

include "Delta/DeltaDialect.td"
include "Delta/DeltaAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

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
// delta.kernel: one lowered kernel of a layer
//===----------------------------------------------------------------------===//

def Delta_KernelOp : Delta_Op<"kernel", [Symbol, NoTerminator,
    SingleBlock, IsolatedFromAbove]> {
  let summary = "one kernel of a layer under one schedule";
  let description = [{
    Produced by `delta-lower-stages`: one per schedule of a `delta.layer`.
    The body lists the stages in execution order; `delta.fused` groups
    stages that run inside one loop over chunks (or tokens).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefAttr:$layer,
                       Delta_ScheduleAttr:$schedule);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `of` $layer $schedule attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Delta_FusedOp : Delta_Op<"fused", [NoTerminator, SingleBlock,
    HasParent<"KernelOp">]> {
  let summary = "stages fused into one loop";
  let description = [{
    The stages in the body run together inside one loop over `over`
    (`chunks` or `tokens`); `stages` lists their names, in order.
  }];
  let arguments = (ins StrAttr:$over, StrArrayAttr:$stages);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`over` $over $stages attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Stages
//===----------------------------------------------------------------------===//

class Delta_StageOp<string mnemonic, list<Trait> traits = []>
    : Delta_Op<mnemonic, traits> {
  let assemblyFormat = "attr-dict";
}

def Delta_ConvertOp : Delta_StageOp<"convert"> {
  let summary = "host-side element conversion of one tensor";
  let description = [{
    Converts tensor `tensor` (q, k, v, h0, ht, o) between `from` and `to`
    around the template call, for dtypes the templates do not take.
  }];
  let arguments = (ins StrAttr:$tensor, Delta_DTypeAttr:$from,
                       Delta_DTypeAttr:$to);
  let assemblyFormat = "$tensor $from `to` $to attr-dict";
}

def Delta_BetaSigmoidOp : Delta_StageOp<"beta_sigmoid"> {
  let summary = "beta = range * sigmoid(beta_logits)";
  let arguments = (ins Delta_BetaRangeAttr:$range);
  let assemblyFormat = "$range attr-dict";
}

def Delta_GateOp : Delta_StageOp<"gate"> {
  let summary = "g = -exp(A_log) * softplus(a + dt_bias)";
  let arguments = (ins I64Attr:$width);
  let assemblyFormat = "`width` $width attr-dict";
}

def Delta_QKNormOp : Delta_StageOp<"qk_l2norm"> {
  let summary = "L2-normalise q and k rows: x / sqrt(sum x^2 + 1e-6)";
}

def Delta_GateCumsumOp : Delta_StageOp<"gate_cumsum"> {
  let summary = "cumulative log-decay within each chunk";
  let arguments = (ins I64Attr:$chunk, I64Attr:$width);
  let assemblyFormat = "`chunk` $chunk `width` $width attr-dict";
}

def Delta_KKTInverseOp : Delta_StageOp<"kkt_inverse"> {
  let summary = "A = (I + strictly-lower(diag(beta) K K^T * decay))^-1";
  let arguments = (ins I64Attr:$chunk);
  let assemblyFormat = "`chunk` $chunk attr-dict";
}

def Delta_WYOp : Delta_StageOp<"wy"> {
  let summary = "W = A diag(beta) K (decayed), U = A diag(beta) V";
  let arguments = (ins I64Attr:$chunk);
  let assemblyFormat = "`chunk` $chunk attr-dict";
}

def Delta_StateScanOp : Delta_StageOp<"state_scan"> {
  let summary = "V' = U - W S; S <- decay_total * S + K_decayed^T V'";
  let arguments = (ins I64Attr:$chunk, BoolAttr:$save_chunk_states);
  let assemblyFormat = "`chunk` $chunk attr-dict";
}

def Delta_ChunkOutputOp : Delta_StageOp<"chunk_output"> {
  let summary = "O = Q S (decayed) + mask(Q K^T * decay) V'";
  let arguments = (ins I64Attr:$chunk);
  let assemblyFormat = "`chunk` $chunk attr-dict";
}

def Delta_RecurrentStepOp : Delta_StageOp<"recurrent_step"> {
  let summary = "one token of the recurrence, state kept on chip";
  let description = [{
    `h <- a_t (.) h; u = beta_t (v_t - h^T k_t); h <- h + k_t u^T;
     o_t = scale * h^T q_t` for one token.
  }];
  let arguments = (ins Delta_VariantAttr:$variant);
  let assemblyFormat = "$variant attr-dict";
}

#endif // DELTA_OPS_TD
