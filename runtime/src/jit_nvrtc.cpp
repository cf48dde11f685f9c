// The JIT's compiler half: NVRTC loaded with dlopen (never linked, so every
// binary starts without it), the compile options and compile().
#include "jit_internal.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>

#ifndef DELTAC_CUDA_INCLUDE_DIR
#define DELTAC_CUDA_INCLUDE_DIR ""
#endif
#ifndef DELTAC_CUDA_LIBRARY_DIR
#define DELTAC_CUDA_LIBRARY_DIR ""
#endif

namespace deltac::rt::jit {
namespace detail {
namespace {

std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// dlopen + dlsym of every entry point; nullptr with *why on failure.
std::unique_ptr<Nvrtc> open_nvrtc(const std::string &lib, std::string *why) {
  void *h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = ::dlerror();
    *why = e ? e : "dlopen failed";
    return nullptr;
  }
  auto nv = std::make_unique<Nvrtc>();
  bool ok = true;
  auto sym = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
    if (!fn && ok) {
      *why = lib + " has no " + name;
      ok = false;
    }
  };
  sym(nv->GetErrorString, "nvrtcGetErrorString");
  sym(nv->Version, "nvrtcVersion");
  sym(nv->CreateProgram, "nvrtcCreateProgram");
  sym(nv->DestroyProgram, "nvrtcDestroyProgram");
  sym(nv->CompileProgram, "nvrtcCompileProgram");
  sym(nv->GetCUBINSize, "nvrtcGetCUBINSize");
  sym(nv->GetCUBIN, "nvrtcGetCUBIN");
  sym(nv->GetProgramLogSize, "nvrtcGetProgramLogSize");
  sym(nv->GetProgramLog, "nvrtcGetProgramLog");
  sym(nv->AddNameExpression, "nvrtcAddNameExpression");
  sym(nv->GetLoweredName, "nvrtcGetLoweredName");
  if (ok && (nv->Version(&nv->major, &nv->minor) != 0 || nv->major < 12)) {
    *why = lib + " is NVRTC " + std::to_string(nv->major) + "." +
           std::to_string(nv->minor) + "; deltac needs 12 or newer";
    ok = false;
  }
  if (!ok) {
    ::dlclose(h);
    return nullptr;
  }
  nv->library = lib; // the handle stays open for the process
  // NVRTC dlopens libnvrtc-builtins by soname; loaded from a directory off
  // the loader's path, load the one beside it first (a later dlopen of the
  // soname finds it).
  size_t slash = lib.rfind('/');
  if (slash != std::string::npos)
    ::dlopen((lib.substr(0, slash + 1) + "libnvrtc-builtins.so." + std::to_string(nv->major) +
              "." + std::to_string(nv->minor))
                 .c_str(),
             RTLD_NOW | RTLD_GLOBAL);
  return nv;
}

// The libraries to try: DELTAC_NVRTC alone when set, else the sonames
// (the loader's search path), then the toolkit's lib64 directories.
std::vector<std::string> candidates() {
  std::string forced = env("DELTAC_NVRTC");
  if (!forced.empty())
    return {forced};
  std::vector<std::string> c = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (std::string dir : {env("CUDA_HOME").empty() ? std::string() : env("CUDA_HOME") + "/lib64",
                          std::string(DELTAC_CUDA_LIBRARY_DIR),
                          std::string("/usr/local/cuda/lib64")})
    if (!dir.empty())
      for (const char *so : {"libnvrtc.so.13", "libnvrtc.so.12"})
        c.push_back(dir + "/" + so);
  return c;
}

} // namespace

