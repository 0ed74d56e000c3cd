// trainscope/trainscope.h: everything a training loop needs.
//
// A complete program:
//
//   #include "trainscope/trainscope.h"
//
//   int main() {
//     trainscope::Options options;
//     options.output_dir = "out";
//     auto session = trainscope::Session::Start(options);
//     if (!session.ok()) return 1;
//     for (int64_t i = 0; i < 100; ++i) {
//       trainscope::StepScope step(*session, i, trainscope::Samples(64));
//       { TRAINSCOPE_PHASE(kDataWait); /* next batch */ }
//       { TRAINSCOPE_PHASE(kForward);  /* loss = model(batch) */ }
//       { TRAINSCOPE_PHASE(kBackward); /* loss.backward() */ }
//     }
//     return session->Finish().ok() ? 0 : 1;  // writes trace.json, report.json
//   }
//
// Concepts, each in its own header:
//   phase.h    the standard phases (Phase::kForward, ...), names and colors
//   scope.h    PhaseScope, StepScope, AsyncRange, TRAINSCOPE_PHASE/RANGE
//   session.h  Options and Session: start, record, finish
//   report.h   the Report that Finish() returns and writes as report.json
//   recorder.h the per-thread rings under the scopes; InternName, NameThisThread
#ifndef TRAINSCOPE_TRAINSCOPE_H_
#define TRAINSCOPE_TRAINSCOPE_H_

#include "trainscope/clock.h"
#include "trainscope/phase.h"
#include "trainscope/recorder.h"
#include "trainscope/report.h"
#include "trainscope/scope.h"
#include "trainscope/session.h"
#include "trainscope/types.h"
#include "trainscope/version.h"

#endif  // TRAINSCOPE_TRAINSCOPE_H_
