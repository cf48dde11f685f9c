// The safetensors reader: every length, offset and shape is checked before
// use (the file is untrusted); nlohmann-json parses without exceptions.
#include "deltac/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace deltac {
namespace {

using json = nlohmann::json;

// Bytes per element of the dtypes the format names (0: unknown).
uint64_t dtype_size(const std::string &d) {
  static const std::map<std::string, uint64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2}, {"U8", 1},
      {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        --exp;
      }
      man &= 0x3ff;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool fail(std::string *error, const std::string &msg) {
  if (error) *error = msg;
  return false;
}

} // namespace

std::string shape_string(const std::vector<int64_t> &shape) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) s << ",";
  s << ")";
  return s.str();
}

bool SafeTensors::load(const std::string &path, std::string *error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail(error, path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                             std::istreambuf_iterator<char>());
  if (f.bad()) return fail(error, path + ": read error");
  if (!parse_header(bytes.data(), bytes.size(), path, error)) {
    tensors_.clear(); // a failed object holds no tensor (and no bytes)
    metadata_.clear();
    return false;
  }
  bytes_.swap(bytes);
  return true;
}

bool SafeTensors::parse(const uint8_t *data, size_t size,
                        const std::string &label, std::string *error) {
  if (!parse_header(data, size, label, error)) {
    tensors_.clear(); // a failed object holds no tensor (and no bytes)
    metadata_.clear();
    return false;
  }
  bytes_.assign(data, data + size);
  return true;
}