const Nvrtc *nvrtc(std::string *why) {
  static std::mutex mu;
  // Per DELTAC_NVRTC value: the table, or why it failed.
  static std::map<std::string, std::pair<std::unique_ptr<Nvrtc>, std::string>> loaded;
  std::string forced = env("DELTAC_NVRTC");
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(forced);
  if (it == loaded.end()) {
    std::unique_ptr<Nvrtc> nv;
    std::string first;
    for (const std::string &lib : candidates()) {
      std::string w;
      nv = open_nvrtc(lib, &w);
      if (nv)
        break;
      if (first.empty())
        first = w;
    }
    std::string msg;
    if (!nv)
      msg = forced.empty()
                ? "NVRTC (libnvrtc.so.13 or .12, CUDA 12 or newer) was not found (" + first +
                      "); install the CUDA toolkit's NVRTC or set DELTAC_NVRTC to its path"
                : "NVRTC could not be loaded from DELTAC_NVRTC=" + forced + " (" + first +
                      "); set DELTAC_NVRTC to the path of libnvrtc.so (CUDA 12 or newer)";
    it = loaded.emplace(forced, std::make_pair(std::move(nv), msg)).first;
  }
  if (!it->second.first && why)
    *why = it->second.second;
  return it->second.first.get();
}

std::string arch_of(int cc) {
  // 90 gets the arch-specific target: the kernels use sm_90a-only
  // instructions (wgmma, setmaxnreg) under __CUDA_ARCH__ checks.
  return "sm_" + std::to_string(cc) + (cc == 90 ? "a" : "");
}

std::vector<std::string> options(int cc) {
  return {"-std=c++17", "--gpu-architecture=" + arch_of(cc), "-default-device",
          "-DDELTAC_JIT=1"};
}

std::pair<std::string, std::string> cuda_include() {
  std::string forced = env("DELTAC_CUDA_INCLUDE");
  if (!forced.empty())
    return {forced, "DELTAC_CUDA_INCLUDE"};
  std::pair<std::string, std::string> c[] = {
      {env("CUDA_HOME").empty() ? "" : env("CUDA_HOME") + "/include", "CUDA_HOME"},
      {DELTAC_CUDA_INCLUDE_DIR, "the build's CUDA toolkit"},
      {"/usr/local/cuda/include", "the default"}};
  for (const auto &d : c)
    if (!d.first.empty() && exists(d.first + "/cuda_fp16.h"))
      return d;
  return c[2];
}

const Headers &headers() {
  // On the heap and never moved: name_ptrs / text_ptrs point into it.
  static const Headers *h = [] {
    auto *r = new Headers;
    Sha256 sha;
    for (const EmbeddedHeader *e = kEmbeddedHeaders; e->name; ++e) {
      std::string text;
      for (const char *const *p = e->pieces; *p; ++p)
        text += *p;
      sha.add_str(e->name);
      sha.add_str(text);
      r->names.push_back(e->name);
      r->texts.push_back(std::move(text));
    }
    for (size_t i = 0; i < r->names.size(); ++i) {
      r->name_ptrs.push_back(r->names[i].c_str());
      r->text_ptrs.push_back(r->texts[i].c_str());
    }
    r->digest = sha.digest();
    return r;
  }();
  return *h;
}

namespace {

// The first lines of an NVRTC log on one line: at most 8 lines that are
// not blank or only a caret, joined by " | ", at most 1500 characters.
std::string head_of(const std::string &log) {
  std::string out, line;
  int lines = 0;
  auto flush = [&] {
    if (line.find_first_not_of(" \t^\r") != std::string::npos && lines < 8) {
      size_t b = line.find_first_not_of(" \t");
      out += (lines++ ? " | " : "") + line.substr(b);
    }
    line.clear();
  };
  for (char c : log) {
    if (c == '\0')
      break;
    if (c == '\n')
      flush();
    else
      line += c;
  }
  flush();
  if (out.size() > 1500)
    out = out.substr(0, 1500) + " ...";
  return out;
}

} // namespace
} // namespace detail

bool available(std::string *why) {
  try {
    std::string w;
    const detail::Nvrtc *nv = detail::nvrtc(&w);
    if (why)
      *why = nv ? nv->library + " (NVRTC " + std::to_string(nv->major) + "." +
                      std::to_string(nv->minor) + ")"
                : w;
    return nv != nullptr;
  } catch (const std::exception &e) {
    if (why)
      *why = std::string("jit: ") + e.what();
    return false;
  }
}

