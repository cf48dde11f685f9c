// .npy reading (writing: npy_write.cpp). The header is a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// parsed here by a small tokenizer that accepts exactly that grammar.
#include "deltac/npy.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace deltac {
namespace npy {
namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// Arrays are limited to 2^62 bytes so that sizes never overflow.
constexpr uint64_t kMaxBytes = uint64_t(1) << 62;
// numpy itself refuses headers larger than 10000 bytes by default; allow more
// but stay bounded.
constexpr uint64_t kMaxHeader = uint64_t(1) << 20;

struct DTypeInfo {
  DType type;
  const char *descr; // canonical little-endian spelling
  const char *name;
  std::size_t size;
};

constexpr DTypeInfo kTypes[] = {
    {DType::F16, "<f2", "float16", 2},  {DType::F32, "<f4", "float32", 4},
    {DType::F64, "<f8", "float64", 8},  {DType::I8, "|i1", "int8", 1},
    {DType::I16, "<i2", "int16", 2},    {DType::I32, "<i4", "int32", 4},
    {DType::I64, "<i8", "int64", 8},    {DType::U8, "|u1", "uint8", 1},
    {DType::U16, "<u2", "uint16", 2},   {DType::U32, "<u4", "uint32", 4},
    {DType::U64, "<u8", "uint64", 8},   {DType::Bool, "|b1", "bool", 1},
};

const DTypeInfo &info(DType t) {
  for (const DTypeInfo &i : kTypes)
    if (i.type == t)
      return i;
  return kTypes[1];
}

bool fail(std::string *error, const std::string &msg) {
  if (error)
    *error = msg;
  return false;
}

// Maps a descr string to a type. Accepts '<', '=' (native, little-endian
// here) and, for one-byte types, '|'.
bool parseDescr(const std::string &d, DType *out, std::string *error) {
  if (d.size() < 3)
    return fail(error, "unsupported dtype '" + d + "'");
  char order = d[0];
  std::string rest = d.substr(1);
  if (order == '>' || order == '!')
    return fail(error, "big-endian dtype '" + d +
                           "' is not supported: expected little-endian");
  if (order != '<' && order != '=' && order != '|')
    return fail(error, "unsupported dtype '" + d + "'");
  for (const DTypeInfo &i : kTypes) {
    if (rest != i.descr + 1)
      continue;
    if (order == '|' && i.size != 1)
      return fail(error, "unsupported dtype '" + d + "'");
    *out = i.type;
    return true;
  }
  return fail(error, "unsupported dtype '" + d + "'");
}

// Tokenizer and parser for the header dict.
class HeaderParser {
public:
  HeaderParser(const char *s, std::size_t n) : s_(s), n_(n) {}

