//===- DeltaDialect.td - the delta dialect -----------------*- tablegen -*-===//
//
// The `delta` dialect describes delta-rule linear attention layers (DeltaNet,
// Gated DeltaNet, Kimi Delta Attention), their schedules and their stages.
//
//===----------------------------------------------------------------------===//

#ifndef DELTA_DIALECT_TD
#define DELTA_DIALECT_TD

include "mlir/IR/OpBase.td"

def Delta_Dialect : Dialect {
  let name = "delta";
  let summary = "Delta-rule linear attention layers and their kernel schedules";
  let description = [{
    A `delta.layer` op is the spec of one recurrence layer. Passes attach
    schedules (`delta-select-schedule`: kernel families and knobs from the
    kernel catalogue), lower the layer into kernels that are data-flow
    graphs of stage ops (`delta-lower-stages`), group stages into fused
    kernels (`delta-fuse-stages`), and `delta-to-emitc` turns kernels into
    EmitC that calls the hand-written templates, printed as C++/CUDA.
  }];
  let cppNamespace = "::mlir::delta";
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

class Delta_Op<string mnemonic, list<Trait> traits = []>
    : Op<Delta_Dialect, mnemonic, traits>;

#endif // DELTA_DIALECT_TD
