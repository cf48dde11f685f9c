// Minimal .npy reader and writer (format versions 1.0, 2.0 and 3.0).
// Little-endian, C order only. Every malformed input yields an error string,
// never a crash or an unchecked allocation.
#ifndef DELTAC_NPY_H
#define DELTAC_NPY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace deltac {
namespace npy {

enum class DType { F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, Bool };

// Size in bytes of one element.
std::size_t item_size(DType t);
// The numpy descr string, e.g. "<f4".
const char *descr(DType t);
// A short name for messages, e.g. "float32".
const char *name(DType t);

struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> data; // count() * item_size(dtype) bytes

  int64_t count() const;
  template <class T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
  template <class T> T *as() { return reinterpret_cast<T *>(data.data()); }
};

// "(2, 3, 4)" style rendering of a shape, for messages.
std::string shape_str(const std::vector<int64_t> &shape);

// Parses a complete .npy file held in memory.
bool parse(const void *bytes, std::size_t size, Array *out, std::string *error);
// Reads a .npy file. Errors do not repeat the path; callers prefix it.
bool read_file(const std::string &path, Array *out, std::string *error);

// Encodes an array as a version 1.0 .npy file (version 2.0 if the header
// does not fit). data must hold product(shape) * item_size(t) bytes.
std::string encode(DType t, const std::vector<int64_t> &shape,
                   const void *data);
// Writes path atomically: a temporary file in the same directory, then a
// rename. On failure nothing is left at path.
bool write_file(const std::string &path, DType t,
                const std::vector<int64_t> &shape, const void *data,
                std::string *error);
// The two halves of write_file, for writing several files all or nothing:
// write_temp leaves the bytes in *tmp_path (next to path), commit renames it
// to path (and removes it on failure).
bool write_temp(const std::string &path, DType t,
                const std::vector<int64_t> &shape, const void *data,
                std::string *tmp_path, std::string *error);
bool commit(const std::string &tmp_path, const std::string &path,
            std::string *error);

// Files that must appear together (deltac run's o.npy and ht.npy). Every
// file is written to a temporary file next to its path first; only when all
// are written are they renamed into place, in order. When a rename fails,
// the files renamed before it are put back: the previous file (kept as a
// hard link while committing) or, where there was none, nothing. So a
// reported failure leaves every path as it was and no temporary file
// behind. Not crash-proof: a process killed between two renames can leave a
// new file next to an old one (and temporaries named <path>.tmp.*).
// rename_fn replaces ::rename for the commit step (tests inject failures).
struct OutFile {
  std::string path;
  DType dtype;
  std::vector<int64_t> shape;
  const void *data;
};
using RenameFn = int (*)(const char *from, const char *to);
bool write_files(const std::vector<OutFile> &files, std::string *error,
                 RenameFn rename_fn = nullptr);

} // namespace npy
} // namespace deltac

#endif // DELTAC_NPY_H
