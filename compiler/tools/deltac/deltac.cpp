//===- deltac.cpp - the deltac driver -------------------------------------===//
//
//   deltac generate SPEC.mlir -o DIR [--target=cpu|cuda:sm_90a|all] [...]
//   deltac generate --variant=gated --heads=16 ... -o DIR
//   deltac run ...   (forwards to deltac::run_command from deltac_cli)
//
//===----------------------------------------------------------------------===//

#include "Flags.h"
#include "deltac/Emit.h"

#include "Delta/DeltaDialect.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

#include "deltac/cli.h"

using namespace llvm;
using namespace mlir;

namespace {

cl::SubCommand runCmd("run", "Run a compiled layer on .npy inputs (see "
                             "`deltac run --help`)");

cl::OptionCategory genCat("Generate options");
cl::opt<std::string> specFile(cl::Positional, cl::desc("[spec.mlir]"),
                              cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<std::string> outDir("o", cl::desc("output directory"),
                            cl::value_desc("dir"),
                            cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<std::string> emitWhat(
    "emit",
    cl::desc("files (default: write DIR), or print one thing to stdout: "
             "mlir (IR after lowering), header, cpp, cuda, manifest"),
    cl::init("files"), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<std::string> target("target", cl::desc("cpu, cuda:sm_90a or all"),
                            cl::init("cpu"), cl::sub(deltac::generateCmd()),
                            cl::cat(genCat));
cl::opt<std::string> mode("mode",
                          cl::desc("auto, chunked or recurrent (overrides "
                                   "the spec)"),
                          cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<int> chunk("chunk",
                   cl::desc("catalogue knob chunk, for the chosen "
                            "families that read it"),
                   cl::init(0), cl::sub(deltac::generateCmd()),
                   cl::cat(genCat));
cl::opt<int> tileK("tile-k",
                   cl::desc("catalogue knob tile_k, for the chosen "
                            "families that read it"),
                   cl::init(0), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<int> tileV("tile-v",
                   cl::desc("catalogue knob tile_v, for the chosen "
                            "families that read it"),
                   cl::init(0), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<int> warps("warps",
                   cl::desc("catalogue knob warps, for the chosen "
                            "families that read it"),
                   cl::init(0), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<int> stages("stages",
                    cl::desc("catalogue knob stages, for the chosen "
                             "families that read it"),
                    cl::init(0), cl::sub(deltac::generateCmd()),
                    cl::cat(genCat));
cl::opt<int> split("split",
                   cl::desc("catalogue knob split, for the chosen families "
                            "that read it (cuda_chunked: 0 = the kernel's "
                            "rule)"),
                   cl::init(0), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<int> fuse("fuse",
                  cl::desc("catalogue knob fuse, for the chosen families "
                           "that read it"),
                  cl::init(0), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<int> scan("scan",
                  cl::desc("catalogue knob scan, for the chosen families "
                           "that read it (cuda_chunked: 0 = the kernel's "
                           "rule, 1 = the block scan)"),
                  cl::init(0), cl::sub(deltac::generateCmd()), cl::cat(genCat));
cl::opt<std::string> tuningDb("tuning-db",
                              cl::desc("tuning database (JSON, schema 2)"),
                              cl::value_desc("path"),
                              cl::sub(deltac::generateCmd()), cl::cat(genCat));

int error(const Twine &msg) {
  errs() << "deltac: error: " << msg << "\n";
  return 1;
}

// Writes every file to a temporary next to its final path first, then
// renames them all, so a failed write leaves the directory as it was. Then
// removes <layer>_cpu.cpp / <layer>_cuda.cu of a generated layer that this
// run did not write (left by an earlier run with another --target).
int writeFiles(const std::vector<deltac::GeneratedFile> &files) {
  if (std::error_code ec = sys::fs::create_directories(outDir))
    return error("cannot create output directory '" + outDir +
                 "': " + ec.message());
  auto pathOf = [](StringRef name) {
    SmallString<256> path(outDir);
    sys::path::append(path, name);
    return path;
  };
  std::vector<SmallString<256>> temps;
  auto dropTemps = [&] {
    for (const SmallString<256> &t : temps)
      sys::fs::remove(t);
  };
  for (const deltac::GeneratedFile &f : files) {
    int fd;
    SmallString<256> temp;
    std::string model = (pathOf(f.name) + ".tmp%%%%%%").str();
    if (std::error_code ec = sys::fs::createUniqueFile(model, fd, temp)) {
      dropTemps();
      return error("cannot write '" + pathOf(f.name) + "': " + ec.message());
    }
    temps.push_back(temp);
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << f.text;
    os.close();
    if (os.has_error()) {
      std::string msg = os.error().message();
      os.clear_error();
      dropTemps();
      return error("cannot write '" + pathOf(f.name) + "': " + msg);
    }
  }
  // A directory in the way would fail its rename after others succeeded.
  for (const deltac::GeneratedFile &f : files)
    if (sys::fs::is_directory(pathOf(f.name))) {
      dropTemps();
      return error("cannot write '" + pathOf(f.name) +
                   "': a directory is in the way");
    }
  for (size_t i = 0; i < files.size(); ++i)
    if (std::error_code ec = sys::fs::rename(temps[i], pathOf(files[i].name))) {
      dropTemps();
      return error("cannot write '" + pathOf(files[i].name) +
                   "': " + ec.message());
    }
  llvm::StringSet<> written;
  for (const deltac::GeneratedFile &f : files)
    written.insert(f.name);
  for (const deltac::GeneratedFile &f : files) {
    StringRef name(f.name);
    if (!name.consume_back(".h"))
      continue; // one header per layer: name is the layer's
    for (const char *suffix : {"_cpu.cpp", "_cuda.cu"}) {
      std::string stale = (name + suffix).str();
      if (!written.contains(stale))
        sys::fs::remove(pathOf(stale)); // absent is fine
    }
  }
  return 0;
}

int printOne(const std::vector<deltac::GeneratedFile> &files) {
  StringRef suffix = llvm::StringSwitch<StringRef>(emitWhat)
                         .Case("header", ".h")
                         .Case("cpp", "_cpu.cpp")
                         .Case("cuda", "_cuda.cu")
                         .Case("manifest", "manifest.json");
  bool any = false;
  for (const deltac::GeneratedFile &f : files)
    if (StringRef(f.name).ends_with(suffix)) {
      outs() << f.text;
      any = true;
    }
  if (!any)
    return error("--emit=" + emitWhat + ": nothing of that kind was "
                 "generated (check --target)");
  return 0;
}

int generate() {
  static const char *kinds[] = {"files", "mlir", "header", "cpp", "cuda",
                                "manifest"};
  if (!llvm::is_contained(kinds, StringRef(emitWhat)))
    return error("--emit=" + emitWhat +
                 ": expected files, mlir, header, cpp, cuda or manifest");
  if (emitWhat == "files" && outDir.empty())
    return error("generate: -o DIR is required (or --emit=... to print to "
                 "stdout)");

  SourceMgr sourceMgr;
  bool flags = deltac::specFlagsGiven();
  if (!specFile.empty() && flags)
    return error("generate: give either a spec file or spec flags "
                 "(--variant, --heads, ...), not both");
  if (specFile.empty() && !flags)
    return error("generate: expected a spec file (SPEC.mlir) or spec flags "
                 "(--variant, --heads, --key-dim, --value-dim, ...)");
  if (flags) {
    std::string text, err;
    if (!deltac::specFromFlags(mode, text, err))
      return error(err);
    sourceMgr.AddNewSourceBuffer(
        MemoryBuffer::getMemBufferCopy(text, "<spec from flags>"), SMLoc());
  } else {
    std::string err;
    auto buf = openInputFile(specFile, &err);
    if (!buf)
      return error("cannot read spec '" + specFile + "': " + err);
    sourceMgr.AddNewSourceBuffer(std::move(buf), SMLoc());
  }

  MLIRContext ctx;
  ctx.loadDialect<delta::DeltaDialect>();
  ctx.printOpOnDiagnostic(false); // messages name the op and the problem
  SourceMgrDiagnosticHandler diag(sourceMgr, &ctx);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &ctx);
  if (!module)
    return 1;

  deltac::PipelineOptions opts;
  opts.target = target;
  opts.mode = mode;
  opts.chunk = chunk;
  opts.tileK = tileK;
  opts.tileV = tileV;
  opts.warps = warps;
  opts.stages = stages;
  opts.split = split;
  opts.fuse = fuse;
  opts.scan = scan;
  opts.tuningDb = tuningDb;
  if (failed(deltac::runPipeline(*module, opts)))
    return 1;
  if (emitWhat == "mlir") {
    module->print(outs());
    outs() << "\n";
    return 0;
  }
  std::vector<deltac::GeneratedFile> files;
  if (failed(deltac::emitPackage(*module, files)))
    return 1;
  return emitWhat == "files" ? writeFiles(files) : printOne(files);
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // `deltac run ...` is parsed by the runtime's command, not by llvm::cl.
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0)
    return deltac::run_command(argc - 1, argv + 1);
  cl::HideUnrelatedOptions({&genCat, &deltac::specCategory()});
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "deltac: delta-rule attention kernel "
                                   "compiler\n",
                                   &errs()))
    return 1;
  if (deltac::generateCmd())
    return generate();
  errs() << "deltac: expected a subcommand: generate or run (see deltac "
            "--help)\n";
  return 1;
}
