// `trainscope tune amp|batch|loader -- COMMAND`: the guide's tuning
// decisions as experiments on the user's own program. Each builds an
// ExperimentSpec from the user's command, whose placeholders
// ({precision}, {batch}, {lr}, {workers}, ...) each variant fills
// (VariantSpec::values), and the engine (experiment.h) runs it: fresh
// processes in randomised blocks, the verdict beyond the noise, the
// configuration kept with the experiment that justified it.
// docs/experiments.md, "Tuning your own program", is the guide; "The trial
// contract" says what the program must record.
//
// Memory: what the engine keeps (experiment.h), plus for the batch probe
// O(probes) = O(log2(max_batch / min_batch) + 3) records and for the
// loader O(settings) rows; nothing per step.
#ifndef TRAINSCOPE_SDK_TUNING_TUNE_H_
#define TRAINSCOPE_SDK_TUNING_TUNE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/tuning/experiment.h"

namespace trainscope::tuning {

// What every subcommand takes.
struct TuneOptions {
  std::string subcommand;            // "amp", "batch", "loader": names it in messages
  std::vector<std::string> command;  // the user's program and its arguments, with placeholders
  int repeats = 0;                   // per variant; 0: the subcommand's default
  double trial_timeout_s = 600;
  double threshold = 0.02;
  uint64_t seed = 1;
};

// The placeholders of a command: each "{name}" whose name is a lower-case
// identifier, once each, in order of first appearance. Cost: one pass.
std::vector<std::string> Placeholders(const std::vector<std::string>& command);

// Checks the user's command before anything runs: it is not empty; every
// placeholder is one of `required`, `optional` or the engine's {out} and
// {repeat}; each of `required` appears; the program (argv[0], looked up on
// PATH when it has no '/') exists and is executable. Errors:
// InvalidArgument, one line naming what is wrong, the placeholder and the
// fix ("tune amp: the command has no {precision}: ...").
absl::Status CheckCommand(const TuneOptions& options, const std::vector<std::string>& required,
                          const std::vector<std::string>& optional);

// ---- amp -------------------------------------------------------------

struct AmpOptions {
  std::string baseline = "fp32";        // {precision} of the baseline
  std::vector<std::string> precisions;  // the variants' {precision}; a repeat of the
                                        // baseline's is an A/A variant named "<p>-aa"
  int64_t curve_window = 10;            // steps a window of the curve check
};

// fp32 against each precision, by time to target, each trial's loss curve
// (Session::RecordLoss's loss.jsonl) held against the fp32 seeds' noise
// band: a variant that is faster but trains differently is rolled back.
// {repeat} is the seed. Default repeats: the fewest with which the rank
// test can accept (MinimumRepeats), at least 5. Errors: CheckCommand's;
// InvalidArgument for no precisions or repeats too few (CheckSpec).
absl::StatusOr<ExperimentSpec> AmpSpec(const TuneOptions& options, const AmpOptions& amp);

// ---- batch -----------------------------------------------------------

struct BatchOptions {
  int64_t min_batch = 64;               // the probe's first size
  int64_t max_batch = 1 << 20;          // the probe stops doubling here
  int64_t base_batch = 256;             // the experiment's baseline
  int sizes = 3;                        // powers of two from base_batch that fit, at most
  std::string lr_rule = "none";         // none, linear, sqrt
  double base_lr = 0.001;               // {lr} at base_batch
  int64_t budget_mb = 0;                // {memory_mb}: the memory cap a probe passes on; 0: none
  double margin = 0.1;                  // probes run under (1 - margin) x budget_mb
  std::vector<std::string> probe_args;  // appended to a probe's command (e.g. --steps=3)
  bool serve = false;                   // serving: p99 latency per maximum {batch}
  std::vector<int64_t> serve_sizes = {1, 8, 64};
};

// One probe: a fresh process of the command with {batch} (and {memory_mb})
// set, and what its report said.
struct BatchProbe {
  int64_t batch = 0;
  bool fits = false;
  std::string why;  // "fits", "out of memory: <the program's message>", "timed out"
};

// The largest batch that fits: powers of two from min_batch until one runs
// out of memory (the report's failure, Session::RecordOutOfMemory; a
// probe that times out counts as too big), then a binary search between
// the last that fit and the first that did not, to an eighth of the
// former. Each probe is a fresh process writing under `dir`/b<batch>.
// Returns the largest that fit (0: none) with every probe in `probes`.
// Errors: FailedPrecondition naming the batch and the probe's log when a
// probe failed for another reason (an exit code without an out-of-memory
// record: a crash, not a size), or was stopped (Cancelled).
absl::StatusOr<int64_t> ProbeLargestBatch(const TuneOptions& options, const BatchOptions& batch,
                                          const std::string& dir, std::vector<BatchProbe>* probes,
                                          const std::atomic<bool>* stop = nullptr);

// The learning rate of `batch` by the rule: base_lr x (batch / base_batch)
// (linear), x its square root (sqrt), or base_lr (none).
double ScaledLr(const BatchOptions& batch, int64_t size);

// Training: the sizes that fit, powers of two from base_batch up to
// `largest` (at most batch.sizes), each with {lr} by the rule, by time to
// target, sequential; the probes in the notes. Serving: each of
// serve_sizes as {batch}, by p99 latency. Errors: InvalidArgument when
// fewer than two sizes fit, or from CheckSpec.
absl::StatusOr<ExperimentSpec> BatchSpec(const TuneOptions& options, const BatchOptions& batch,
                                         int64_t largest, const std::vector<BatchProbe>& probes);

// The sizes ranked by the objective (a size that never reached the target
// last), then by resource-hours per accepted result, never by samples/s;
// or, serving, their latency percentiles. A table of lines.
std::string BatchTable(const ExperimentSpec& spec, const ExperimentResult& result);

// ---- loader ----------------------------------------------------------

struct LoaderOptions {
  std::vector<int> workers = {0, 1, 2, 4};  // {workers}
  std::vector<int> prefetch = {2};          // {prefetch}, when the command has it
  std::vector<int> pin = {0};               // {pin} (0: off, 1: on), when the command has it
  // --objective as given, looked up (objectives.h) by LoaderSpec:
  // time_to_target or steady_samples_per_s.
  std::string objective = "time_to_target";
  int64_t max_rss_mb = 0;  // a setting past it is rejected; 0: no limit
};

// Every worker count x prefetch depth x pinning ({prefetch} and {pin}
// only when the command has them) as a variant "w<W>p<P>" (or "w<W>"),
// "-pin" added where {pin} is 1 among several, the least first: the
// baseline. Errors: CheckCommand's, or InvalidArgument for an empty or
// negative list, a {pin} other than 0 or 1, or from CheckSpec.
absl::StatusOr<ExperimentSpec> LoaderSpec(const TuneOptions& options, const LoaderOptions& loader);

// A setting's row in the loader's table.
struct LoaderRow {
  std::string variant;
  int workers = 0, prefetch = 0;
  bool pin = false;
  int trials = 0, failures = 0;
  double objective = 0;        // median over trials (failures the worst)
  double data_wait_share = 0;  // median
  double cpu_s = 0;            // median CPU seconds of the process
  double peak_rss_mb = 0;      // median of the reports' peak memory, MiB (0: unknown)
  bool accepted = false;       // the verdict: beyond the noise against the baseline
  std::string rejected;        // why it cannot be the knee; "" when it can
};

// The knee: the smallest setting (fewest workers, then shallowest
// prefetch, then unpinned) whose median objective is within the threshold of the best
// eligible setting's; not the largest that helps. Eligible: the baseline,
// and each setting the verdict accepted whose failures are no more than
// the baseline's, whose peak memory is within max_rss_mb, and whose
// interval is no wider than its gain (else: "unstable").
struct LoaderKnee {
  std::vector<LoaderRow> rows;  // in the spec's order
  int knee = 0;                 // index into rows
  int best = 0;                 // the best eligible setting
  std::string reason;           // one sentence
};
LoaderKnee FindKnee(const ExperimentSpec& spec, const ExperimentResult& result,
                    const LoaderOptions& loader);

// The table and the knee's sentence.
std::string LoaderTable(const ExperimentSpec& spec, const LoaderKnee& knee);

// The sentence comparing the knee and the gain without co-load and with
// it. The gain is what the best setting adds over the baseline in the
// objective's units (samples/s, or seconds to target saved), since extra
// workers on a shared host take their CPU from the other jobs: the ratio
// to a baseline that is slowed too can grow while the work won shrinks.
// ("the knee stays at w2 under co-load; the best gain shrank by 35%
// (+7351 samples/s quiet, +4801 samples/s co-loaded; 1.96x and 2.17x each
// sweep's own baseline): ..."). `objective` is the sweeps': its
// direction and unit.
std::string CoLoadVerdict(const LoaderKnee& quiet, const LoaderKnee& loaded, ObjectiveId objective);

// The loader's knee as JSON ("<output>-knee.json"): the objective, each
// setting's row, the knee and the best, the sentence; with co-load, the
// same for the co-loaded sweep and `verdict` (CoLoadVerdict).
std::string KneeJson(const ExperimentSpec& spec, const LoaderKnee& quiet, const LoaderKnee* loaded,
                     const std::string& verdict);

// Contending work on this machine, for the whole of a sweep: `cpu` busy
// threads (one process each) and `io` processes each writing 4 MiB to a
// scratch file, syncing it and reading it back, in a loop.
struct CoLoad {
  int cpu = 0;
  int io = 0;
  bool any() const { return cpu > 0 || io > 0; }
};
// Parses "cpu=N,io=M" (either may be left out). Errors: InvalidArgument
// naming the part.
absl::StatusOr<CoLoad> ParseCoLoad(std::string_view text);

// Starts the processes at construction (in `scratch_dir`), kills them
// (SIGKILL) and waits at destruction; they die with this process too
// (PR_SET_PDEATHSIG), however it ends. `status()` says what could not
// start.
class CoLoadProcesses {
 public:
  CoLoadProcesses(const CoLoad& load, const std::string& scratch_dir);
  ~CoLoadProcesses();
  CoLoadProcesses(const CoLoadProcesses&) = delete;
  CoLoadProcesses& operator=(const CoLoadProcesses&) = delete;
  const absl::Status& status() const { return status_; }
  int running() const { return static_cast<int>(pids_.size()); }

 private:
  std::vector<pid_t> pids_;
  std::string scratch_;
  absl::Status status_;
};

}  // namespace trainscope::tuning

#endif  // TRAINSCOPE_SDK_TUNING_TUNE_H_
