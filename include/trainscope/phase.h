// trainscope/phase.h: the standard phases of a training step.
//
// Every recorded range belongs to one Phase. The phase decides the NVTX
// category and color of the range, and how the analysis attributes idle time:
// a GPU (or compute) gap during kDataWait is blamed on input, during kSync on
// synchronisation, and so on.
//
//   trainscope::PhaseScope wait(trainscope::Phase::kDataWait);
//   auto batch = loader.next();
#ifndef TRAINSCOPE_PHASE_H_
#define TRAINSCOPE_PHASE_H_

#include <cstdint>
#include <string_view>

namespace trainscope {

// The phases of a step. The numeric values are stable: they are stored in
// events, used as NVTX category ids (value + 1) and as name ids.
enum class Phase : uint8_t {
  kDataWait = 0,      // waiting for the next batch from the input pipeline
  kHostToDevice = 1,  // copying a batch to the accelerator
  kForward = 2,
  kBackward = 3,
  kOptimizer = 4,
  kSync = 5,        // device synchronisation or a collective
  kCheckpoint = 6,  // saving or restoring state
  kEval = 7,        // evaluation inside the training loop
  kOther = 8,       // anything else; the default for custom ranges
};

// Number of phases; valid values are 0 .. kPhaseCount - 1.
inline constexpr int kPhaseCount = 9;

namespace internal {
// PhaseName's and PhaseColor's tables. At namespace scope: a table local
// to the function would be built on the stack at every call (about 250
// instructions a steps.jsonl row).
inline constexpr std::string_view kPhaseNames[kPhaseCount] = {
    "data_wait", "h2d", "forward", "backward", "optimizer", "sync", "checkpoint", "eval", "other"};
inline constexpr uint32_t kPhaseColors[kPhaseCount] = {
    0xFFE15759,  // data_wait: red, the usual culprit
    0xFFF28E2B,  // h2d: orange
    0xFF4E79A7,  // forward: blue
    0xFF59A14F,  // backward: green
    0xFF76B7B2,  // optimizer: teal
    0xFFEDC948,  // sync: yellow
    0xFFB07AA1,  // checkpoint: purple
    0xFF9C755F,  // eval: brown
    0xFFBAB0AC,  // other: grey
};
}  // namespace internal

// The stable snake_case name of a phase ("data_wait", "h2d", "forward", ...),
// used in trace.json, report.json and NVTX. Cost: a table lookup.
constexpr std::string_view PhaseName(Phase phase) {
  const auto index = static_cast<unsigned>(phase);
  return index < kPhaseCount ? internal::kPhaseNames[index] : std::string_view("unknown");
}

// The ARGB color of a phase's NVTX range in Nsight Systems.
constexpr uint32_t PhaseColor(Phase phase) {
  const auto index = static_cast<unsigned>(phase);
  return index < kPhaseCount ? internal::kPhaseColors[index] : 0xFF000000u;
}

// True for the phases that keep the accelerator (or, without one, the CPU)
// doing the model's work: forward, backward and optimizer.
constexpr bool IsComputePhase(Phase phase) {
  return phase == Phase::kForward || phase == Phase::kBackward || phase == Phase::kOptimizer;
}

// Parses a name produced by PhaseName. Returns false if `name` is unknown.
constexpr bool ParsePhase(std::string_view name, Phase* out) {
  for (int i = 0; i < kPhaseCount; ++i) {
    if (PhaseName(static_cast<Phase>(i)) == name) {
      *out = static_cast<Phase>(i);
      return true;
    }
  }
  return false;
}

}  // namespace trainscope

#endif  // TRAINSCOPE_PHASE_H_
