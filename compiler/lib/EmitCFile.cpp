//===- EmitCFile.cpp - a layer's source file as EmitC ---------------------===//
//
// One `emitc.file` per layer and target, printed by
// mlir::emitc::translateToCpp:
//
//   emitc.include            the layer's header, deltac/check.h, the
//                            catalogue family's header (FamilyInfo::header)
//   emitc.verbatim           helper definitions EmitC cannot express
//                            (spec match, conversion loops, CUDA helper
//                            kernels), each one C++ text block
//   emitc.func @run_<kernel> one per delta.kernel: host/device pre-processing
//                            (verbatim), the template instance as
//                            emitc.call_opaque "<FamilyInfo::entry>" with
//                            template_args <Var, knobs..., KC, VC> (CUDA:
//                            <Var, K, V, InT, knobs...>), post-processing,
//                            emitc.return
//   emitc.func @<layer>_forward_<dev>   extern "C": the spec checks
//                            (verbatim), deltac::check_params (call_opaque),
//                            the dispatch by the longest sequence over the
//                            kernels' max_tokens (emitc.cmp + emitc.if),
//                            emitc.call of the run_ functions
//
//===----------------------------------------------------------------------===//

#include "EmitInternal.h"

#include "mlir/Target/Cpp/CppEmitter.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::delta;
namespace ec = mlir::emitc;

namespace deltac {
namespace {

struct Builder {
  OpBuilder &b;
  Location loc;
  MLIRContext *ctx;

  Type opaque(StringRef s) { return ec::OpaqueType::get(ctx, s); }
  Type ptr(StringRef pointee) {
    return ec::PointerType::get(ec::OpaqueType::get(ctx, pointee));
  }
  Type intT() { return opaque("int"); }
  Type sizeT() { return ec::SizeTType::get(ctx); }