bool compile(const Program &prog, int cc, std::string *cubin,
             std::vector<std::string> *lowered, std::string *error) {
  std::string dummy;
  if (!error)
    error = &dummy;
  if (cc < 50 || cc > 999) {
    *error = "jit: compute capability " + std::to_string(cc) + " of " + prog.name +
             " is not one NVRTC targets (50 to 999: 90 for sm_90a)";
    return false;
  }
  const detail::Nvrtc *nv = detail::nvrtc(error);
  if (!nv)
    return false;
  try {
    const detail::Headers &h = detail::headers();
    auto [inc, inc_from] = detail::cuda_include();
    std::vector<std::string> opts = detail::options(cc);
    opts.push_back("-I" + inc);
    std::vector<const char *> optp;
    for (const std::string &o : opts)
      optp.push_back(o.c_str());
    const std::string what = prog.name + " for " + detail::arch_of(cc);

    detail::Nvrtc::Prog p = nullptr;
    int r = nv->CreateProgram(&p, prog.source.c_str(), (prog.name + ".cu").c_str(),
                              int(h.names.size()), h.text_ptrs.data(), h.name_ptrs.data());
    if (r != 0) {
      *error = "NVRTC could not create the program " + what + ": " + nv->GetErrorString(r);
      return false;
    }
    struct Destroy { // p, on every path below
      const detail::Nvrtc *nv;
      detail::Nvrtc::Prog *p;
      ~Destroy() { nv->DestroyProgram(p); }
    } destroy{nv, &p};
    for (const std::string &k : prog.kernels)
      if ((r = nv->AddNameExpression(p, k.c_str())) != 0) {
        *error = "NVRTC refused the kernel name " + k + " of " + what + ": " +
                 nv->GetErrorString(r);
        return false;
      }
    ++detail::counters().compiles;
    int cr = nv->CompileProgram(p, int(optp.size()), optp.data());
    size_t log_size = 0;
    std::string log;
    if (nv->GetProgramLogSize(p, &log_size) == 0 && log_size > 1) {
      log.resize(log_size);
      if (nv->GetProgramLog(p, &log[0]) != 0)
        log.clear();
    }
    if (cr != 0) {
      *error = "NVRTC could not compile " + what + " (NVRTC " + std::to_string(nv->major) +
               "." + std::to_string(nv->minor) + ", CUDA headers from " + inc + " via " +
               inc_from + "): " + detail::head_of(log);
      if (log.find("cannot open source file") != std::string::npos)
        *error += " (a CUDA header missing: set DELTAC_CUDA_INCLUDE to the CUDA toolkit's "
                  "include directory)";
      return false;
    }
    std::vector<std::string> names;
    for (const std::string &k : prog.kernels) {
      const char *low = nullptr;
      if ((r = nv->GetLoweredName(p, k.c_str(), &low)) != 0 || !low) {
        *error = "NVRTC has no lowered name for the kernel " + k + " of " + what +
                 " (is it a __global__ function template instantiated by that expression?)";
        return false;
      }
      names.push_back(low);
    }
    size_t size = 0;
    std::string bin;
    if ((r = nv->GetCUBINSize(p, &size)) == 0 && size > 0) {
      bin.resize(size);
      r = nv->GetCUBIN(p, &bin[0]);
    }
    if (r != 0 || bin.empty()) {
      *error = "NVRTC produced no cubin for " + what + (r ? std::string(": ") +
               nv->GetErrorString(r) : std::string());
      return false;
    }
    if (cubin)
      *cubin = std::move(bin);
    if (lowered)
      *lowered = std::move(names);
    return true;
  } catch (const std::exception &e) {
    *error = "jit: compiling " + prog.name + " failed: " + e.what();
    return false;
  }
}

} // namespace deltac::rt::jit
