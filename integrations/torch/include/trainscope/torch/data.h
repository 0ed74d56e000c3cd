// trainscope/torch/data.h: LibTorch's own DataLoader, set up from one
// LoaderSettings and measured, so a program exposes {workers}, {prefetch}
// and {pin} to `trainscope tune loader` with three flags.
//
//   trainscope::LoaderSettings settings;          // from the program's flags
//   settings.workers = flags.workers;             // DataLoaderOptions::workers
//   settings.prefetch = flags.prefetch;           // max_jobs = workers x prefetch
//   settings.pin_memory = flags.pin;              // pinned on the workers (CUDA)
//   settings.batch_size = 64;
//   auto loader = trainscope::libtorch::MakeDataLoader(
//       *session, MyDataset().map(torch::data::transforms::Stack<>()), settings, device);
//   if (!loader.ok()) ...;                        // bad settings, said in one line
//   for (auto& [step, batch] : trainscope::libtorch::Steps(*session, **loader)) { ... }
//
// The loader is LibTorch's torch::data::StatelessDataLoader over the
// dataset wrapped in MeasuredDataset: each batch its workers make records
// "<name>.cpu_us" (the CPU time the dataset took on that worker) and, with
// pin_memory on a CUDA device, is pinned there (PinForDevice) so the copy
// to the device is asynchronous. Each fetch records "<name>.queue_depth",
// the batches made and not yet handed out (0: the consumer waited). The
// report's loaders.<name> has the settings and what the two counters say
// (Session::RecordLoader); counters.<name>.queue_depth.series the depth
// over time. Iterate it like LibTorch's loader, or through Steps() or
// Instrument() (loader.h) for the data-wait ranges.
#ifndef TRAINSCOPE_TORCH_DATA_H_
#define TRAINSCOPE_TORCH_DATA_H_

#include <torch/data.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainscope/recorder.h"
#include "trainscope/session.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/loader.h"