  /// C++ text EmitC does not model (one trailing newline dropped: the
  /// printer adds one).
  void verbatim(StringRef text, ValueRange args = {}) {
    if (text.empty())
      return;
    text.consume_back("\n");
    // Inside a function the printer indents every line itself.
    std::string out;
    bool inFunc = b.getInsertionBlock() &&
                  !isa<ec::FileOp>(b.getInsertionBlock()->getParentOp());
    if (inFunc) {
      SmallVector<StringRef> lines;
      text.split(lines, '\n');
      for (size_t i = 0; i < lines.size(); ++i) {
        StringRef l = lines[i];
        if (l.starts_with("  "))
          l = l.drop_front(2);
        out += (i ? "\n" : "") + l.str();
      }
      text = out;
    }
    ec::VerbatimOp::create(b, loc, b.getStringAttr(text), args);
  }
  Value literal(StringRef text, Type t) {
    return ec::LiteralOp::create(b, loc, t, text);
  }
  Value constInt(StringRef text) {
    return ec::ConstantOp::create(b, loc, intT(),
                                  ec::OpaqueAttr::get(ctx, text));
  }
  Value call(StringRef callee, Type result, ValueRange args,
             ArrayAttr templateArgs = {}) {
    auto op = ec::CallOpaqueOp::create(
        b, loc, result ? TypeRange{result} : TypeRange{}, callee, args,
        /*args=*/ArrayAttr(), templateArgs);
    return result ? op.getResult(0) : Value();
  }
  void assign(Value var, Value v) { ec::AssignOp::create(b, loc, var, v); }
};

/// Template arguments: integers as i32 attributes, names as opaque text.
ArrayAttr templateArgs(MLIRContext *ctx, const TemplateCall &t) {
  SmallVector<Attribute> args;
  for (auto &[name, value] : t.args) {
    long long n;
    if (!StringRef(value).getAsInteger(10, n))
      args.push_back(IntegerAttr::get(IntegerType::get(ctx, 32), n));
    else
      args.push_back(ec::OpaqueAttr::get(ctx, value));
  }
  return ArrayAttr::get(ctx, args);
}

/// The EmitC type of C type text ("float *", "int64_t").
Type typeOf(Builder &B, StringRef c) {
  return c.consume_back(" *") ? B.ptr(c) : B.opaque(c);
}

/// Declarations that give the function's arguments their C names, for the
/// verbatim text that uses them (EmitC names arguments v1, v2, ...).
std::string aliases(ArrayRef<std::pair<std::string, std::string>> named) {
  std::string s;
  for (auto &[type, name] : named)
    s += "  " + type + (StringRef(type).ends_with("*") ? "" : " ") + name +
         " = {};\n";
  return s;
}

/// emitc.func @run_<kernel>(p, [stream,] extras..., err, err_len) -> int.
ec::FuncOp buildRun(Builder &B, LayerOp layer, const KernelPlan &k,
                    bool cuda) {
  SmallVector<Type> args{B.opaque("deltac_fwd_params")};
  SmallVector<std::pair<std::string, std::string>> named{
      {"deltac_fwd_params", "p"}};
  if (cuda) {
    args.push_back(B.opaque("cudaStream_t"));
    named.push_back({"cudaStream_t", "stream"});
  }
  for (auto &[type, name] : extraParamList(layer, cuda)) {
    args.push_back(typeOf(B, type));
    named.push_back({type, name});
  }
  args.push_back(B.ptr("char"));
  args.push_back(B.sizeT());
  named.push_back({"char *", "err"});
  named.push_back({"size_t", "err_len"});

  B.verbatim(cuda ? cudaKernelComment(layer, k) : cpuKernelComment(layer, k));
  auto fn = ec::FuncOp::create(
      B.b, B.loc, ("run_" + k.op.getSymName()).str(),
      FunctionType::get(B.ctx, args, {B.intT()}));
  Block *body = fn.addEntryBlock();
  OpBuilder::InsertionGuard g(B.b);
  B.b.setInsertionPointToEnd(body);
  B.verbatim(aliases(named), body->getArguments());
  B.verbatim(cuda ? cudaPreText(layer, k) : cpuPreText(layer, k));
  if (cuda || !k.chunkStates) { // CPU chunk states: cpuPreText's loop
    // The kernel: the catalogue family's entry, instantiated with the
    // schedule's knobs.
    TemplateCall t = templateCall(layer, k);
    Value p = B.literal("p", B.opaque("deltac_fwd_params"));
    if (cuda) {
      SmallVector<Value> callArgs{
          p, B.literal("stream", B.opaque("cudaStream_t"))};
      // Chunk states: chunked_cfg's workspace (none: its own), its bytes,
      // skip, det, route, then cstates and cstates_count.
      if (k.chunkStates)
        for (auto [text, type] :
             {std::pair<StringRef, StringRef>{"nullptr", "void *"},
              {"0", "size_t"},
              {"nullptr", "const int32_t *"},
              {"false", "bool"},
              {"0", "int32_t"},
              {"chunk_states", "float *"},
              {"chunk_states_count", "int64_t"}})
          callArgs.push_back(B.literal(text, typeOf(B, type)));
      Value e = B.call(t.callee, B.opaque("cudaError_t"), callArgs,
                       templateArgs(B.ctx, t));
      B.verbatim("  if ({} != cudaSuccess)\n    return fail(err, err_len, "
                 "std::string(\"" +
                     t.callee + ": \") + cudaGetErrorString({}));",
                 {e, e});
    } else {
      B.call(t.callee, Type(), {p}, templateArgs(B.ctx, t));
    }
  }
  B.verbatim(cuda ? cudaPostText(layer, k) : cpuPostText(layer, k));
  ec::ReturnOp::create(B.b, B.loc, B.constInt("0"));
  return fn;
}

/// The extern "C" entry point.
void buildEntry(Builder &B, LayerOp layer, ArrayRef<KernelPlan> plans,
                ArrayRef<ec::FuncOp> runs, bool cuda) {
  std::string name = cuda ? cudaEntry(layer) : cpuEntry(layer);
  SmallVector<Type> args{B.ptr("const deltac_fwd_params")};
  SmallVector<std::pair<std::string, std::string>> named{
      {"const deltac_fwd_params *", "params"}};
  if (cuda) {
    args.push_back(B.ptr("void"));
    named.push_back({"void *", "stream_"});
  }
  for (auto &[type, n] : extraParamList(layer, cuda)) {
    args.push_back(typeOf(B, type));
    named.push_back({type, n});
  }
  args.push_back(B.ptr("char"));
  args.push_back(B.sizeT());
  named.push_back({"char *", "err"});
  named.push_back({"size_t", "err_len"});
  auto fn = ec::FuncOp::create(B.b, B.loc, name,
                               FunctionType::get(B.ctx, args, {B.intT()}));
  fn.setSpecifiersAttr(B.b.getStrArrayAttr({"extern \"C\""}));
  Block *body = fn.addEntryBlock();
  OpBuilder::InsertionGuard g(B.b);
  B.b.setInsertionPointToEnd(body);

  // The spec checks (text: a sequence of early returns).
  B.verbatim(aliases(named), body->getArguments());
  std::string pro;
  llvm::raw_string_ostream os(pro);
  emitEntryPrologue(os, layer, name);
  if (layer.getChunkStates())
    os << "  if (!chunk_states)\n    return fail(err, err_len, \""
       << layer.getSymName()
       << ": chunk_states is null: the layer was compiled with "
          "chunk_states\");\n";
  if (layer.getChunkStates() && cuda) {
    // The kernel bounds its writes by the count; a buffer that could be too
    // small for this call is refused, as the runtime does.
    StringRef n = layer.getSymName();
    os << "  const long long chunk_capacity = " << n
       << "_cuda_chunk_capacity(&p);\n"
       << "  if (chunk_states_count < chunk_capacity)\n"
       << "    return fail(err, err_len, \"" << n
       << ": chunk_states_count = \" + std::to_string(chunk_states_count) "
          "+\n"
       << "                                   \": expected at least \" + "
          "std::to_string(chunk_capacity) +\n"
       << "                                   \" (" << n
       << "_cuda_chunk_capacity)\");\n"
       << "  if (reinterpret_cast<uintptr_t>(chunk_states) % 16 != 0)\n"
       << "    return fail(err, err_len, \"" << n
       << ": chunk_states must be 16-byte aligned\");\n";
  }
  if (cuda)
    os << "  cudaStream_t stream = static_cast<cudaStream_t>(stream_);\n";
  emitCheckView(os, plans.front());
  // On CUDA nothing on the host reads cu_seqlens when the kernel set ends
  // with an unbounded kernel: the dispatch bounds the longest sequence by T
  // (as the runtime does with device pointers; every kernel is correct at
  // any length, the bound only picks the faster one), so the call stays
  // asynchronous and capturable in a CUDA graph; check_params checks all
  // but cu_seqlens' contents, which the kernels trust. Only a kernel set
  // with no unbounded kernel copies cu_seqlens to the host and syncs, to
  // refuse calls longer than every bound.
  const bool hasUnbounded = llvm::any_of(plans, [](const KernelPlan &k) {
    return k.sched.getMaxTokens() == 0;
  });
  bool cuOnHost = !cuda || (plans.size() > 1 && !hasUnbounded);
  if (cuda && cuOnHost)
    os << "  // check_params and the dispatch read cu_seqlens on the host.\n"
       << "  std::vector<int64_t> cu;\n"
       << "  if (p.cu_seqlens) {\n"
       << "    cu.resize(size_t(p.N) + 1);\n"
       << "    cudaError_t e = cudaMemcpyAsync(cu.data(), p.cu_seqlens, "
          "cu.size() * sizeof(int64_t),\n"
       << "                                    cudaMemcpyDeviceToHost, "
          "stream);\n"
       << "    if (e == cudaSuccess)\n      e = cudaStreamSynchronize(stream);\n"
       << "    if (e != cudaSuccess)\n"
       << "      return fail(err, err_len, std::string(\""
       << layer.getSymName()
       << ": reading cu_seqlens: \") + cudaGetErrorString(e));\n"
       << "    view.cu_seqlens = cu.data();\n  }\n";
  B.verbatim(pro);

  // int result = 0; std::string msg = std::string();
  Type strT = B.opaque("std::string");
  Value result = ec::VariableOp::create(
      B.b, B.loc, ec::LValueType::get(B.intT()),
      ec::OpaqueAttr::get(B.ctx, "0"));
  Value msg = ec::VariableOp::create(B.b, B.loc, ec::LValueType::get(strT),
                                     ec::OpaqueAttr::get(B.ctx, "std::string()"));
  std::string tryText;
  llvm::raw_string_ostream ts(tryText);
  emitTry(ts);
  B.verbatim(tryText);
  Value view = B.literal("view", B.opaque("deltac_fwd_params"));
  Value msgPtr =
      ec::AddressOfOp::create(B.b, B.loc, ec::PointerType::get(strT), msg);
  SmallVector<Value> checkArgs{view, msgPtr};
  if (!cuOnHost)
    checkArgs.push_back(
        ec::ConstantOp::create(B.b, B.loc, B.b.getI1Type(),
                               B.b.getBoolAttr(false)));
  Value ok = B.call("deltac::check_params", B.b.getI1Type(), checkArgs);
  Value errV = body->getArgument(body->getNumArguments() - 2);
  Value lenV = body->getArgument(body->getNumArguments() - 1);
  auto failWith = [&](Value text) {
    B.assign(result, B.call("fail", B.intT(), {errV, lenV, text}));
  };
  auto prefixed = [&](Value s) {
    Value prefix = B.literal(
        ("std::string(\"" + layer.getSymName() + ": \")").str(), strT);
    return ec::AddOp::create(B.b, B.loc, strT, prefix, s).getResult();
  };

  auto ifOp = ec::IfOp::create(B.b, B.loc, ok, /*addThenBlock=*/true,
                               /*addElseBlock=*/true);
  {
    // Not ok: the check's message.
    OpBuilder::InsertionGuard g2(B.b);
    B.b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    failWith(prefixed(ec::LoadOp::create(B.b, B.loc, strT, msg)));
  }
  // Ok: dispatch, bounded kernels by their bound, then the unbounded one.
  B.b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  SmallVector<size_t> order;
  for (size_t i = 0; i < plans.size(); ++i)
    order.push_back(i);
  auto bound = [&](size_t i) {
    int64_t x = plans[i].sched.getMaxTokens();
    return x ? x : INT64_MAX;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return bound(a) < bound(c); });
  Value longest;
  if (llvm::any_of(plans, [](const KernelPlan &k) {
        return k.sched.getMaxTokens() != 0;
      }))
    longest = cuOnHost
                  ? B.call("longestSequence", B.b.getI64Type(), {view})
                  : B.literal("int64_t(view.T)", B.b.getI64Type());
  SmallVector<Value> runArgs{B.literal("p", B.opaque("deltac_fwd_params"))};
  if (cuda)
    runArgs.push_back(B.literal("stream", B.opaque("cudaStream_t")));
  for (unsigned i = 0, n = extraParamList(layer, cuda).size(); i < n; ++i)
    runArgs.push_back(body->getArgument(1 + (cuda ? 1 : 0) + i));
  runArgs.push_back(errV);
  runArgs.push_back(lenV);
  bool unbounded = false;
  for (size_t i : order) {
    int64_t maxTokens = plans[i].sched.getMaxTokens();
    auto run = [&] {
      auto c = ec::CallOp::create(B.b, B.loc, runs[i], runArgs);
      B.assign(result, c.getResult(0));
    };
    if (!maxTokens) {
      run();
      unbounded = true;
      break;
    }
    Value limit = ec::ConstantOp::create(B.b, B.loc, B.b.getI64Type(),
                                         B.b.getI64IntegerAttr(maxTokens));
    Value fits = ec::CmpOp::create(B.b, B.loc, B.b.getI1Type(),
                                   ec::CmpPredicate::le, longest, limit);
    auto branch = ec::IfOp::create(B.b, B.loc, fits, true, true);
    B.b.setInsertionPointToStart(&branch.getThenRegion().front());
    run();
    B.b.setInsertionPointToStart(&branch.getElseRegion().front());
  }
  if (!unbounded) {
    Value n = B.call("std::to_string", strT, {longest});
    Value text = ec::AddOp::create(
        B.b, B.loc, strT,
        B.literal("std::string(\"the longest sequence (\")", strT), n);
    text = ec::AddOp::create(
        B.b, B.loc, strT, text,
        B.literal("std::string(\" tokens) exceeds every compiled kernel\")",
                  strT));
    failWith(text);
  }

