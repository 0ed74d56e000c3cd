// sdk/kineto/json_scanner.h: finds where JSON values end without parsing
// them (internal to the trace reader).
//
//   ScanState state;
//   size_t end = ScanComposite(buffer, start, bytes_read, &state);
//   if (end == kScanIncomplete) ReadMoreAndRetry();
//
//   std::vector<ElementSpan> spans;
//   ScanElements(buffer, first_brace, bytes_read, 64 << 10, &spans);
//
// Tracks strings, escapes and nesting only. With SSE2 it classifies 64
// bytes at a time (quote and bracket masks, a prefix-XOR for string
// interiors) and walks only the brackets outside strings; blocks holding a
// backslash, and builds without SSE2, go byte by byte.
#ifndef TRAINSCOPE_SDK_KINETO_JSON_SCANNER_H_
#define TRAINSCOPE_SDK_KINETO_JSON_SCANNER_H_

#include <cstddef>
#include <vector>

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

// One element of an array, [start, stop), as ScanElements found it.
struct ElementSpan {
  size_t start, stop;
  bool escapes;  // a backslash in it (or just before it)
};

// The run of complete array elements that starts with the object or array
// at data[i], in one pass over the bytes: each '{' or '[' at the top level
// starts an element and its matching bracket ends it. Stops at the first
// element that does not close before `end`, at a closing bracket at the top
// level (the array's end), or after the element that reaches i + max_bytes.
// Bytes between elements are not checked: the caller's parser must see them
// (they should be commas and spaces). Reads up to 63 bytes past `end` (pad
// the buffer). Appends to *spans; cost: one pass, no allocation beyond it.
void ScanElements(const char* data, size_t i, size_t end, size_t max_bytes,
                  std::vector<ElementSpan>* spans);

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_JSON_SCANNER_H_