namespace trainscope::libtorch {

// LibTorch's options for `settings`: batch_size (at least 1), workers, and
// max_jobs = workers x max(1, prefetch), the batches in flight at once
// (LibTorch's own default is 2 x workers, as PyTorch's prefetch_factor of
// 2). With no workers max_jobs is 0, as LibTorch's default: its loader
// would otherwise queue that many batches for workers that do not exist
// and skip them. Cost: none.
inline torch::data::DataLoaderOptions DataLoaderOptionsFor(const LoaderSettings& settings) {
  const size_t workers = static_cast<size_t>(std::max(0, settings.workers));
  return torch::data::DataLoaderOptions()
      .batch_size(static_cast<size_t>(std::max<int64_t>(1, settings.batch_size)))
      .workers(workers)
      .max_jobs(workers * static_cast<size_t>(std::max(1, settings.prefetch)));
}

namespace detail {

// What the copies of a MeasuredDataset (one per LibTorch worker) share.
struct LoaderGauge {
  std::atomic<int64_t> made{0};  // batches the workers finished
  std::atomic<int> threads{0};   // workers named so far
  std::string name;
  NameId cpu_name = 0;
  NameId depth_name = 0;
  bool name_threads = false;  // false with 0 workers: the batches are made on the caller's thread
  bool pin = false;
  at::Device device = at::kCPU;
};

// Pins a batch's host tensors for `device` (PinForDevice) where its type
// is known: a tensor, Example<Tensor, Tensor>, or vectors of either.
template <typename Batch>
struct Pinnable : std::false_type {};
template <>
struct Pinnable<at::Tensor> : std::true_type {};
template <>
struct Pinnable<torch::data::Example<at::Tensor, at::Tensor>> : std::true_type {};
template <>
struct Pinnable<std::vector<at::Tensor>> : std::true_type {};
template <>
struct Pinnable<std::vector<torch::data::Example<at::Tensor, at::Tensor>>> : std::true_type {};

inline void PinBatch(std::vector<at::Tensor>& batch, const at::Device& device) {
  PinForDevice(batch, device);
}
inline void PinBatch(at::Tensor& batch, const at::Device& device) {
  std::vector<at::Tensor> one = {std::move(batch)};
  PinForDevice(one, device);
  batch = std::move(one[0]);
}
inline void PinBatch(torch::data::Example<at::Tensor, at::Tensor>& batch,
                     const at::Device& device) {
  std::vector<at::Tensor> two = {std::move(batch.data), std::move(batch.target)};
  PinForDevice(two, device);
  batch.data = std::move(two[0]);
  batch.target = std::move(two[1]);
}
inline void PinBatch(std::vector<torch::data::Example<at::Tensor, at::Tensor>>& batch,
                     const at::Device& device) {
  for (torch::data::Example<at::Tensor, at::Tensor>& example : batch) PinBatch(example, device);
}

}  // namespace detail

// `Dataset` (any LibTorch batch dataset: a Dataset, or one mapped with a
// transform) measured: get_batch runs the inner dataset's, pins the batch
// when asked, and records "<name>.cpu_us". Copies share one gauge, as
// LibTorch's workers each hold a copy. Cost per batch: two clock reads
// (system calls) and a counter, on the worker.
template <typename Dataset>
class MeasuredDataset
    : public torch::data::datasets::BatchDataset<MeasuredDataset<Dataset>,
                                                 typename Dataset::BatchType,
                                                 typename Dataset::BatchRequestType> {
 public:
  using Batch = typename Dataset::BatchType;
  using BatchRequest = typename Dataset::BatchRequestType;

  MeasuredDataset(Dataset inner, std::shared_ptr<detail::LoaderGauge> gauge)
      : inner_(std::move(inner)), gauge_(std::move(gauge)) {}

  Batch get_batch(BatchRequest request) override {
    if (gauge_->name_threads) {
      thread_local const detail::LoaderGauge* named_for = nullptr;
      if (named_for != gauge_.get()) {
        named_for = gauge_.get();
        NameThisThread(gauge_->name + "/" + std::to_string(gauge_->threads.fetch_add(1)));
      }
    }
    const int64_t before = detail::ThreadCpuUs();
    Batch batch = inner_.get_batch(std::move(request));
    if constexpr (detail::Pinnable<Batch>::value) {
      if (gauge_->pin) detail::PinBatch(batch, gauge_->device);
    }
    RecordCounter(gauge_->cpu_name, detail::ThreadCpuUs() - before);
    gauge_->made.fetch_add(1, std::memory_order_release);
    return batch;
  }

  std::optional<size_t> size() const override { return inner_.size(); }

 private:
  Dataset inner_;
  std::shared_ptr<detail::LoaderGauge> gauge_;
};

// LibTorch's StatelessDataLoader over MeasuredDataset<Dataset>, which
// records the queue's depth at each fetch. One consumer thread, as
// LibTorch's loader. Memory: LibTorch's (max_jobs batches in flight) and
// the gauge.
template <typename Dataset, typename Sampler>
class MeasuredLoader {
 public:
  using Inner = torch::data::StatelessDataLoader<MeasuredDataset<Dataset>, Sampler>;
  using Batch = typename Dataset::BatchType;

  MeasuredLoader(std::unique_ptr<Inner> inner, std::shared_ptr<detail::LoaderGauge> gauge,
                 int64_t max_jobs)
      : inner_(std::move(inner)), gauge_(std::move(gauge)), max_jobs_(max_jobs) {}

  class Sentinel {};

  class Iterator {
   public:
    Batch& operator*() { return *it_; }
    Batch* operator->() { return &*it_; }
    // Fetches the next batch (LibTorch waits for it here).
    Iterator& operator++() {
      loader_->RecordDepth();
      ++it_;
      at_end_ = it_ == end_;
      if (!at_end_) ++loader_->handed_out_;
      return *this;
    }
    bool operator==(const Sentinel&) const { return at_end_; }
    bool operator!=(const Sentinel&) const { return !at_end_; }

