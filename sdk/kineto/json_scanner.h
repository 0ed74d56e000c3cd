// sdk/kineto/json_scanner.h: finds where a JSON object or array ends,
// without parsing it (internal to the trace reader).
//
//   ScanState state;
//   size_t end = ScanComposite(buffer, start, bytes_read, &state);
//   if (end == kScanIncomplete) ReadMoreAndRetry();
//
// Tracks strings, escapes and nesting only. With SSE2 it classifies 64
// bytes at a time (quote and bracket masks, a prefix-XOR for string
// interiors) and walks only the brackets outside strings; blocks holding a
// backslash, and builds without SSE2, go byte by byte.
#ifndef TRAINSCOPE_SDK_KINETO_JSON_SCANNER_H_
#define TRAINSCOPE_SDK_KINETO_JSON_SCANNER_H_

#include <cstddef>

namespace trainscope::kineto {

// "The value is not complete in these bytes."
inline constexpr size_t kScanIncomplete = static_cast<size_t>(-1);

// The scanner's state between bytes (or 64-byte blocks) of one object or
// array; a scan resumes from it.
struct ScanState {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;    // the next byte is escaped (in a string)
  bool backslash = false;  // the value has a backslash anywhere
};

// One past the bracket closing the object or array that starts at data[i],
// or kScanIncomplete when it does not close before `end`. Reads up to 63
// bytes past `end`: the buffer must be padded (bits there are masked off).
size_t ScanComposite(const char* data, size_t i, size_t end, ScanState* s);

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_JSON_SCANNER_H_
