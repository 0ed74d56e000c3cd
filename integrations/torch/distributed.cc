// c10d process groups with timed collectives. See trainscope/torch/distributed.h.
//
// ProcessGroupGloo.hpp includes gloo's headers, which the torch wheel does
// not ship (it has torch/csrc/distributed/c10d but no include/gloo): the
// declarations come from Debian's libgloo-dev. Only declarations are used;
// the Gloo code that runs is the one inside libtorch_cpu. docs/distributed.md.
#include "trainscope/torch/distributed.h"

#include <torch/torch.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if TRAINSCOPE_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif
#if TRAINSCOPE_TORCH_NCCL
#include <ATen/cuda/CUDAEvent.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "trainscope/scope.h"
#include "trainscope/torch/internal/collectives.h"
#include "trainscope/torch/internal/device_index.h"
#include "trainscope/torch/internal/device_timings.h"

namespace trainscope::libtorch {

namespace detail {

bool IsPeerFailure(const std::exception& error) {
  if (dynamic_cast<const c10::DistError*>(&error) != nullptr) return true;
  return dynamic_cast<const c10::Error*>(&error) == nullptr;
}

bool NcclBlockingWait(const std::function<const char*(const char*)>& getenv) {
  for (const char* name : {"TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"}) {
    const char* value = getenv(name);
    if (value == nullptr) continue;
    std::string text(value);
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text == "1" || text == "true" || text == "yes" || text == "y" || text == "t";
  }
  return false;
}

}  // namespace detail

struct ProcessGroup::Impl {
  DistributedOptions options;
  std::optional<Session> session;  // borrowed: valid when the caller's Session moves
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::string backend_name;
  int64_t collectives = 0;
#if TRAINSCOPE_TORCH_NCCL
  // NCCL: each collective between two timing events on the current stream,
  // read at the next collective (or Finish, or the group's end) without
  // blocking the step, and added to its step's sync time in the session.
  struct Events {
    std::shared_ptr<at::cuda::CUDAEvent> start, end;
  };
  detail::DeviceTimings<Events> timings{256};
  int finish_hook = 0;
  bool device_timed = false;  // decided once, in the constructor
  // Set from Create: NCCL, a session, and no blocking wait (wait() then
  // blocks the host, and the kSync range is the collective's time already).
  void DecideDeviceTiming() {
    device_timed = backend_name == "nccl" && session.has_value() &&
                   !detail::NcclBlockingWait([](const char* name) { return std::getenv(name); });
    // Their times come steps late: the session's rows wait for them.
    if (device_timed) session->ExpectStepSyncTimes();
  }
  // A CUDA error while timing turns the timing off; the collective and the
  // run go on (it is not a dead peer).
  template <typename Fn>
  void Guarded(Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      device_timed = false;
      std::fprintf(stderr, "trainscope: NCCL collective timing off: %s\n", e.what());
    }
  }
  std::optional<Events> BeginTimed() {
    std::optional<Events> events;
    if (!device_timed) return events;
    Guarded([&] {
      Poll(/*wait=*/false);
      Events e{std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault),
               std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault)};
      e.start->record(c10::cuda::getCurrentCUDAStream(options.device.index()));
      events = std::move(e);
    });
    return events;
  }
  void EndTimed(std::optional<Events> events) {
    if (!events || !device_timed) return;
    Guarded([&] {
      events->end->record(c10::cuda::getCurrentCUDAStream(options.device.index()));
      timings.Add(CurrentStep(), std::move(*events));
    });
  }
  // Hands the finished collectives' times to the session. With `wait`
  // (Finish, the group's end), first waits up to 2 s for the others: a
  // collective hung on a dead peer must not hold up the report; what is
  // still running then is left out. Never throws.
  void Poll(bool wait) {
    if (!device_timed && timings.pending() == 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    Guarded([&] {
      while (true) {
        timings.Poll(
            [&](const Events& e) -> std::optional<double> {
              if (!e.end->query()) return std::nullopt;
              return e.start->elapsed_time(*e.end) / 1e3;
            },
            [&](int64_t step, double seconds) {
              if (step >= 0) session->AddStepSyncTime(step, seconds);
            });
        if (!wait || timings.pending() == 0 || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
#endif
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
#if TRAINSCOPE_TORCH_NCCL
  impl_->DecideDeviceTiming();
  if (impl_->device_timed) {
    Impl* raw = impl_.get();
    impl_->finish_hook = impl_->session->AddFinishHook([raw] { raw->Poll(/*wait=*/true); });
  }
#endif
}

ProcessGroup::~ProcessGroup() {
#if TRAINSCOPE_TORCH_NCCL
  if (impl_->finish_hook != 0) impl_->session->RemoveFinishHook(impl_->finish_hook);
  impl_->Poll(/*wait=*/true);
#endif
  // A normal exit for the backend (NCCL destroys its communicators; Gloo
  // has nothing to do): without it c10d warns that the group was never
  // destroyed. Never throws out of a destructor.
  try {
    impl_->backend->shutdown();
  } catch (const std::exception& e) {
    std::string message = e.what();
    if (const size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
    std::fprintf(stderr, "trainscope: c10d %s shutdown on rank %d: %s\n",
                 impl_->backend_name.c_str(), impl_->options.rank, message.c_str());
  }
}

int ProcessGroup::rank() const { return impl_->options.rank; }
int ProcessGroup::world_size() const { return impl_->options.world_size; }
const std::string& ProcessGroup::backend_name() const { return impl_->backend_name; }

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Create(
    const DistributedOptions& options, Session* session) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError("ProcessGroup: need 0 <= rank < world_size, got rank " +
                                      std::to_string(options.rank) + " of " +
                                      std::to_string(options.world_size));
  }
  std::string backend = options.backend;
  if (backend == "auto")
    backend = options.device.is_cuda() && TRAINSCOPE_TORCH_NCCL ? "nccl" : "gloo";
  if (backend != "gloo" && backend != "nccl") {
    return absl::InvalidArgumentError("ProcessGroup: backend '" + backend +
                                      "' is not gloo, nccl or auto");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (session != nullptr) impl->session.emplace(trainscope::internal::BorrowSession(*session));
  impl->backend_name = backend;
  try {
    if (!options.store_path.empty()) {
      impl->store = c10::make_intrusive<c10d::FileStore>(options.store_path, options.world_size);
    } else {
      c10d::TCPStoreOptions tcp;
      tcp.port = static_cast<uint16_t>(options.master_port);
      tcp.isServer = options.rank == 0;
      tcp.numWorkers = options.world_size;
      tcp.timeout = options.timeout;
      impl->store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, tcp);
    }
    impl->store->setTimeout(options.timeout);
    if (backend == "gloo") {
      auto gloo = c10d::ProcessGroupGloo::Options::create();
      gloo->timeout = options.timeout;
      gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options.host));
      impl->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, options.rank,
                                                                  options.world_size, gloo);
    } else {
#if TRAINSCOPE_TORCH_NCCL
      auto nccl = c10d::ProcessGroupNCCL::Options::create();
      nccl->timeout = options.timeout;
      impl->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, options.rank,
                                                                  options.world_size, nccl);
#else
      return absl::UnimplementedError(
          "ProcessGroup: this build of trainscope::torch has no NCCL (LibTorch without CUDA, or "
          "no nccl.h); use backend gloo");
#endif
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError("ProcessGroup: rank " + std::to_string(options.rank) + " of " +
                                  std::to_string(options.world_size) +
                                  " could not join: " + e.what());
  }
  if (session != nullptr) session->SetDistributedBackend(backend);
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

absl::Status ProcessGroup::Failed(const char* what, const std::exception& error) {
  std::string message = error.what();
  if (const size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
  if (!detail::IsPeerFailure(error)) {  // c10d refused the call: no rank is to blame
    return absl::InvalidArgumentError(std::string("c10d ") + what + " #" +
                                      std::to_string(impl_->collectives) + " on rank " +
                                      std::to_string(impl_->options.rank) + ": " + message);
  }
  const std::vector<int> missing =
      FindMissingRanks(std::min(impl_->options.timeout, std::chrono::milliseconds(5000)));
  std::string names;
  for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
  const std::string status_text =
      std::string("c10d ") + what + " #" + std::to_string(impl_->collectives) + " failed on rank " +
      std::to_string(impl_->options.rank) +
      " (missing ranks: " + (names.empty() ? "none found" : names) + "): " + message;
  if (impl_->session.has_value()) impl_->session->NoteMissingRanks(missing, status_text);
  return absl::UnavailableError(status_text);
}

std::vector<int> ProcessGroup::FindMissingRanks(std::chrono::milliseconds wait) {
  const auto key = [](int r) { return "trainscope/alive/" + std::to_string(r); };
  std::vector<int> missing;
  try {
    impl_->store->set(key(impl_->options.rank), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (true) {
      missing.clear();
      for (int r = 0; r < impl_->options.world_size; ++r) {
        if (r != impl_->options.rank && !impl_->store->check({key(r)})) missing.push_back(r);
      }
      if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception&) {
    // The store itself is gone (its host, rank 0 for a TCPStore, died):
    // every other rank is unaccounted for.
    missing.clear();
    for (int r = 0; r < impl_->options.world_size; ++r) {
      if (r != impl_->options.rank) missing.push_back(r);
    }
  }
  return missing;
}

void ProcessGroup::AllReduceOne(at::Tensor& tensor) {
  std::vector<at::Tensor> one = {tensor};
#if TRAINSCOPE_TORCH_NCCL
  auto timed = impl_->BeginTimed();
  impl_->backend->allreduce(one)->wait();
  impl_->EndTimed(std::move(timed));
#else
  impl_->backend->allreduce(one)->wait();
#endif
}

void ProcessGroup::SyncBeforeGloo(const std::vector<at::Tensor>& tensors) {
#if TRAINSCOPE_TORCH_CUDA
  if (impl_->backend_name != "gloo") return;
  static const NameId name = InternName("c10d.device_sync");
  std::optional<PhaseScope> range;
  std::vector<c10::DeviceIndex> done;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.is_cuda()) continue;
    const c10::DeviceIndex index = t.device().index();
    if (std::find(done.begin(), done.end(), index) != done.end()) continue;
    if (!range) range.emplace(Phase::kOther, name);
    c10::cuda::getCurrentCUDAStream(index).synchronize();
    done.push_back(index);
  }
#else
  static_cast<void>(tensors);
#endif
}

absl::Status ProcessGroup::AllReduce(std::vector<at::Tensor>& tensors) {
  try {
    SyncBeforeGloo(tensors);
  } catch (const std::exception& e) {  // a CUDA error of earlier work, not a peer's
    std::string message = e.what();
    if (const size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
    return absl::InternalError("c10d allreduce: device sync before the collective: " + message);
  }
  static const NameId name = InternName("c10d.allreduce");
  PhaseScope sync(Phase::kSync, name);
  ++impl_->collectives;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.is_sparse()) {
      return absl::InvalidArgumentError("c10d allreduce #" + std::to_string(impl_->collectives) +
                                        ": every tensor must be defined and dense");
    }
  }
  // c10d all-reduces one tensor per call (NCCL checks it; Gloo would add a
  // list together): several of one dtype and device go as one flat tensor,
  // others one at a time.
  const bool flat =
      tensors.size() > 1 && std::all_of(tensors.begin(), tensors.end(), [&](const at::Tensor& t) {
        return t.scalar_type() == tensors[0].scalar_type() && t.device() == tensors[0].device();
      });
  try {
    if (flat) {
      std::vector<at::Tensor> views;
      for (const at::Tensor& t : tensors) views.push_back(t.reshape({-1}));
      at::Tensor all = at::cat(views);
      AllReduceOne(all);
      int64_t offset = 0;
      for (at::Tensor& t : tensors) {
        t.copy_(all.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    } else {
      for (at::Tensor& t : tensors) AllReduceOne(t);
    }
  } catch (const std::exception& e) {
    return Failed("allreduce", e);
  }
  return absl::OkStatus();
}

absl::Status ProcessGroup::AverageGradients(::torch::nn::Module& module) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : module.parameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return absl::OkStatus();
  if (absl::Status status = AllReduce(grads); !status.ok()) return status;
  at::_foreach_div_(grads, at::Scalar(static_cast<int64_t>(impl_->options.world_size)));
  return absl::OkStatus();
}

namespace {

class GroupSaveCoordinator : public SaveCoordinator {
 public:
  explicit GroupSaveCoordinator(ProcessGroup* group, std::function<absl::Status(at::Tensor&)> vote)
      : group_(group), vote_(std::move(vote)) {}
  absl::StatusOr<std::vector<int>> FailedRanks(bool failed) override {
    at::Tensor flags = at::zeros({group_->world_size()}, at::kInt);
    flags[group_->rank()] = failed ? 1 : 0;
    if (absl::Status status = vote_(flags); !status.ok()) return status;
    std::vector<int> out;
    const at::Tensor host = flags.to(at::kCPU);
    for (int r = 0; r < group_->world_size(); ++r) {
      if (host[r].item<int>() != 0) out.push_back(r);
    }
    return out;
  }

 private:
  ProcessGroup* group_;
  std::function<absl::Status(at::Tensor&)> vote_;
};

}  // namespace

std::unique_ptr<SaveCoordinator> ProcessGroup::MakeSaveCoordinator() {
  return std::make_unique<GroupSaveCoordinator>(this, [this](at::Tensor& flags) {
    static const NameId name = InternName("c10d.checkpoint_vote");
    PhaseScope vote(Phase::kCheckpoint, name);
    ++impl_->collectives;
    std::vector<at::Tensor> tensors = {impl_->options.device.is_cuda() &&
                                               impl_->backend_name == "nccl"
                                           ? flags.to(impl_->options.device)
                                           : flags};
    try {
      impl_->backend->allreduce(tensors)->wait();
    } catch (const std::exception& e) {
      return Failed("checkpoint vote", e);
    }
    flags.copy_(tensors[0].to(at::kCPU));
    return absl::OkStatus();
  });
}

absl::Status ProcessGroup::Barrier() {
  static const NameId name = InternName("c10d.barrier");
  PhaseScope sync(Phase::kSync, name);
  ++impl_->collectives;
  // NCCL needs the device to run its barrier on (without one it guesses
  // from the rank, and warns); Gloo takes none.
  c10d::BarrierOptions barrier;
  try {
#if TRAINSCOPE_TORCH_NCCL
    if (impl_->backend_name == "nccl") {
      barrier.device_ids = {detail::ResolveDeviceIndex(impl_->options.device,
                                                       [] { return c10::cuda::current_device(); })};
    }
#endif
    impl_->backend->barrier(barrier)->wait();  // blocks the host under NCCL too: host timing
  } catch (const std::exception& e) {
    return Failed("barrier", e);
  }
  return absl::OkStatus();
}

}  // namespace trainscope::libtorch