   private:
    friend class MeasuredLoader;
    explicit Iterator(MeasuredLoader* loader)
        : loader_(loader), it_(loader->inner_->begin()), end_(loader->inner_->end()) {
      loader_->RecordDepth();
      at_end_ = it_ == end_;  // where LibTorch's iterator fetches the first batch
      if (!at_end_) ++loader_->handed_out_;
    }
    MeasuredLoader* loader_;
    torch::data::Iterator<Batch> it_;
    torch::data::Iterator<Batch> end_;
    bool at_end_ = false;
  };

  // Starts an epoch (LibTorch's begin(): the previous one must be
  // finished) and fetches its first batch.
  Iterator begin() { return Iterator(this); }
  Sentinel end() { return Sentinel(); }
  // LibTorch's loader, for what this does not forward.
  Inner& inner() { return *inner_; }

 private:
  void RecordDepth() {
    const int64_t made = gauge_->made.load(std::memory_order_acquire);
    RecordCounter(gauge_->depth_name, std::clamp<int64_t>(made - handed_out_, 0, max_jobs_));
  }

  std::unique_ptr<Inner> inner_;
  std::shared_ptr<detail::LoaderGauge> gauge_;
  int64_t max_jobs_;
  int64_t handed_out_ = 0;  // batches the iterators handed out, all epochs
};

// LibTorch's DataLoader for `dataset` with `settings`
// (DataLoaderOptionsFor), measured, with its settings in `session`'s
// report (Session::RecordLoader, kind "torch::data::DataLoader";
// pin_memory as it applies: a CUDA `device`, a build with the CUDA paths
// and a batch type PinBatch knows). Batches are drawn by `Sampler` (LibTorch's default, random)
// sized from the dataset. Errors: InvalidArgument for negative settings
// or a batch_size below 1, ResourceExhausted past Report::kMaxLoaders;
// LibTorch's own exceptions (a dataset without a size) pass through.
// Cost: LibTorch's worker threads' start.
template <typename Sampler = torch::data::samplers::RandomSampler, typename Dataset>
absl::StatusOr<std::unique_ptr<MeasuredLoader<Dataset, Sampler>>> MakeDataLoader(
    Session& session, Dataset dataset, LoaderSettings settings,
    at::Device device = at::Device(at::kCPU)) {
  if (settings.batch_size < 1) {
    return absl::InvalidArgumentError("MakeDataLoader(" + settings.name + "): batch_size " +
                                      std::to_string(settings.batch_size) + " is below 1");
  }
  settings.kind = "torch::data::DataLoader";
  settings.pin_memory = settings.pin_memory && device.is_cuda() && BuiltWithCuda() &&
                        detail::Pinnable<typename Dataset::BatchType>::value;
  if (absl::Status s = session.RecordLoader(settings); !s.ok()) return s;
  auto gauge = std::make_shared<detail::LoaderGauge>();
  gauge->name = settings.name;
  gauge->cpu_name = InternName(settings.name + ".cpu_us");
  gauge->depth_name = InternName(settings.name + ".queue_depth");
  gauge->name_threads = settings.workers > 0;
  gauge->pin = settings.pin_memory;
  gauge->device = device;
  const torch::data::DataLoaderOptions options = DataLoaderOptionsFor(settings);
  auto inner = torch::data::make_data_loader<Sampler>(
      MeasuredDataset<Dataset>(std::move(dataset), gauge), options);
  return std::make_unique<MeasuredLoader<Dataset, Sampler>>(
      std::move(inner), std::move(gauge), static_cast<int64_t>(*options.max_jobs()));
}

}  // namespace trainscope::libtorch

#endif  // TRAINSCOPE_TORCH_DATA_H_
