// sdk/export/summary.h: the human summary of a Report.
//
// Printed by Session::Finish() and by `trainscope summary report.json`:
// one header line, throughput, a phase table, the idle share with its top
// cause, and a one-line recommendation.
#ifndef TRAINSCOPE_SDK_EXPORT_SUMMARY_H_
#define TRAINSCOPE_SDK_EXPORT_SUMMARY_H_

#include <string>

#include "trainscope/report.h"

namespace trainscope::exporter {

// Renders the summary as text lines ending in '\n'. Pure.
std::string FormatSummary(const Report& report);

}  // namespace trainscope::exporter

#endif  // TRAINSCOPE_SDK_EXPORT_SUMMARY_H_
