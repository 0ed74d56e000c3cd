// Real LibTorch training loops as users write them: range-for
// loops over a torch::data DataLoader whose dataset is slow, and a file that
// says `using namespace trainscope;` and still names `torch::` plainly.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sdk/export/steps_file.h"
#include "tests/test_util.h"
#include "trainscope/torch/amp.h"
#include "trainscope/torch/device.h"
#include "trainscope/torch/distributed.h"
#include "trainscope/torch/loader.h"
#include "trainscope/torch/state.h"
#include "trainscope/torch/torch.h"
#include "trainscope/trainscope.h"

// What users write at the top of a training file. The adapters are in
// trainscope::libtorch, not trainscope::torch, so that `using namespace
// trainscope;` leaves every torch:: below unambiguous.
using namespace trainscope;

namespace {

using trainscope::testing::TempDir;

constexpr int kWaitMs = 10;  // each example takes at least this long to load

// How long each get() took, in call order: a loaded machine oversleeps, so
// the tests compare the waits with these, not with kWaitMs.
std::vector<double>& GetMs() {
  static std::vector<double> ms;
  return ms;
}

// A dataset whose get() sleeps, like a slow decoder: with workers(0) the
// wait happens on the training thread, inside the iterator.
class SlowDataset : public torch::data::datasets::Dataset<SlowDataset> {
 public:
  explicit SlowDataset(int64_t size) : size_(size) {}
  torch::data::Example<> get(size_t index) override {
    const auto begin = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(kWaitMs));
    GetMs().push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
            .count());
    return {torch::full({2}, static_cast<float>(index)), torch::zeros({1})};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(size_); }

 private:
  int64_t size_;
};

Options QuietOptions(const std::string& dir) {
  Options options = trainscope::testing::QuietOptions(dir, "torch-loop-test");
  options.warmup_steps = 0;
  return options;
}

using trainscope::testing::FindCounter;
using trainscope::testing::FindPhase;

auto SlowLoader(int64_t examples, int64_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      SlowDataset(examples).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size).workers(0));
}

TEST(StepsLoopTest, EveryStepIncludingTheFirstCarriesItsOwnInputWait) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  GetMs().clear();
  auto loader = SlowLoader(/*examples=*/10, /*batch_size=*/2);  // 5 batches an epoch
  torch::nn::Linear model(2, 1);
  int64_t global = 0;
  std::vector<int64_t> seen;
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto steps = libtorch::Steps(*session, *loader, StepIndex(global));
    for (auto& [step, batch] : steps) {
      step.set_samples(Samples(batch.data.size(0)));
      seen.push_back(step.index());
      EXPECT_EQ(batch.data[0][0].item<float>(), 2.0f * (seen.size() - 1 - 5 * epoch))
          << "batches in order";
      PhaseScope forward(Phase::kForward);
      torch::Tensor loss = model(batch.data).sum();
    }
    global = steps.next_index();
  }
  EXPECT_EQ(global, 10);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}))
      << "one step a batch, no step for the fetch that found the end";
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();

  absl::StatusOr<std::vector<Report::Step>> rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 10u);
  ASSERT_EQ(GetMs().size(), 20u) << "two examples a step";
  for (const Report::Step& row : *rows) {
    // Its own two examples, waited for inside this step: the first step of
    // each epoch too, and the last one does not carry the wait of a batch
    // past the end (two more examples, at least 2 x kWaitMs).
    const auto i = static_cast<size_t>(row.index);
    const double own = GetMs()[2 * i] + GetMs()[2 * i + 1];
    EXPECT_GE(row.data_wait_ms, 0.99 * own) << "step " << row.index;
    EXPECT_LT(row.data_wait_ms, own + kWaitMs) << "step " << row.index;
    EXPECT_EQ(row.samples, 2);
    EXPECT_GE(row.duration_ms, row.data_wait_ms);
  }
  const PhaseStat* wait = FindPhase(*report, "data_wait");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->steps, 10) << "the phase table sees the wait in every step";
  EXPECT_GE(wait->median_ms, 2 * kWaitMs * 0.9);
  const Report::Counter* batch = FindCounter(*report, "loader.batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->samples, 10) << "a batch counted once, none past the end";
  EXPECT_EQ(batch->max, 4) << "the batch index within its epoch";
}

TEST(StepsLoopTest, AnEmptyLoaderRecordsNoStep) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<int> nothing;
  auto steps = libtorch::Steps(*session, nothing, StepIndex(7));
  for (auto& [step, value] : steps) ADD_FAILURE() << "no batch, no body: " << value;
  EXPECT_EQ(steps.next_index(), 7);
  EXPECT_EQ(CurrentStep(), -1) << "the probing step is closed";
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->timing.steps, 0);
}

TEST(StepsLoopTest, AThrowingBodyClosesItsStep) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<int> values{1, 2, 3};
  try {
    for (auto& [step, value] : libtorch::Steps(*session, values)) {
      if (value == 2) throw std::runtime_error("bad batch");
    }
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(CurrentStep(), -1);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->timing.steps, 2) << "step 0 and the step that threw";
}

TEST(InstrumentTest, TheFirstFetchIsTimedAndNothingIsCountedPastTheEnd) {
  TempDir dir;
  absl::StatusOr<Session> session = Session::Start(QuietOptions(dir.path()));
  ASSERT_TRUE(session.ok()) << session.status();
  auto loader = SlowLoader(/*examples=*/6, /*batch_size=*/1);
  int64_t n = 0;
  // Managing steps by hand: each step opens before its fetch (begin() for
  // the first, ++ after), so every wait lands in its step; the step that
  // finds the end is discarded.
  auto batches = libtorch::Instrument(*loader);
  std::optional<decltype(batches.begin())> it;
  while (true) {
    StepScope step(*session, StepIndex(n), Samples(1));
    if (it.has_value()) {
      ++*it;
    } else {
      it.emplace(batches.begin());
    }
    if (*it == batches.end()) {
      step.Discard();
      break;
    }
    ++n;
  }
  EXPECT_EQ(n, 6);
  absl::StatusOr<Report> report = session->Finish();
  ASSERT_TRUE(report.ok()) << report.status();
  const Report::Counter* batch = FindCounter(*report, "loader.batch");
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->samples, 6) << "six batches, none past the end";
  EXPECT_EQ(batch->max, 5);
  absl::StatusOr<std::vector<Report::Step>> rows = exporter::ReadStepsFile(dir.File("steps.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 6u) << "no row for the step that found the end";
  for (const Report::Step& row : *rows) {
    EXPECT_GE(row.data_wait_ms, kWaitMs * 0.9)
        << "step " << row.index << ": the fetch is a timed wait";
  }
}

// The names users reach for with `using namespace trainscope;` in scope.
TEST(NamespaceTest, TorchNamesStayUnambiguous) {
  torch::Tensor t = torch::ones({2, 2});
  torch::nn::Linear layer(2, 2);
  torch::optim::SGD sgd(layer->parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_EQ(layer(t).sizes(), (std::vector<int64_t>{2, 2}));
  libtorch::AutocastGuard guard(torch::kCPU, torch::kBFloat16);
  EXPECT_EQ(torch::matmul(t, t).scalar_type(), torch::kBFloat16);
}

}  // namespace
