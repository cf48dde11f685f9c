//===- Flags.h - build a delta.layer spec from deltac flags -----*- C++ -*-===//
#ifndef DELTAC_FLAGS_H
#define DELTAC_FLAGS_H

#include "llvm/Support/CommandLine.h"

#include <string>

namespace deltac {

/// The `generate` subcommand (a function: options in several files use it).
llvm::cl::SubCommand &generateCmd();

/// The category of the spec flags.
llvm::cl::OptionCategory &specCategory();

/// True when any spec-building flag (--variant, --heads, ...) was given.
bool specFlagsGiven();

/// Builds the MLIR text of one delta.layer from the flags (`mode`, the
/// --mode value shared with spec files, may be empty). Returns false with a
/// message naming the flag and what is allowed.
bool specFromFlags(const std::string &mode, std::string &text,
                   std::string &error);

} // namespace deltac

#endif // DELTAC_FLAGS_H
