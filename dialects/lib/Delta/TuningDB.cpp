//===- TuningDB.cpp - tuning database for delta schedules -----------------===//

#include "Delta/TuningDB.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::delta;
namespace json = llvm::json;

std::optional<Target> mlir::delta::parseTargetName(llvm::StringRef name) {
  if (name == "cpu")
    return Target::cpu;
  if (name == "cuda:sm_90a" || name == "sm_90a")
    return Target::sm_90a;
  return std::nullopt;
}

llvm::StringRef mlir::delta::targetName(Target t) {
  return t == Target::cpu ? "cpu" : "cuda:sm_90a";
}

namespace {
/// Reads one record, remembering the first problem.
class RecordReader {
public:
  RecordReader(const json::Object &obj, size_t index)
      : obj(obj), index(index) {}

  std::string error;

  int64_t integer(llvm::StringRef key, int64_t lo, int64_t hi) {
    if (!error.empty())
      return 0;
    const json::Value *v = obj.get(key);
    std::optional<int64_t> i = v ? v->getAsInteger() : std::nullopt;
    if (!i || *i < lo || *i > hi) {
      fail(key, llvm::formatv("an integer in {0}..{1}", lo, hi).str());
      return 0;
    }
    return *i;
  }

  template <typename E>
  E enumeration(llvm::StringRef key, std::optional<E> (*parse)(llvm::StringRef),
                llvm::StringRef allowed) {
    if (!error.empty())
      return E();
    const json::Value *v = obj.get(key);
    std::optional<llvm::StringRef> s = v ? v->getAsString() : std::nullopt;
    std::optional<E> e = s ? parse(*s) : std::nullopt;
    if (!e) {
      fail(key, ("one of " + allowed).str());
      return E();
    }
    return *e;
  }

  bool has(llvm::StringRef key) const { return obj.get(key) != nullptr; }

private:
  void fail(llvm::StringRef key, const std::string &expected) {
    const json::Value *v = obj.get(key);
    std::string got = "missing";
    if (v) {
      std::string s;
      llvm::raw_string_ostream os(s);
      os << *v;
      got = "got " + s;
    }
    error = llvm::formatv("record {0}: field '{1}' must be {2} ({3})", index,
                          key, expected, got)
                .str();
  }

  const json::Object &obj;
  size_t index;
};

std::optional<Mode> parseKernelMode(llvm::StringRef s) {
  std::optional<Mode> m = symbolizeMode(s);
  if (m == Mode::automatic)
    return std::nullopt;
  return m;
}
} // namespace

llvm::Expected<std::vector<TuningRecord>>
mlir::delta::loadTuningDB(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "tuning db '" + path + "': " + msg);
  };
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf)
    return fail("cannot read: " + buf.getError().message());
  llvm::Expected<json::Value> root = json::parse((*buf)->getBuffer());
  if (!root)
    return fail("not valid JSON: " + llvm::toString(root.takeError()));
  const json::Object *top = root->getAsObject();
  if (!top)
    return fail("the top level must be an object");
  std::optional<llvm::StringRef> format = top->getString("format");
  if (!format || *format != "deltac-tuning-db")
    return fail("'format' must be \"deltac-tuning-db\"");
  std::optional<int64_t> version = top->getInteger("version");
  if (!version || *version != 1)
    return fail("'version' must be 1");
  const json::Array *records = top->getArray("records");
  if (!records)
    return fail("'records' must be an array");

  std::vector<TuningRecord> out;
  for (size_t i = 0; i < records->size(); ++i) {
    const json::Object *obj = (*records)[i].getAsObject();
    if (!obj)
      return fail(llvm::formatv("record {0} must be an object", i).str());
    RecordReader r(*obj, i);
    TuningRecord rec;
    rec.target = r.enumeration<Target>("target", parseTargetName,
                                       "\"cpu\", \"cuda:sm_90a\"");
    rec.variant = r.enumeration<Variant>("variant", symbolizeVariant,
                                         "\"delta\", \"gated\", \"kda\"");
    rec.keyDim = r.integer("key_dim", 16, 256);
    rec.valueDim = r.integer("value_dim", 16, 256);
    rec.inDtype = r.enumeration<DType>("in_dtype", symbolizeDType,
                                       "\"f32\", \"bf16\", \"f16\"");
    if (r.has("mode"))
      rec.mode = r.enumeration<Mode>("mode", parseKernelMode,
                                     "\"chunked\", \"recurrent\"");
    rec.chunk = r.integer("chunk", 0, 64);
    rec.tileK = r.integer("tile_k", 16, 256);
    rec.tileV = r.integer("tile_v", 16, 256);
    rec.warps = r.integer("warps", 1, 32);
    rec.stages = r.integer("stages", 1, 8);
    if (r.error.empty() && rec.chunk != 0 && rec.chunk != 16 &&
        rec.chunk != 32 && rec.chunk != 64)
      r.error = llvm::formatv("record {0}: field 'chunk' must be 0, 16, 32 "
                              "or 64 (got {1})",
                              i, rec.chunk)
                    .str();
    if (!r.error.empty())
      return fail(r.error);
    out.push_back(rec);
  }
  return out;
}
