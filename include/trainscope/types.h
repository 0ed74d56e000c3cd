// trainscope/types.h: small value types that say what a number means.
//
//   trainscope::StepScope step(session, trainscope::StepIndex(i),
//                              trainscope::Samples(batch_size));
//
// Each wraps one integer and costs nothing at run time; the names keep a
// step index and a sample count from being passed in each other's place.
#ifndef TRAINSCOPE_TYPES_H_
#define TRAINSCOPE_TYPES_H_

#include <cstdint>

namespace trainscope {

// The index of a training step (0-based or 1-based, as the caller counts).
// Implicit from an integer so that `StepScope step(session, i)` reads well.
struct StepIndex {
  constexpr StepIndex(int64_t v) : value(v) {}  // NOLINT: implicit on purpose
  int64_t value;
};

// A count of training samples (examples) processed.
struct Samples {
  constexpr explicit Samples(int64_t v) : value(v) {}
  int64_t value;
};

// A size in bytes.
struct Bytes {
  constexpr explicit Bytes(uint64_t v) : value(v) {}
  uint64_t value;
};

// The id of an interned range name (see InternName in recorder.h). Ids below
// kFirstCustomNameId are reserved for the phases and the step range.
using NameId = uint32_t;

// Reserved name id of the step range ("ProfilerStep#N" in trace.json).
inline constexpr NameId kStepNameId = 15;
// The first id InternName hands out.
inline constexpr NameId kFirstCustomNameId = 16;

}  // namespace trainscope

#endif  // TRAINSCOPE_TYPES_H_
