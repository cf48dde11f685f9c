//===- Passes.td - delta dialect passes --------------------*- tablegen -*-===//

#ifndef DELTA_PASSES_TD
#define DELTA_PASSES_TD

include "mlir/Pass/PassBase.td"

def DeltaSelectSchedule : Pass<"delta-select-schedule", "ModuleOp"> {
  let summary = "Attach #delta.schedule attributes to every delta.layer";
  let description = [{
    Picks, per layer and target, the mode, chunk size, tiles, warps and
    stages. Explicit options win over schedules already on the layer
    (written in the spec), which win over the tuning database, which wins
    over the defaults. `mode = auto` on the CPU follows
    deltac::kCpuRecurrentMaxTokens (deltac/schedule.h, the runtime's rule
    too; decode_tokens is information only): 0 (the current value, the
    recurrence measured faster at every length) gives one unbounded
    recurrent schedule; a bound n gives a chunked schedule plus a recurrent
    one for sequences of at most n tokens, and the generated entry
    dispatches on the longest sequence. A chunked kernel then needs mode =
    chunked (layer or option) or a chunked schedule written in the spec.
    On CUDA only the recurrent kernel exists.
  }];
  let dependentDialects = ["::mlir::delta::DeltaDialect"];
  let options = [
    Option<"target", "target", "std::string", [{"cpu"}],
           "cpu, cuda:sm_90a or all">,
    Option<"chunk", "chunk", "int64_t", "0",
           "chunk length of chunked kernels (16, 32 or 64; 0 = auto)">,
    Option<"mode", "mode", "std::string", [{""}],
           "override the layer's mode: auto, chunked or recurrent">,
    Option<"tileK", "tile-k", "int64_t", "0", "key tile (0 = auto)">,
    Option<"tileV", "tile-v", "int64_t", "0", "value tile (0 = auto)">,
    Option<"warps", "warps", "int64_t", "0", "CUDA warps per block (0 = auto)">,
    Option<"stages", "stages", "int64_t", "0", "pipeline stages (0 = auto)">,
    Option<"tuningDb", "tuning-db", "std::string", [{""}],
           "path of a tuning database (JSON)">
  ];
}

def DeltaLowerStages : Pass<"delta-lower-stages", "ModuleOp"> {
  let summary = "Lower scheduled delta.layer ops into delta.kernel stage ops";
  let description = [{
    For every schedule of every layer, creates a `delta.kernel` whose body
    lists the stages: host pre-processing (conversions, beta sigmoid,
    gate), then the fused chunk loop (gate cumsum, K K^T + inverse, WY,
    state scan, output) or the fused recurrent step.
  }];
  let dependentDialects = ["::mlir::delta::DeltaDialect"];
}

#endif // DELTA_PASSES_TD