bool SafeTensors::parse_header(const uint8_t *data, size_t size,
                               const std::string &label, std::string *error) {
  label_ = label;
  tensors_.clear();
  metadata_.clear();
  bytes_.clear();
  const std::string &L = label;
  if (size < 8)
    return fail(error, L + ": truncated: " + std::to_string(size) +
                           " bytes, the 8-byte header length is missing");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  if (n > kMaxHeader)
    return fail(error, L + ": header length " + std::to_string(n) +
                           " at byte 0 is absurd (limit " +
                           std::to_string(kMaxHeader) + ")");
  if (n > size - 8)
    return fail(error, L + ": header length " + std::to_string(n) +
                           " at byte 0 runs past the end of the file (" +
                           std::to_string(size) + " bytes)");
  const char *hb = reinterpret_cast<const char *>(data + 8);
  json h = json::parse(hb, hb + n, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded())
    return fail(error, L + ": malformed JSON header (bytes 8.." +
                           std::to_string(8 + n) + ")");
  if (!h.is_object())
    return fail(error, L + ": the JSON header at byte 8 is not an object");
  const uint64_t data_size = size - 8 - n;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string &name = it.key();
    const json &e = it.value();
    const std::string T = L + ": tensor '" + name + "': ";
    if (name == "__metadata__") {
      if (!e.is_object()) return fail(error, L + ": __metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string())
          return fail(error, L + ": __metadata__ '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object()) return fail(error, T + "entry is not an object");
    auto d = e.find("dtype"), s = e.find("shape"), o = e.find("data_offsets");
    if (d == e.end() || !d->is_string()) return fail(error, T + "no dtype string");
    if (s == e.end() || !s->is_array()) return fail(error, T + "no shape array");
    if (o == e.end() || !o->is_array() || o->size() != 2)
      return fail(error, T + "data_offsets is not [begin, end]");
    SafeTensorInfo info;
    info.dtype = d->get<std::string>();
    const uint64_t es = dtype_size(info.dtype);
    if (!es) return fail(error, T + "unknown dtype '" + info.dtype + "'");
    if (s->size() > 16) return fail(error, T + "more than 16 dimensions");
    uint64_t numel = 1;
    for (const json &x : *s) {
      if (!x.is_number_unsigned())
        return fail(error, T + "shape has an entry that is not a non-negative integer");
      const uint64_t v = x.get<uint64_t>();
      if (v > (uint64_t(1) << 40) || (v && numel > (uint64_t(1) << 62) / v))
        return fail(error, T + "shape " + s->dump() + " is absurd");
      numel *= v;
      info.shape.push_back(int64_t(v));
    }
    if (!(*o)[0].is_number_unsigned() || !(*o)[1].is_number_unsigned())
      return fail(error, T + "data_offsets are not non-negative integers");
    info.begin = (*o)[0].get<uint64_t>();
    info.end = (*o)[1].get<uint64_t>();
    const uint64_t at = 8 + n;
    if (info.begin > info.end)
      return fail(error, T + "data_offsets [" + std::to_string(info.begin) + ", " +
                             std::to_string(info.end) + "] are reversed");
    if (info.end > data_size)
      return fail(error, T + "data_offsets [" + std::to_string(info.begin) + ", " +
                             std::to_string(info.end) + "] (file bytes " +
                             std::to_string(at + info.begin) + ".." +
                             std::to_string(at + info.end) +
                             ") run past the end of the file (" +
                             std::to_string(size) + " bytes)");
    if (numel > (uint64_t(1) << 62) / es || info.end - info.begin != numel * es)
      return fail(error, T + "data_offsets [" + std::to_string(info.begin) + ", " +
                             std::to_string(info.end) + "] hold " +
                             std::to_string(info.end - info.begin) + " bytes, but " +
                             info.dtype + " " + shape_string(info.shape) + " needs " +
                             std::to_string(numel * es));
    order.emplace_back(info.begin, name);
    tensors_[name] = std::move(info);
  }
  std::sort(order.begin(), order.end());
  for (size_t i = 1; i < order.size(); ++i) {
    const SafeTensorInfo &a = tensors_[order[i - 1].second];
    const SafeTensorInfo &b = tensors_[order[i].second];
    if (b.begin < a.end && b.end > b.begin && a.end > a.begin)
      return fail(error, L + ": tensors '" + order[i - 1].second + "' and '" +
                             order[i].second + "' overlap (data bytes " +
                             std::to_string(b.begin) + ".." +
                             std::to_string(std::min(a.end, b.end)) + ")");
  }
  data_start_ = 8 + n;
  return true;
}

const SafeTensorInfo *SafeTensors::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

bool SafeTensors::get_f32_any(const std::string &name, std::vector<float> *out,
                              std::vector<int64_t> *shape,
                              std::string *error) const {
  const SafeTensorInfo *t = find(name);
  if (!t) return fail(error, label_ + ": tensor '" + name + "' is missing");
  const uint64_t bytes = t->end - t->begin;
  // parse() checked begin <= end <= data size and bytes == numel * size.
  const uint8_t *p = bytes_.data() + data_start_ + t->begin;
  if (t->dtype == "F32") {
    out->resize(bytes / 4);
    if (bytes) std::memcpy(out->data(), p, bytes);
  } else if (t->dtype == "BF16" || t->dtype == "F16") {
    const bool bf = t->dtype == "BF16";
    out->resize(bytes / 2);
    for (size_t i = 0; i < out->size(); ++i) {
      const uint16_t h = uint16_t(p[2 * i] | (p[2 * i + 1] << 8));
      (*out)[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    return fail(error, label_ + ": tensor '" + name + "': dtype " + t->dtype +
                           ", expected F32, BF16 or F16");
  }
  if (shape) *shape = t->shape;
  return true;
}

bool SafeTensors::get_f32(const std::string &name,
                          const std::vector<int64_t> &shape,
                          std::vector<float> *out, std::string *error) const {
  const SafeTensorInfo *t = find(name);
  if (!t) return fail(error, label_ + ": tensor '" + name + "' is missing");
  if (t->shape != shape)
    return fail(error, label_ + ": tensor '" + name + "': shape " +
                           shape_string(t->shape) + ", expected " +
                           shape_string(shape));
  return get_f32_any(name, out, nullptr, error);
}

std::vector<uint8_t> safetensors_bytes(
    const std::map<std::string, SafeTensorF32> &tensors,
    const std::map<std::string, std::string> &metadata) {
  json h = json::object();
  uint64_t off = 0;
  for (const auto &kv : tensors) {
    const uint64_t b = kv.second.data.size() * 4;
    h[kv.first] = {{"dtype", "F32"},
                   {"shape", kv.second.shape},
                   {"data_offsets", {off, off + b}}};
    off += b;
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string hs = h.dump();
  while ((8 + hs.size()) % 8) hs += ' ';
  std::vector<uint8_t> out(8 + hs.size() + off);
  uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, hs.data(), hs.size());
  size_t pos = 8 + hs.size();
  for (const auto &kv : tensors) {
    const size_t b = kv.second.data.size() * 4;
    if (b) std::memcpy(out.data() + pos, kv.second.data.data(), b);
    pos += b;
  }
  return out;
}

bool save_safetensors(const std::string &path,
                      const std::map<std::string, SafeTensorF32> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string *error) {
  const std::vector<uint8_t> b = safetensors_bytes(tensors, metadata);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
  if (!f) return fail(error, path + ": cannot write");
  return true;
}

} // namespace deltac
