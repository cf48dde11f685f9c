//===- DeltaAttrs.td - delta enums and attributes ----------*- tablegen -*-===//

#ifndef DELTA_ATTRS_TD
#define DELTA_ATTRS_TD

include "Delta/DeltaDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Delta_VariantEnum : I32EnumAttr<"Variant", "recurrence variant", [
    I32EnumAttrCase<"delta", 0>,   // a_t = 1
    I32EnumAttrCase<"gated", 1>,   // a_t = exp(g_t), one decay per value head
    I32EnumAttrCase<"kda", 2>      // a_t = diag(exp(g_t)), one per key channel
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_DTypeEnum : I32EnumAttr<"DType", "element type", [
    I32EnumAttrCase<"f32", 0>, I32EnumAttrCase<"bf16", 1>,
    I32EnumAttrCase<"f16", 2>
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_LayoutEnum : I32EnumAttr<"StateLayout", "state layout per head", [
    I32EnumAttrCase<"kv", 0>, I32EnumAttrCase<"vk", 1>
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_BetaRangeEnum : I32EnumAttr<"BetaRange", "range of beta", [
    I32EnumAttrCase<"zero_one", 0>,  // beta in (0, 1)
    I32EnumAttrCase<"zero_two", 1>   // beta in (0, 2)
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_ModeEnum : I32EnumAttr<"Mode", "execution mode", [
    I32EnumAttrCase<"automatic", 0, "auto">, I32EnumAttrCase<"chunked", 1>,
    I32EnumAttrCase<"recurrent", 2>
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

def Delta_TargetEnum : I32EnumAttr<"Target", "code generation target", [
    I32EnumAttrCase<"cpu", 0>, I32EnumAttrCase<"sm_90a", 1>
  ]> {
  let cppNamespace = "::mlir::delta";
  let genSpecializedAttr = 0;
}

class Delta_EnumAttr<EnumAttrInfo info, string mnemonic>
    : EnumAttr<Delta_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def Delta_VariantAttr : Delta_EnumAttr<Delta_VariantEnum, "variant">;
def Delta_DTypeAttr : Delta_EnumAttr<Delta_DTypeEnum, "dtype">;
def Delta_LayoutAttr : Delta_EnumAttr<Delta_LayoutEnum, "layout">;
def Delta_BetaRangeAttr : Delta_EnumAttr<Delta_BetaRangeEnum, "beta_range">;
def Delta_ModeAttr : Delta_EnumAttr<Delta_ModeEnum, "mode">;
def Delta_TargetAttr : Delta_EnumAttr<Delta_TargetEnum, "target">;

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

def Delta_ScheduleAttr : AttrDef<Delta_Dialect, "Schedule"> {
  let mnemonic = "schedule";
  let summary = "one kernel of a layer: a catalogue family and its knobs";
  let description = [{
    `family` names a kernel family of the kernel catalogue
    (catalogue/include/deltac/catalogue.h: "cpu_recurrent", "cpu_decode",
    "cpu_chunked", "cuda_recurrent", ...), which fixes the device, the mode
    and the template. `knobs` holds exactly the knobs that family reads
    (e.g. `{tile_v = 32}`, `{chunk = 32}`, `{tile_v = 16, warps = 4}`), each
    with a value the catalogue lists; the layer verifier adds the
    catalogue's check_config for the layer's shapes. A new family or knob
    needs a catalogue entry, no change here. `max_tokens` is the longest
    sequence this kernel is dispatched for (0 = unbounded). `source` says
    where the values came from (default, tuning-db, override, spec).
  }];
  let parameters = (ins
    "::mlir::delta::Target":$target,
    StringRefParameter<"catalogue family name">:$family,
    "::mlir::DictionaryAttr":$knobs,
    "int64_t":$max_tokens,
    StringRefParameter<"where the values came from">:$source
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The knob's value (0 when the family does not read it).
    int64_t getKnob(::llvm::StringRef name) const;
  }];
}

def Delta_ScheduleArrayAttr
    : TypedArrayAttrBase<Delta_ScheduleAttr, "array of delta schedules">;

#endif // DELTA_ATTRS_TD
