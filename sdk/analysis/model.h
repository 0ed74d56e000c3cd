// The ground layer's timeline model (sdk/ground/timeline.h), named in the
// analysis room's namespace: the analyses are written against it.
#ifndef TRAINSCOPE_SDK_ANALYSIS_MODEL_H_
#define TRAINSCOPE_SDK_ANALYSIS_MODEL_H_

#include "sdk/ground/timeline.h"

namespace trainscope::analysis {

using ground::Interval;
using ground::IntervalKind;
using ground::IsDeviceKind;
using ground::IsDeviceSide;
using ground::IsHostRange;
using ground::kMaxTraceNanos;
using ground::NameTable;
using ground::NanosToMicros;
using ground::Timeline;
using ground::Track;
using ground::TrackKind;

}  // namespace trainscope::analysis

#endif  // TRAINSCOPE_SDK_ANALYSIS_MODEL_H_
