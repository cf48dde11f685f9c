// deltac-tune --workers: one tuning process per GPU (docs/autotune.md).
#ifndef DELTAC_TUNE_WORKERS_H
#define DELTAC_TUNE_WORKERS_H

#include <string>
#include <vector>

namespace deltac::tune {

struct WorkerJob {
  int workers = 1;        // processes to start
  bool cuda = false;      // worker i sees only GPU i (CUDA_VISIBLE_DEVICES)
  std::string out;        // the database the workers' parts merge into
  std::string report;     // "" or FILE.html / FILE.svg: one per worker
  std::vector<std::string> args; // this run's flags, without -o, --report, --workers
};

// The database worker i writes while it runs: "<out>.part<i>.json".
std::string part_path(const std::string &out, int i);

// Starts job.workers copies of this program (worker i tunes buckets i,
// i + workers, ...), waits for them, and merges their parts into job.out,
// first folding in parts a killed earlier run left behind. SIGINT stops the
// workers, not the merge: what finished is kept. Returns the exit status.
int run_workers(const char *self, const WorkerJob &job);

} // namespace deltac::tune

#endif // DELTAC_TUNE_WORKERS_H
