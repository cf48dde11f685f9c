// A safetensors reader (and a small writer) for deltac::nn. The file is
// untrusted: a truncated file, a header length past the end or absurd,
// malformed JSON, an unknown dtype, offsets out of range, overlapping or
// not matching dtype x shape are errors naming the file (and byte offset or
// tensor); a missing tensor or one of the wrong shape or dtype is an error
// naming the tensor. Never a crash or an out-of-bounds read. Format: 8-byte
// little-endian header length n, n bytes of JSON {"name": {"dtype": "F32",
// "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data (offsets relative to byte 8 + n).
#ifndef DELTAC_SAFETENSORS_H
#define DELTAC_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace deltac {

struct SafeTensorInfo {
  std::string dtype;           // "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte offsets into the data section
};

class SafeTensors {
public:
  // Largest header accepted (the format's own limit is 100 MB).
  static constexpr uint64_t kMaxHeader = 100u << 20;

  // Parses a whole file held in memory (copied). label names it in messages.
  bool parse(const uint8_t *data, size_t size, const std::string &label,
             std::string *error);
  // Reads and parses the file at path (held in memory once, not copied).
  bool load(const std::string &path, std::string *error);

  const std::string &label() const { return label_; }
  const std::map<std::string, SafeTensorInfo> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  const SafeTensorInfo *find(const std::string &name) const;

  // The tensor name as float32 (F32, BF16 and F16 are converted); its shape
  // must be `shape` exactly. False with an error naming the tensor otherwise
  // (missing, wrong shape, unsupported dtype).
  bool get_f32(const std::string &name, const std::vector<int64_t> &shape,
               std::vector<float> *out, std::string *error) const;
  // As get_f32, any shape (returned in *shape).
  bool get_f32_any(const std::string &name, std::vector<float> *out,
                   std::vector<int64_t> *shape, std::string *error) const;

private:
  // Validates the file at data (not kept) and fills everything but bytes_.
  bool parse_header(const uint8_t *data, size_t size, const std::string &label,
                    std::string *error);
  std::string label_;
  std::vector<uint8_t> bytes_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafeTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes float32 tensors (and string metadata) as a safetensors file.
struct SafeTensorF32 {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
std::vector<uint8_t> safetensors_bytes(
    const std::map<std::string, SafeTensorF32> &tensors,
    const std::map<std::string, std::string> &metadata = {});
bool save_safetensors(const std::string &path,
                      const std::map<std::string, SafeTensorF32> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string *error);

std::string shape_string(const std::vector<int64_t> &shape); // "(2, 3)"

} // namespace deltac

#endif // DELTAC_SAFETENSORS_H