  B.b.setInsertionPointAfter(ifOp);
  std::string cat;
  llvm::raw_string_ostream cs(cat);
  emitCatch(cs, layer);
  B.verbatim(cat);
  ec::ReturnOp::create(B.b, B.loc,
                       ec::LoadOp::create(B.b, B.loc, B.intT(), result));
}

} // namespace

ec::FileOp buildSourceFile(OpBuilder &b, Location loc, LayerOp layer,
                           ArrayRef<KernelPlan> plans, bool cuda) {
  StringRef name = layer.getSymName();
  std::string id = (name + (cuda ? "_cuda.cu" : "_cpu.cpp")).str();
  auto file = ec::FileOp::create(b, loc, id);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&file.getBodyRegion().front());
  Builder B{b, loc, b.getContext()};
  B.verbatim(("// " + id + ": generated by deltac from delta.layer @" + name +
              ". Do not edit.")
                 .str());
  auto include = [&](StringRef h, bool standard = false) {
    ec::IncludeOp::create(b, loc, h, standard);
  };
  include((name + ".h").str());
  include("deltac/check.h");
  SmallVector<std::string> headers;
  for (const KernelPlan &k : plans) {
    std::string h = templateCall(layer, k).header;
    if (!llvm::is_contained(headers, h))
      headers.push_back(h);
  }
  for (const std::string &h : headers)
    include(h);
  include("deltac/params.h");
  if (cuda) {
    for (const char *h : {"cuda_bf16.h", "cuda_fp16.h", "cuda_runtime.h"})
      include(h, true);
  } else {
    include("deltac/convert.h");
    include("deltac/preprocess.h");
  }
  for (const char *h : {"algorithm", "cmath", "cstdint", "cstdio", "cstring",
                        "exception", "string", "vector"})
    include(h, true);

  // Helper definitions (C++ text), then the kernels and the entry point.
  if (cuda)
    B.verbatim(cudaOuterHelpers(plans));
  std::string prelude;
  llvm::raw_string_ostream os(prelude);
  emitCommonPrelude(os, layer); // opens the anonymous namespace
  B.verbatim(prelude);
  B.verbatim(cuda ? cudaInnerHelpers(plans) : cpuHelpers(plans));
  SmallVector<ec::FuncOp> runs;
  for (const KernelPlan &k : plans)
    runs.push_back(buildRun(B, layer, k, cuda));
  B.verbatim("} // namespace");
  buildEntry(B, layer, plans, runs, cuda);
  // The if regions end with emitc.yield.
  file.walk([&](ec::IfOp op) {
    for (Region *r : {&op.getThenRegion(), &op.getElseRegion()}) {
      if (r->empty())
        continue;
      Block &blk = r->front();
      if (blk.empty() || !isa<ec::YieldOp>(blk.back())) {
        b.setInsertionPointToEnd(&blk);
        ec::YieldOp::create(b, loc);
      }
    }
  });
  return file;
}

LogicalResult readLayerKernels(ModuleOp module, LayerOp layer,
                               SmallVectorImpl<KernelPlan> &cpu,
                               SmallVectorImpl<KernelPlan> &cuda) {
  for (auto k : module.getOps<KernelOp>()) {
    if (k.getLayer() != layer.getSymName())
      continue;
    FailureOr<KernelPlan> plan = readKernel(k, layer);
    if (failed(plan))
      return failure();
    (k.getSchedule().getTarget() == Target::cpu ? cpu : cuda).push_back(*plan);
  }
  return success();
}

FailureOr<std::string> printSourceFile(Operation *module, StringRef id) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(ec::translateToCpp(module, os, /*declareVariablesAtTop=*/false,
                                id)))
    return failure();
  return text;
}

} // namespace deltac
