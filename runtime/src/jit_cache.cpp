// The JIT's disk cache: the key, the file format (docs/jit.md), cubin_for().
#include "jit_internal.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef DELTAC_VERSION
#define DELTAC_VERSION "unknown"
#endif

namespace deltac::rt::jit {
namespace detail {

// ---- SHA-256 (FIPS 180-4) ------------------------------------------------

namespace {
const uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};
inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
} // namespace

Sha256::Sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
         0x5be0cd19} {}

void Sha256::block(const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 |
           uint32_t(p[4 * i + 2]) << 8 | uint32_t(p[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
           h = h_[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] +
                  w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g,
      h_[7] += h;
}

void Sha256::add(const void *data, size_t n) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  total_ += n;
  while (n > 0) {
    size_t take = std::min(n, sizeof buf_ - used_);
    std::memcpy(buf_ + used_, p, take);
    used_ += take, p += take, n -= take;
    if (used_ == sizeof buf_) {
      block(buf_);
      used_ = 0;
    }
  }
}

void Sha256::add_str(const std::string &s) {
  uint64_t n = s.size();
  add(&n, sizeof n);
  add(s.data(), s.size());
}

std::string Sha256::digest() {
  uint64_t bits = total_ * 8;
  unsigned char pad = 0x80;
  add(&pad, 1);
  pad = 0;
  while (used_ != 56)
    add(&pad, 1);
  unsigned char len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = (unsigned char)(bits >> (56 - 8 * i));
  add(len, 8);
  std::string out(32, '\0');
  for (int i = 0; i < 32; ++i)
    out[i] = char(h_[i / 4] >> (24 - 8 * (i % 4)));
  return out;
}

std::string hex(const std::string &bytes) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes)
    s += d[c >> 4], s += d[c & 15];
  return s;
}

Counters &counters() {
  static Counters c;
  return c;
}

namespace {

// ---- The key and the file ------------------------------------------------

const char kMagic[8] = {'D', 'L', 'T', 'C', 'J', 'I', 'T', '\0'};
const uint32_t kFormat = 1;

std::string key_of(const Program &prog, int cc, const Nvrtc &nv) {
  Sha256 s;
  s.add_str("deltac jit key " + std::to_string(kFormat));
  s.add_str(DELTAC_VERSION);
  s.add_str(std::to_string(nv.major) + "." + std::to_string(nv.minor));
  s.add_str(arch_of(cc));
  for (const std::string &o : options(cc))
    s.add_str(o);
  s.add_str(cuda_include().first);
  s.add_str(prog.name);
  s.add_str(prog.source);
  for (const std::string &k : prog.kernels)
    s.add_str(k);
  s.add_str(headers().digest);
  return s.digest();
}

void put32(std::string *o, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    *o += char(v >> (8 * i));
}
void put64(std::string *o, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    *o += char(v >> (8 * i));
}

std::string encode(const std::string &key, const Program &prog, const std::string &cubin,
                   const std::vector<std::string> &lowered) {
  std::string o(kMagic, sizeof kMagic);
  put32(&o, kFormat);
  o += key;
  put32(&o, uint32_t(prog.name.size()));
  o += prog.name;
  put32(&o, uint32_t(lowered.size()));
  for (const std::string &l : lowered) {
    put32(&o, uint32_t(l.size()));
    o += l;
  }
  put64(&o, cubin.size());
  o += cubin;
  Sha256 s;
  s.add(o.data(), o.size());
  return o + s.digest();
}

// A bounds-checked reader over the file's bytes.
struct Reader {
  const std::string &b;
  size_t at = 0, end;
  bool ok = true;
  bool take(size_t n, std::string *out) {
    if (!ok || n > end - at)
      return ok = false;
    if (out)
      out->assign(b, at, n);
    at += n;
    return true;
  }
  uint64_t num(int bytes) {
    std::string s;
    uint64_t v = 0;
    if (take(bytes, &s))
      for (int i = 0; i < bytes; ++i)
        v |= uint64_t((unsigned char)s[i]) << (8 * i);
    return v;
  }
};

// The cubin and lowered names in the bytes of a cache file, or false when
// it is not a whole, intact file of this format, key and program.
bool decode(const std::string &bytes, const std::string &key, const Program &prog,
            std::string *cubin, std::vector<std::string> *lowered) {
  if (bytes.size() < sizeof kMagic + 4 + 32 + 32)
    return false;
  Sha256 s;
  s.add(bytes.data(), bytes.size() - 32);
  if (s.digest() != bytes.substr(bytes.size() - 32))
    return false;
  Reader r{bytes, 0, bytes.size() - 32};
  std::string magic, k, name;
  r.take(sizeof kMagic, &magic);
  if (magic != std::string(kMagic, sizeof kMagic) || r.num(4) != kFormat)
    return false;
  r.take(32, &k);
  r.take(r.num(4), &name);
  if (!r.ok || k != key || name != prog.name)
    return false;
  uint64_t n = r.num(4);
  if (n != prog.kernels.size())
    return false;
  std::vector<std::string> names(n);
  for (auto &l : names)
    r.take(r.num(4), &l);
  std::string bin;
  r.take(r.num(8), &bin);
  if (!r.ok || r.at != r.end || bin.empty())
    return false;
  *cubin = std::move(bin);
  *lowered = std::move(names);
  return true;
}

std::string sys_error() { return std::strerror(errno); }

// The whole file at path; false (with *missing) when it does not exist.
bool read_file(const std::string &path, std::string *out, bool *missing) {
  *missing = false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT;
    return false;
  }
  out->clear();
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      return n == 0;
    }
    out->append(buf, size_t(n));
    if (out->size() > (size_t(1) << 31)) { // no cubin is 2 GiB
      ::close(fd);
      return false;
    }
  }
}

