//===- Passes.td - delta dialect passes --------------------*- tablegen -*-===//

#ifndef DELTA_PASSES_TD
#define DELTA_PASSES_TD

include "mlir/Pass/PassBase.td"

def DeltaSelectSchedule : Pass<"delta-select-schedule", "ModuleOp"> {
  let summary = "Attach #delta.schedule attributes to every delta.layer";
  let description = [{
    Picks, per layer and target, the kernel families and their knobs, all
    from the kernel catalogue (deltac/catalogue.h): families_for(device,
    mode) gives the kernel set (mode auto on the CPU: cpu_decode for calls
    of at most one token, then cpu_recurrent; on CUDA: cuda_recurrent for
    calls of at most 16 tokens, then cuda_chunked, or cuda_recurrent alone
    for shapes cuda_chunked cannot run), default_config the knob values. Explicit options win over schedules
    already on the layer (written in the spec), which win over the tuning
    database (schema 2, deltac/tuning_db.h), which wins over the defaults.
    A knob option applies to the chosen families that read it; one that no
    chosen family reads, or a value check_config rejects, is an error.
  }];
  let dependentDialects = ["::mlir::delta::DeltaDialect"];
  let options = [
    Option<"target", "target", "std::string", [{"cpu"}],
           "cpu, cuda:sm_90a or all">,
    Option<"mode", "mode", "std::string", [{""}],
           "override the layer's mode: auto, chunked or recurrent">,
    Option<"chunk", "chunk", "int64_t", "0",
           "knob chunk (0 = default; the catalogue lists the values)">,
    Option<"tileK", "tile-k", "int64_t", "0", "knob tile_k (0 = default)">,
    Option<"tileV", "tile-v", "int64_t", "0", "knob tile_v (0 = default)">,
    Option<"warps", "warps", "int64_t", "0", "knob warps (0 = default)">,
    Option<"stages", "stages", "int64_t", "0", "knob stages (0 = default)">,
    Option<"split", "split", "int64_t", "0",
           "knob split (0 = default: cuda_chunked's split 0 is the kernel's rule)">,
    Option<"fuse", "fuse", "int64_t", "0", "knob fuse (0 = default)">,
    Option<"scan", "scan", "int64_t", "0",
           "knob scan (0 = default: cuda_chunked's scan 0 is the kernel's rule)">,
    Option<"tuningDb", "tuning-db", "std::string", [{""}],
           "path of a tuning database (JSON, deltac/tuning_db.h)">
  ];
}

def DeltaLowerStages : Pass<"delta-lower-stages", "ModuleOp"> {
  let summary = "Lower scheduled delta.layer ops into delta.kernel stage graphs";
  let description = [{
    For every schedule of every layer, creates a `delta.kernel
    @<layer>_<family>`: a data-flow graph from the layer's tensors (block
    arguments) through the pre-processing (conversions, beta sigmoid,
    gate), the stages of the family's mode (chunked: qk_l2norm,
    gate_cumsum, kkt_inverse, wy, state_scan, chunk_output; recurrent:
    qk_l2norm, recurrent_step) and the post-processing to delta.yield.
    Stages are left unfused: delta-fuse-stages groups them.
  }];
  let dependentDialects = ["::mlir::delta::DeltaDialect"];
}

def DeltaFuseStages : Pass<"delta-fuse-stages", "ModuleOp"> {
  let summary = "Group the stages of every delta.kernel into delta.fused kernels";
  let description = [{
    Rewrites each kernel's stage graph: the stages of one group move into a
    `delta.fused` region (one kernel launch, one loop over chunks or
    tokens) whose results are the values used after it. Which stages share
    a kernel is a schedule choice (`fuse`):
      all          every stage in one group (what the catalogue's templates
                   run today: the CPU chunked kernel fuses every stage per
                   chunk, the recurrent kernels the whole step);
      chunk_local  chunked kernels as three groups: the chunk-parallel
                   qk_l2norm/gate_cumsum/kkt_inverse/wy, the sequential
                   state_scan, the chunk-parallel chunk_output
                   (flash-linear-attention's split); recurrent as all;
      none         one group per stage.
    Existing groups are dissolved first, so the pass can be re-run with
    another choice. Conversions and the beta/gate pre-processing stay
    outside (element-wise work around the kernel).
  }];
  let dependentDialects = ["::mlir::delta::DeltaDialect"];
  let options = [
    Option<"fuse", "fuse", "std::string", [{"all"}],
           "all, chunk_local or none">
  ];
}

#endif // DELTA_PASSES_TD