  bool parse(Array *arr, bool *fortran, std::string *error) {
    bool haveDescr = false, haveOrder = false, haveShape = false;
    skipSpace();
    if (!eat('{'))
      return fail(error, "bad header: expected '{'");
    while (true) {
      skipSpace();
      if (eat('}'))
        break;
      std::string key;
      if (!readString(&key))
        return fail(error, "bad header: expected a quoted key");
      skipSpace();
      if (!eat(':'))
        return fail(error, "bad header: expected ':' after '" + key + "'");
      skipSpace();
      if (key == "descr") {
        if (haveDescr)
          return fail(error, "bad header: duplicate key 'descr'");
        haveDescr = true;
        std::string d;
        if (!readString(&d))
          return fail(error, "bad header: 'descr' must be a simple dtype "
                             "string (structured dtypes are not supported)");
        if (!parseDescr(d, &arr->dtype, error))
          return false;
      } else if (key == "fortran_order") {
        if (haveOrder)
          return fail(error, "bad header: duplicate key 'fortran_order'");
        haveOrder = true;
        if (eatWord("True"))
          *fortran = true;
        else if (eatWord("False"))
          *fortran = false;
        else
          return fail(error, "bad header: 'fortran_order' must be True or False");
      } else if (key == "shape") {
        if (haveShape)
          return fail(error, "bad header: duplicate key 'shape'");
        haveShape = true;
        if (!readShape(&arr->shape, error))
          return false;
      } else {
        return fail(error, "bad header: unexpected key '" + key + "'");
      }
      skipSpace();
      if (eat(','))
        continue;
      skipSpace();
      if (eat('}'))
        break;
      return fail(error, "bad header: expected ',' or '}'");
    }
    skipSpace();
    if (i_ != n_)
      return fail(error, "bad header: trailing characters after '}'");
    if (!haveDescr || !haveOrder || !haveShape)
      return fail(error, "bad header: expected keys 'descr', 'fortran_order' "
                         "and 'shape'");
    return true;
  }

private:
  void skipSpace() {
    while (i_ < n_ && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' ||
                       s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ < n_ && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool eatWord(const char *w) {
    std::size_t len = std::strlen(w);
    if (n_ - i_ < len || std::memcmp(s_ + i_, w, len) != 0)
      return false;
    std::size_t j = i_ + len;
    if (j < n_ && (std::isalnum((unsigned char)s_[j]) || s_[j] == '_'))
      return false;
    i_ = j;
    return true;
  }
  bool readString(std::string *out) {
    if (i_ >= n_ || (s_[i_] != '\'' && s_[i_] != '"'))
      return false;
    char quote = s_[i_++];
    std::size_t start = i_;
    while (i_ < n_ && s_[i_] != quote) {
      if (s_[i_] == '\\' || s_[i_] == '\n')
        return false; // escapes never occur in valid headers
      ++i_;
    }
    if (i_ >= n_)
      return false;
    out->assign(s_ + start, i_ - start);
    ++i_;
    return true;
  }
  bool readInt(int64_t *out) {
    std::size_t start = i_;
    uint64_t v = 0;
    while (i_ < n_ && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + uint64_t(s_[i_] - '0');
      if (v > kMaxBytes)
        return false;
      ++i_;
    }
    if (i_ == start)
      return false;
    if (i_ < n_ && s_[i_] == 'L') // Python 2 long suffix
      ++i_;
    *out = int64_t(v);
    return true;
  }
  bool readShape(std::vector<int64_t> *shape, std::string *error) {
    shape->clear();
    if (!eat('('))
      return fail(error, "bad header: 'shape' must be a tuple");
    while (true) {
      skipSpace();
      if (eat(')'))
        return true;
      if (i_ < n_ && s_[i_] == '-')
        return fail(error, "bad header: negative dimension in 'shape'");
      int64_t d;
      if (!readInt(&d))
        return fail(error, "bad header: 'shape' must hold non-negative "
                           "integers below 2^62");
      if (shape->size() >= 64)
        return fail(error, "bad header: more than 64 dimensions");
      shape->push_back(d);
      skipSpace();
      if (eat(','))
        continue;
      skipSpace();
      if (eat(')'))
        return true;
      return fail(error, "bad header: expected ',' or ')' in 'shape'");
    }
  }

  const char *s_;
  std::size_t n_;
  std::size_t i_ = 0;
};

// Parses the fixed preamble. On success sets the offset of the data.
// prefix must hold at least 12 bytes or the whole file if shorter.
bool parsePreamble(const unsigned char *p, std::size_t avail,
                   uint64_t *headerStart, uint64_t *headerLen,
                   std::string *error) {
  if (avail < 10)
    return fail(error, "truncated .npy file: " + std::to_string(avail) +
                           " bytes, shorter than the 10-byte preamble");
  if (std::memcmp(p, kMagic, 6) != 0)
    return fail(error, "not a .npy file: bad magic (expected \\x93NUMPY)");
  unsigned major = p[6];
  if (major == 1) {
    *headerLen = uint64_t(p[8]) | (uint64_t(p[9]) << 8);
    *headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (avail < 12)
      return fail(error, "truncated .npy file: preamble cut short");
    *headerLen = uint64_t(p[8]) | (uint64_t(p[9]) << 8) |
                 (uint64_t(p[10]) << 16) | (uint64_t(p[11]) << 24);
    *headerStart = 12;
  } else {
    return fail(error, "unsupported .npy format version " +
                           std::to_string(major) + ": expected 1, 2 or 3");
  }
  if (*headerLen > kMaxHeader)
    return fail(error, "bad .npy header: length " + std::to_string(*headerLen) +
                           " exceeds 1 MiB");
  return true;
}

// Parses the header text and checks the array size against the bytes left.
bool parseHeader(const char *h, std::size_t len, uint64_t dataBytes,
                 Array *out, std::string *error) {
  for (std::size_t i = 0; i < len; ++i)
    if ((unsigned char)h[i] >= 0x80 || h[i] == 0)
      return fail(error, "bad .npy header: non-ASCII byte");
  Array arr;
  bool fortran = false;
  HeaderParser parser(h, len);
  if (!parser.parse(&arr, &fortran, error))
    return false;
  // Size of the data, with overflow checks.
  uint64_t count = 1;
  bool zero = false;
  for (int64_t d : arr.shape) {
    if (d == 0)
      zero = true;
  }
  if (!zero) {
    for (int64_t d : arr.shape) {
      if (count > kMaxBytes / uint64_t(d))
        return fail(error, "bad .npy header: shape " + shape_str(arr.shape) +
                               " is too large");
      count *= uint64_t(d);
    }
  } else {
    count = 0;
  }
  std::size_t isz = item_size(arr.dtype);
  if (count > kMaxBytes / isz)
    return fail(error,
                "bad .npy header: shape " + shape_str(arr.shape) + " is too large");
  uint64_t need = count * isz;
  if (fortran && arr.shape.size() > 1) {
    // With at most one dimension > 1, F and C order hold the same bytes.
    int big = 0;
    for (int64_t d : arr.shape)
      big += d > 1;
    if (big > 1)
      return fail(error, "fortran_order arrays are not supported: expected "
                         "C order (use np.ascontiguousarray)");
  }
  if (dataBytes < need)
    return fail(error, "truncated .npy file: shape " + shape_str(arr.shape) +
                           " of " + name(arr.dtype) + " needs " +
                           std::to_string(need) + " data bytes, found " +
                           std::to_string(dataBytes));
  if (dataBytes > need)
    return fail(error, "corrupt .npy file: " +
                           std::to_string(dataBytes - need) +
                           " unexpected bytes after the data of shape " +
                           shape_str(arr.shape));
  *out = std::move(arr);
  return true;
}

} // namespace

std::size_t item_size(DType t) { return info(t).size; }
const char *descr(DType t) { return info(t).descr; }
const char *name(DType t) { return info(t).name; }

int64_t Array::count() const {
  int64_t c = 1;
  for (int64_t d : shape)
    c *= d;
  return c;
}

std::string shape_str(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

bool parse(const void *bytes, std::size_t size, Array *out,
           std::string *error) {
  const unsigned char *p = static_cast<const unsigned char *>(bytes);
  uint64_t start = 0, len = 0;
  if (!parsePreamble(p, size, &start, &len, error))
    return false;
  if (size - start < len)
    return fail(error, "truncated .npy file: header cut short");
  Array arr;
  if (!parseHeader(reinterpret_cast<const char *>(p + start), len,
                   size - start - len, &arr, error))
    return false;
  arr.data.assign(p + start + len, p + size);
  *out = std::move(arr);
  return true;
}

bool read_file(const std::string &path, Array *out, std::string *error) {
  // O_NONBLOCK: opening a FIFO (or a device) must not block; anything but a
  // regular file is rejected by the fstat below before a read.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return fail(error, errno == ENOENT ? "file not found"
                                       : std::string("cannot open: ") +
                                             std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail(error, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(error, "not a regular file");
  uint64_t size = uint64_t(st.st_size);

  auto readAll = [&](void *dst, uint64_t n) {
    unsigned char *d = static_cast<unsigned char *>(dst);
    while (n > 0) {
      ssize_t r = ::read(fd, d, n > (1u << 30) ? (1u << 30) : std::size_t(n));
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return false;
      d += r;
      n -= uint64_t(r);
    }
    return true;
  };

  unsigned char pre[12];
  uint64_t preLen = size < 12 ? size : 12;
  if (!readAll(pre, preLen))
    return fail(error, "read error");
  uint64_t start = 0, len = 0;
  if (!parsePreamble(pre, std::size_t(preLen), &start, &len, error))
    return false;
  if (size - start < len)
    return fail(error, "truncated .npy file: header cut short");
  std::string header(std::size_t(len), '\0');
  std::memcpy(&header[0], pre + start, std::size_t(preLen - start < len ? preLen - start : len));
  uint64_t have = preLen - start < len ? preLen - start : len;
  if (have < len && !readAll(&header[std::size_t(have)], len - have))
    return fail(error, "read error in header");
  Array arr;
  uint64_t dataBytes = size - start - len;
  if (!parseHeader(header.data(), header.size(), dataBytes, &arr, error))
    return false;
  // Bytes of the preamble buffer past the header (only for tiny headers).
  uint64_t consumed = preLen > start + len ? preLen - start - len : 0;
  arr.data.resize(std::size_t(dataBytes));
  if (consumed)
    std::memcpy(arr.data.data(), pre + start + len, std::size_t(consumed));
  if (!readAll(arr.data.data() + consumed, dataBytes - consumed))
    return fail(error, "read error in data (file changed while reading?)");
  *out = std::move(arr);
  return true;
}

} // namespace npy
} // namespace deltac