// mkdir -p; "" or why not.
std::string make_dirs(const std::string &dir) {
  for (size_t i = 1; i <= dir.size(); ++i)
    if (i == dir.size() || dir[i] == '/') {
      std::string d = dir.substr(0, i);
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST)
        return "cannot create " + d + ": " + sys_error();
    }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return dir + " is not a directory";
  return "";
}

// Writes bytes to path through a temporary file in the same directory and
// a rename (atomic: readers see the old file or the whole new one); "" or
// why not.
std::string write_file(const std::string &dir, const std::string &path,
                       const std::string &bytes) {
  std::string why = make_dirs(dir);
  if (!why.empty())
    return why;
  static std::atomic<unsigned> seq{0};
  std::string tmp = dir + "/.tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(seq++) + "." + path.substr(dir.size() + 1);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot create " + tmp + ": " + sys_error();
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      why = "cannot write " + tmp + ": " + sys_error();
      break;
    }
    done += size_t(n);
  }
  if (::close(fd) != 0 && why.empty())
    why = "cannot write " + tmp + ": " + sys_error();
  if (why.empty() && ::rename(tmp.c_str(), path.c_str()) != 0)
    why = "cannot rename " + tmp + " to " + path + ": " + sys_error();
  if (!why.empty())
    ::unlink(tmp.c_str());
  return why;
}

// Says once per process that the disk cache is not used, and why.
void note_no_cache(const std::string &why) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr,
                 "deltac: note: the JIT kernel cache is not used (%s); kernels are compiled "
                 "in every process (set DELTAC_JIT_CACHE to a writable directory, or off)\n",
                 why.c_str());
}

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

// name with every character but [A-Za-z0-9_.-] as '_', at most 96 long.
std::string file_safe(const std::string &name) {
  std::string s;
  for (char c : name.substr(0, 96))
    s += (isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-') ? c : '_';
  return s.empty() ? "program" : s;
}

std::string file_of(const Program &prog, int cc, const std::string &dir,
                    const std::string &key) {
  return dir + "/" + file_safe(prog.name) + "." + arch_of(cc) + "." + hex(key).substr(0, 16) +
         ".djit";
}

} // namespace
} // namespace detail

std::string cache_dir() {
  std::string v = detail::env("DELTAC_JIT_CACHE");
  if (v == "off")
    return "";
  if (!v.empty())
    return v;
  if (!detail::env("XDG_CACHE_HOME").empty())
    return detail::env("XDG_CACHE_HOME") + "/deltac/jit";
  if (!detail::env("HOME").empty())
    return detail::env("HOME") + "/.cache/deltac/jit";
  return "";
}

std::string cache_file(const Program &prog, int cc, const std::string &dir) {
  try {
    const detail::Nvrtc *nv = detail::nvrtc(nullptr);
    if (!nv)
      return "";
    return detail::file_of(prog, cc, dir, detail::key_of(prog, cc, *nv));
  } catch (...) {
    return "";
  }
}

bool cubin_for(const Program &prog, int cc, std::string *cubin,
               std::vector<std::string> *lowered, std::string *error) {
  std::string dummy;
  if (!error)
    error = &dummy;
  try {
    const detail::Nvrtc *nv = detail::nvrtc(error);
    if (!nv)
      return false;
    std::string dir = cache_dir(), path, key;
    if (!dir.empty()) {
      while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
      key = detail::key_of(prog, cc, *nv);
      path = detail::file_of(prog, cc, dir, key);
      std::string bytes, bin;
      std::vector<std::string> names;
      bool missing = false;
      if (detail::read_file(path, &bytes, &missing) &&
          detail::decode(bytes, key, prog, &bin, &names)) {
        ++detail::counters().disk_hits;
        if (cubin)
          *cubin = std::move(bin);
        if (lowered)
          *lowered = std::move(names);
        return true;
      }
      if (!missing)
        ++detail::counters().disk_rejects;
    }
    std::string bin;
    std::vector<std::string> names;
    if (!compile(prog, cc, &bin, &names, error))
      return false;
    if (!dir.empty()) {
      std::string why = detail::write_file(dir, path, detail::encode(key, prog, bin, names));
      if (!why.empty())
        detail::note_no_cache(why);
    }
    if (cubin)
      *cubin = std::move(bin);
    if (lowered)
      *lowered = std::move(names);
    return true;
  } catch (const std::exception &e) {
    *error = "jit: " + prog.name + ": " + e.what();
    return false;
  }
}

Stats stats() {
  detail::Counters &c = detail::counters();
  Stats s;
  s.compiles = c.compiles;
  s.disk_hits = c.disk_hits;
  s.memory_hits = c.memory_hits;
  s.disk_rejects = c.disk_rejects;
  return s;
}

} // namespace deltac::rt::jit
