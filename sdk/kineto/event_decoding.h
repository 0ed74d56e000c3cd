// sdk/kineto/event_decoding.h: one traceEvents element, a simdjson On
// Demand object, into a RawEvent: the members the analyses use (ph, cat,
// name, pid, tid, ts, dur and the args of value), each read by
// value_decoding.h. Inline: called once per event, from the batch parser
// and from the serial reader's one-event path. Internal to sdk/kineto.
//
//   RawEvent event;
//   EventFault fault;
//   if (auto error = ParseObject(object, escapes, sink, &event, &fault)) ...
#ifndef TRAINSCOPE_SDK_KINETO_EVENT_DECODING_H_
#define TRAINSCOPE_SDK_KINETO_EVENT_DECODING_H_

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "sdk/ground/timeline.h"
#include "sdk/kineto/trace_reader.h"
#include "sdk/kineto/value_decoding.h"

namespace trainscope::kineto {

// Where the parse of one event failed: the member at fault ("" when none
// is), and what is wrong with it where simdjson's message would not say
// (nullptr: simdjson's).
struct EventFault {
  const char* key = "";
  const char* what = nullptr;
};

// `error`, after naming `key` (and `what`) in *fault when there is one.
inline simdjson::error_code Fault(simdjson::error_code error, const char* key, EventFault* fault,
                                  const char* what = nullptr) {
  if (fault != nullptr) *fault = {key, what};
  return error;
}

// The error of a time member's read, or SUCCESS.
inline simdjson::error_code TimeFault(NumberRead read) {
  if (read == NumberRead::kMalformed) return simdjson::NUMBER_ERROR;
  if (read == NumberRead::kOutOfRange) return simdjson::NUMBER_OUT_OF_RANGE;
  return simdjson::SUCCESS;
}

// The args members the analyses use. On an error, *fault (when given)
// names the member at fault.
inline simdjson::error_code ParseArgs(simdjson::ondemand::value& value, bool escapes,
                                      RawEvent* event, EventFault* fault) {
  simdjson::ondemand::object args;
  if (value.get_object().get(args) != simdjson::SUCCESS) return simdjson::SUCCESS;
  for (auto arg_member : args) {
    if (auto error = arg_member.error()) return error;
    simdjson::ondemand::field& arg = arg_member.value_unsafe();
    std::string_view key;
    if (auto error = KeyOf(arg, escapes, &key)) return error;
    // The integer members, each with its name for errors; other keys are
    // skipped.
    static constexpr struct {
      std::string_view key;
      int64_t RawEvent::*field;
      const char* name;
    } kInts[] = {{"stream", &RawEvent::stream, "args.stream"},
                 {"correlation", &RawEvent::correlation, "args.correlation"},
                 {"device", &RawEvent::device, "args.device"},
                 {"step", &RawEvent::step, "args.step"},
                 {"samples", &RawEvent::samples, "args.samples"}};
    if (key == "phase") {
      GetString(arg.value(), escapes, &event->phase);
      continue;
    }
    for (const auto& member : kInts) {
      if (key != member.key) continue;
      const char* what = nullptr;
      if (auto error = AsInt(arg.value(), &(event->*member.field), &what)) {
        return Fault(error, member.name, fault, what);
      }
      break;
    }
  }
  return simdjson::SUCCESS;
}

// The fields of one event object, into `event`.
inline simdjson::error_code ParseObject(simdjson::ondemand::object& object, bool escapes,
                                        EventSink& sink, RawEvent* event,
                                        EventFault* fault = nullptr) {
  bool saw_cat = false, saw_name = false;
  // Asked once, when pid, tid or args comes after cat and name: whether
  // the sink wants them.
  enum { kNotAsked, kWanted, kNotWanted } details = kNotAsked;
  auto skip = [&] {
    if (!saw_cat || !saw_name) return false;
    if (details == kNotAsked) details = sink.WantsArgs(*event) ? kWanted : kNotWanted;
    return details == kNotWanted;
  };
  for (auto member : object) {
    // Used where it is: a copy out of the result (a 16-byte load of two
    // smaller stores) stalled store-to-load forwarding on every field.
    if (auto error = member.error()) return error;
    simdjson::ondemand::field& field = member.value_unsafe();
    std::string_view key;
    if (auto error = KeyOf(field, escapes, &key)) return error;
    // A reference, not a copy: see the field above.
    simdjson::ondemand::value& value = field.value();
    if (key == "ph") {
      GetString(value, escapes, &event->ph);
    } else if (key == "cat") {
      GetString(value, escapes, &event->cat);
      saw_cat = true;
    } else if (key == "name") {
      GetString(value, escapes, &event->name);
      saw_name = true;
    } else if (key == "pid") {
      if (skip()) continue;
      const char* what = nullptr;
      if (auto error = AsInt(value, &event->pid, &what)) return Fault(error, "pid", fault, what);
    } else if (key == "tid") {
      if (skip()) continue;
      const char* what = nullptr;
      if (auto error = AsInt(value, &event->tid, &what)) return Fault(error, "tid", fault, what);
    } else if (key == "ts") {
      const NumberRead read = GetMicros(value, &event->ts_ns, &event->ts_is_float);
      if (auto error = TimeFault(read)) return Fault(error, "ts", fault);
      event->has_ts = read == NumberRead::kNumber;
    } else if (key == "dur") {
      bool dur_is_float = false;
      const NumberRead read = GetMicros(value, &event->dur_ns, &dur_is_float);
      if (auto error = TimeFault(read)) return Fault(error, "dur", fault);
      event->has_dur = read == NumberRead::kNumber;
      // A negative duration is no interval: an error naming the event, not
      // one that ends before it starts.
      if (event->has_dur && event->dur_ns < 0) {
        return Fault(simdjson::NUMBER_OUT_OF_RANGE, "dur", fault, "is negative");
      }
    } else if (key == "args") {
      if (skip()) continue;
      if (auto error = ParseArgs(value, escapes, event, fault)) return error;
    }
  }
  // The end, too, must be a time a trace can hold (and an int64).
  int64_t end = 0;
  if (event->has_ts && event->has_dur &&
      (__builtin_add_overflow(event->ts_ns, event->dur_ns, &end) || end >= ground::kMaxTraceNanos ||
       end <= -ground::kMaxTraceNanos)) {
    return Fault(simdjson::NUMBER_OUT_OF_RANGE, "ts + dur", fault);
  }
  return simdjson::SUCCESS;
}

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_EVENT_DECODING_H_
