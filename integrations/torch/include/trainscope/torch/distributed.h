// trainscope/torch/distributed.h: torch.distributed (c10d) with timed
// collectives.
//
//   trainscope::libtorch::DistributedOptions d;
//   d.rank = rank; d.world_size = 3; d.store_path = "out/run/c10d.store";
//   absl::StatusOr<std::unique_ptr<trainscope::libtorch::ProcessGroup>> group =
//       trainscope::libtorch::ProcessGroup::Create(d, &session);
//   ...
//   if (absl::Status s = (*group)->AverageGradients(*model); !s.ok()) { /* a rank died */ }
//
// The transport is c10d's own: ProcessGroupGloo on CPU, ProcessGroupNCCL for
// CUDA tensors when LibTorch has it. Each collective is a kSync range
// ("c10d.allreduce", "c10d.barrier"), so every rank's report has its sync
// wait per step and `trainscope ranks DIR` can name the straggler. A rank
// that dies does not hang the others: collectives time out after
// DistributedOptions::timeout (sooner when the peer's socket closes), the
// survivors find out which ranks are gone through the store and note them in
// their reports (report.distributed.missing_ranks).
#ifndef TRAINSCOPE_TORCH_DISTRIBUTED_H_
#define TRAINSCOPE_TORCH_DISTRIBUTED_H_

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/checkpoint.h"
#include "trainscope/session.h"

namespace trainscope::libtorch {

// How the ranks meet and talk.
struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  // A c10d FileStore at this path when set (all ranks on one machine or a
  // shared filesystem; remove a stale file before a new run). Otherwise a
  // TCPStore that rank 0 hosts at master_addr:master_port.
  std::string store_path;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // The address of this machine that Gloo binds and the other ranks reach
  // (127.0.0.1 when every rank is on this machine).
  std::string host = "127.0.0.1";
  // How long a collective (and the rendezvous) waits before it fails.
  std::chrono::milliseconds timeout{60000};
  // "gloo", "nccl", or "auto": NCCL when `device` is CUDA and LibTorch has
  // NCCL, else Gloo.
  std::string backend = "auto";
  at::Device device = at::kCPU;
};

// One process group. Collectives are blocking and return a Status; no
// exception escapes. Not thread-safe: call from the training thread.
class ProcessGroup {
 public:
  // Rendezvous with the other ranks. Errors: InvalidArgument for a bad rank,
  // world size or backend; Unimplemented for NCCL in a build without it;
  // DeadlineExceeded / Unavailable when the others do not arrive within the
  // timeout (with c10d's message). `session` (may be null) gets the backend
  // and, after a failure, the missing ranks; it may be moved afterwards.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> Create(const DistributedOptions& options,
                                                              Session* session);
  // Shuts the backend down (c10d's normal exit: NCCL destroys its
  // communicators); an error there is one line on stderr, never thrown.
  ~ProcessGroup();

  // Sums `tensors` across ranks in place (a kSync range). Under NCCL the
  // host only enqueues (the range measures that), so the collective is also
  // timed on the device: CUDA events around it on the current stream, read
  // without blocking at the next collective (and at Session::Finish or the
  // group's end), added to the step's sync_ms (Session::AddStepSyncTime),
  // which the straggler report reads. Gloo blocks the host: its range is
  // the time. With CUDA tensors Gloo first waits for the current stream
  // (all the compute queued before the call), so AllReduce synchronises
  // that stream beforehand in its own range ("c10d.device_sync", phase
  // other): the sync range then holds the copies to and from the host and
  // the exchange, the wait for the slowest rank included, not the queued
  // compute. Several tensors of one dtype and device are reduced as one
  // flattened tensor (a copy of them all, then copied back); tensors of
  // mixed dtypes or devices go one collective each. Errors: Unavailable
  // with the rank's view of who is missing when a peer died or timed out
  // (c10d's distributed errors, the transport's); InvalidArgument, at once,
  // for a call c10d refuses (an undefined or sparse tensor, a dtype or
  // device the backend does not take).
  absl::Status AllReduce(std::vector<at::Tensor>& tensors);
  // Averages the gradients of `module` across ranks: one flattened
  // all-reduce per call. Errors as AllReduce.
  absl::Status AverageGradients(::torch::nn::Module& module);
  // Waits for every rank (a kSync range); under NCCL on `device` (the
  // current device when it has no index). Errors as AllReduce.
  absl::Status Barrier();

  // A SaveCoordinator over this group, for CheckpointStore::SaveSharded:
  // each round is one all-reduce of a flag per rank (a kCheckpoint range,
  // "c10d.checkpoint_vote"); a dead or late rank makes it fail with the
  // missing ranks, as AllReduce does. The group must outlive it.
  std::unique_ptr<SaveCoordinator> MakeSaveCoordinator();

  // After a failed collective: the ranks that did not check in through the
  // store within `wait` (each survivor checks in, then looks for the
  // others). Cost: up to `wait`.
  std::vector<int> FindMissingRanks(std::chrono::milliseconds wait);

  int rank() const;
  int world_size() const;
  const std::string& backend_name() const;

 private:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  // Under Gloo, waits for the current stream of each CUDA device among
  // `tensors` (range "c10d.device_sync"). Throws what LibTorch throws.
  void SyncBeforeGloo(const std::vector<at::Tensor>& tensors);
  // One tensor, one collective (timed on the device under NCCL). Throws
  // what c10d throws.
  void AllReduceOne(at::Tensor& tensor);
  // The Status for a collective's exception: InvalidArgument for a usage
  // error, else Unavailable naming the missing ranks (noted in the session).
  absl::Status Failed(const char* what, const std::exception& error);
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_DISTRIBUTED_H_
