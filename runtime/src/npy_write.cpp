// .npy writing: encoding, atomic single files (temporary file + rename) and
// files that appear together (write_files).
#include "deltac/npy.h"

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

bool fail(std::string *error, const std::string &msg) {
  if (error)
    *error = msg;
  return false;
}

} // namespace

std::string encode(DType t, const std::vector<int64_t> &shape,
                   const void *data) {
  std::string dict = std::string("{'descr': '") + descr(t) +
                     "', 'fortran_order': False, 'shape': " + shape_str(shape) +
                     ", }";
  // Pad so that the data starts on a 64-byte boundary; the header ends in \n.
  std::size_t pre = 10;
  std::size_t total = pre + dict.size() + 1;
  unsigned major = 1;
  if (((total + 63) / 64) * 64 - pre > 0xffff) {
    major = 2;
    pre = 12;
    total = pre + dict.size() + 1;
  }
  std::size_t padded = (total + 63) / 64 * 64;
  std::size_t hlen = padded - pre;
  dict.append(hlen - dict.size() - 1, ' ');
  dict += '\n';

  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::size_t bytes = std::size_t(count) * item_size(t);

  std::string out;
  out.reserve(padded + bytes);
  out.append(reinterpret_cast<const char *>(kMagic), 6);
  out += char(major);
  out += char(0);
  out += char(hlen & 0xff);
  out += char((hlen >> 8) & 0xff);
  if (major == 2) {
    out += char((hlen >> 16) & 0xff);
    out += char((hlen >> 24) & 0xff);
  }
  out += dict;
  if (bytes)
    out.append(static_cast<const char *>(data), bytes);
  return out;
}

bool write_temp(const std::string &path, DType t,
                const std::vector<int64_t> &shape, const void *data,
                std::string *tmp_path, std::string *error) {
  std::string bytes = encode(t, shape, data);
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> name(tmp.begin(), tmp.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    return fail(error, std::string("cannot create: ") + std::strerror(errno));
  std::size_t off = 0;
  bool ok = true;
  while (off < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    off += std::size_t(w);
  }
  int err = errno;
  // mkstemp creates 0600; outputs get the usual permissions (best effort).
  if (ok)
    (void)::fchmod(fd, 0644);
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(name.data());
    return fail(error, std::string("cannot write: ") + std::strerror(err));
  }
  *tmp_path = name.data();
  return true;
}

bool commit(const std::string &tmp_path, const std::string &path,
            std::string *error) {
  if (::rename(tmp_path.c_str(), path.c_str()) == 0)
    return true;
  int err = errno;
  ::unlink(tmp_path.c_str());
  return fail(error, std::string("cannot write: ") + std::strerror(err));
}

namespace {

// A hard link to path's current file (so it can be put back), or "" when
// there is none (or the file system cannot link: then nothing can be put
// back and a failed commit removes the new file only).
std::string keepOld(const std::string &path, const std::string &tmp) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return "";
  const std::string old = tmp + ".old";
  return ::link(path.c_str(), old.c_str()) == 0 ? old : "";
}

} // namespace

bool write_files(const std::vector<OutFile> &files, std::string *error,
                 RenameFn rename_fn) {
  if (!rename_fn)
    rename_fn = ::rename;
  std::vector<std::string> tmps, olds;
  auto cleanup = [&](std::size_t from) {
    for (std::size_t i = from; i < tmps.size(); ++i)
      ::unlink(tmps[i].c_str());
    for (const std::string &o : olds)
      if (!o.empty())
        ::unlink(o.c_str());
  };
  for (const OutFile &f : files) {
    std::string tmp, err;
    if (!write_temp(f.path, f.dtype, f.shape, f.data, &tmp, &err)) {
      cleanup(0);
      return fail(error, f.path + ": " + err);
    }
    tmps.push_back(tmp);
  }
  for (std::size_t i = 0; i < files.size(); ++i)
    olds.push_back(keepOld(files[i].path, tmps[i]));
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (rename_fn(tmps[i].c_str(), files[i].path.c_str()) == 0)
      continue;
    const int err = errno;
    for (std::size_t j = 0; j < i; ++j) { // put back what was renamed
      if (olds[j].empty() || ::rename(olds[j].c_str(), files[j].path.c_str()))
        ::unlink(files[j].path.c_str());
      olds[j].clear();
    }
    cleanup(i);
    return fail(error, files[i].path + ": cannot write: " +
                           std::strerror(err) +
                           " (no output was changed)");
  }
  cleanup(files.size());
  return true;
}

bool write_file(const std::string &path, DType t,
                const std::vector<int64_t> &shape, const void *data,
                std::string *error) {
  std::string tmp;
  return write_temp(path, t, shape, data, &tmp, error) &&
         commit(tmp, path, error);
}

} // namespace npy
} // namespace deltac
