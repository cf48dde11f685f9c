// deltac-tune --workers (workers.h): fork/exec one copy of the tuner per
// GPU, each with --worker=i/n and its own part file, then merge the parts.
#include "workers.h"

#include "deltac/autotune.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

namespace deltac::tune {
namespace {

namespace fs = std::filesystem;

// Worker i's report: "r.html" -> "r.worker<i>.html".
std::string reportOf(const std::string &report, int i) {
  const size_t dot = report.rfind('.');
  const std::string tag = ".worker" + std::to_string(i);
  return dot == std::string::npos ? report + tag
                                  : report.substr(0, dot) + tag + report.substr(dot);
}

// Part files of out in its directory, whatever worker count wrote them.
std::vector<std::string> partsOf(const std::string &out) {
  std::vector<std::string> found;
  const fs::path p(out);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string stem = p.filename().string() + ".part";
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > stem.size() + 5 && name.compare(0, stem.size(), stem) == 0 &&
        name.compare(name.size() - 5, 5, ".json") == 0 &&
        name.find_first_not_of("0123456789", stem.size()) == name.size() - 5)
      found.push_back(e.path().string());
  }
  return found;
}

// Merges out (if present) and every part into out, then removes the parts.
bool mergeParts(const std::string &out, std::string *error, size_t *records) {
  std::vector<TuningDB> dbs;
  std::vector<std::string> parts = partsOf(out);
  std::vector<std::string> inputs = parts;
  if (fs::exists(out))
    inputs.insert(inputs.begin(), out);
  for (const std::string &path : inputs) {
    TuningDB db;
    if (!load_tuning_db(path, &db, error))
      return false;
    dbs.push_back(std::move(db));
  }
  int dropped = 0;
  const TuningDB merged = merge(dbs, &dropped);
  *records = merged.records.size();
  if (inputs.empty())
    return true;
  if (!save_tuning_db(out, merged, error))
    return false;
  for (const std::string &p : parts)
    std::remove(p.c_str());
  return true;
}

// CUDA_VISIBLE_DEVICES for worker i: the i-th entry of the caller's list
// when it set one, else "i".
std::string deviceOf(int i) {
  const char *env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env || !*env)
    return std::to_string(i);
  std::string list = env;
  size_t start = 0;
  for (int k = 0; k < i; ++k) {
    start = list.find(',', start);
    if (start == std::string::npos)
      return "";
    ++start;
  }
  return list.substr(start, list.find(',', start) - start);
}

} // namespace

std::string part_path(const std::string &out, int i) {
  return out + ".part" + std::to_string(i) + ".json";
}

int run_workers(const char *self, const WorkerJob &job) {
  std::string error;
  size_t records = 0;
  // Parts a killed run left: fold them in before any worker starts, so
  // that every worker skips what they hold.
  if (!mergeParts(job.out, &error, &records)) {
    std::fprintf(stderr, "deltac-tune: %s (not overwritten: move it away or fix it)\n",
                 error.c_str());
    return 1;
  }
  std::vector<pid_t> pids;
  for (int i = 0; i < job.workers; ++i) {
    const std::string part = part_path(job.out, i);
    std::error_code ec;
    if (fs::exists(job.out) && !fs::copy_file(job.out, part, ec)) {
      std::fprintf(stderr, "deltac-tune: cannot seed %s from %s: %s\n", part.c_str(),
                   job.out.c_str(), ec.message().c_str());
      return 1;
    }
    std::vector<std::string> args = {self};
    args.insert(args.end(), job.args.begin(), job.args.end());
    args.push_back("--worker=" + std::to_string(i) + "/" + std::to_string(job.workers));
    args.push_back("--quiet");
    args.push_back("-o");
    args.push_back(part);
    if (!job.report.empty())
      args.push_back("--report=" + reportOf(job.report, i));
    const std::string dev = job.cuda ? deviceOf(i) : "";
    if (job.cuda && dev.empty()) {
      std::fprintf(stderr, "deltac-tune: CUDA_VISIBLE_DEVICES lists fewer than %d "
                   "devices\n", job.workers);
      return 1;
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "deltac-tune: fork: %s\n", std::strerror(errno));
      return 1;
    }
    if (pid == 0) {
      if (job.cuda)
        setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
      std::vector<char *> argv;
      for (std::string &a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(self, argv.data());
      std::fprintf(stderr, "deltac-tune: exec %s: %s\n", self, std::strerror(errno));
      _exit(127);
    }
    std::printf("deltac-tune: worker %d (pid %d%s%s) started\n", i, int(pid),
                job.cuda ? ", CUDA_VISIBLE_DEVICES=" : "", dev.c_str());
    pids.push_back(pid);
  }
  std::fflush(stdout);
  // Ctrl-C reaches the workers (same process group); this process stays to
  // merge what they finished.
  std::signal(SIGINT, SIG_IGN);
  int failed = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      if (WIFSIGNALED(status))
        std::fprintf(stderr, "deltac-tune: worker %zu killed by signal %d\n", i,
                     WTERMSIG(status));
      else
        std::fprintf(stderr, "deltac-tune: worker %zu failed (exit %d)\n", i,
                     WEXITSTATUS(status));
    }
  }
  std::signal(SIGINT, SIG_DFL);
  if (!mergeParts(job.out, &error, &records)) {
    std::fprintf(stderr, "deltac-tune: merging the workers' parts: %s (the parts "
                 "are kept)\n", error.c_str());
    return 1;
  }
  std::printf("deltac-tune: %d workers%s, database %s: %zu records\n", job.workers,
              failed ? " (some failed: their finished buckets are kept)" : "",
              job.out.c_str(), records);
  return failed ? 1 : 0;
}

} // namespace deltac::tune
