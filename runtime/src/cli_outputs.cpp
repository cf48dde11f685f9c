// `deltac run`: the output directory and writing o.npy and ht.npy together.
#include "cli_internal.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>

namespace deltac {
namespace cli {
namespace {

// An existing output path must be a file (or a link) that rename() can
// replace; a directory there would make a rename fail.
void expectReplaceable(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
      !S_ISLNK(st.st_mode))
    fail(path + ": exists and is not a regular file: expected a file to "
                "replace (remove it)");
}

// mkdir -p.
void makeDirs(const std::string &dir) {
  std::size_t i = 0;
  while (i <= dir.size()) {
    std::size_t j = dir.find('/', i);
    if (j == std::string::npos)
      j = dir.size();
    const std::string cur = dir.substr(0, j);
    if (!cur.empty() && !exists(cur) && ::mkdir(cur.c_str(), 0755) != 0 &&
        errno != EEXIST)
      fail(cur + ": cannot create directory: " + std::strerror(errno));
    i = j + 1;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail(dir + ": not a directory");
}

} // namespace

std::string join_path(const std::string &dir, const std::string &name) {
  if (!dir.empty() && dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void check_output_paths(const Options &opt) {
  struct stat st;
  if (::stat(opt.outputs.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail(opt.outputs + ": exists and is not a directory (--outputs)");
  expectReplaceable(join_path(opt.outputs, "o.npy"));
  expectReplaceable(join_path(opt.outputs, "ht.npy"));
  if (opt.chunkStates)
    expectReplaceable(join_path(opt.outputs, "chunk_states.npy"));
}

void write_outputs(const Options &opt, const deltac_fwd_params &p,
                   const std::vector<float> &o, const std::vector<float> &ht,
                   const std::vector<float> &cs, int64_t chunks) {
  makeDirs(opt.outputs);
  check_output_paths(opt); // again: the directory may have changed
  std::vector<npy::OutFile> files = {
      {join_path(opt.outputs, "o.npy"), npy::DType::F32, o_shape(p), o.data()},
      {join_path(opt.outputs, "ht.npy"), npy::DType::F32, state_shape(p), ht.data()}};
  if (opt.chunkStates) {
    std::vector<int64_t> shape = state_shape(p);
    shape[0] = chunks;
    files.push_back({join_path(opt.outputs, "chunk_states.npy"), npy::DType::F32, shape,
                     cs.data()});
  }
  std::string err;
  if (!npy::write_files(files, &err))
    fail(err);
}

} // namespace cli
} // namespace deltac
