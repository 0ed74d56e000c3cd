// The structural scanner. See json_scanner.h.
#include "sdk/kineto/json_scanner.h"

#include <algorithm>
#include <cstdint>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace trainscope::kineto {
namespace {

// Byte-at-a-time scan of [i, stop): one past the bracket that closes the
// value, or kScanIncomplete when it is not in these bytes.
size_t ScanBytes(const char* data, size_t i, size_t stop, ScanState* s) {
  for (; i < stop; ++i) {
    const char c = data[i];
    // Any backslash, even a stray one outside strings (which simdjson treats
    // as an escape too): its keys must then be unescaped.
    if (c == '\\') s->backslash = true;
    if (s->escaped) {
      s->escaped = false;
    } else if (s->in_string) {
      if (c == '\\') s->escaped = true;
      s->in_string = c != '"';
    } else if (c == '"') {
      s->in_string = true;
    } else if (c == '{' || c == '[') {
      ++s->depth;
    } else if ((c == '}' || c == ']') && --s->depth == 0) {
      return i + 1;
    }
  }
  return kScanIncomplete;
}

#ifdef __SSE2__
// Bit k set where p[k] == c, for the 64 bytes at p.
uint64_t Mask64(const char* p, char c) {
  const __m128i k = _mm_set1_epi8(c);
  uint64_t mask = 0;
  for (int part = 0; part < 4; ++part) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * part));
    mask |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, k))))
            << (16 * part);
  }
  return mask;
}

// Bit k = xor of bits 0..k: with quote bits in, the bits inside strings.
uint64_t PrefixXor(uint64_t x) {
  for (int shift = 1; shift < 64; shift *= 2) x ^= x << shift;
  return x;
}

// Scans the 64 bytes at data + p (the first `valid` bits count) when they
// hold no backslash: quotes become a string mask, and only the brackets
// outside strings are walked.
size_t ScanBlock(const char* data, size_t p, uint64_t valid, ScanState* s) {
  const char* block = data + p;
  const uint64_t strings =
      PrefixXor(Mask64(block, '"') & valid) ^ (s->in_string ? ~uint64_t{0} : 0);
  const uint64_t outside = valid & ~strings;
  const uint64_t open = (Mask64(block, '{') | Mask64(block, '[')) & outside;
  uint64_t brackets = open | ((Mask64(block, '}') | Mask64(block, ']')) & outside);
  for (; brackets != 0; brackets &= brackets - 1) {
    const int bit = __builtin_ctzll(brackets);
    s->depth += (open >> bit) & 1 ? 1 : -1;
    if (s->depth == 0) return p + bit + 1;
  }
  s->in_string = (strings >> 63) & 1;
  return kScanIncomplete;
}

#endif

}  // namespace

#ifdef __SSE2__
size_t ScanComposite(const char* data, size_t i, size_t end, ScanState* s) {
  for (size_t p = i; p < end; p += 64) {
    const uint64_t valid = end - p >= 64 ? ~uint64_t{0} : (uint64_t{1} << (end - p)) - 1;
    size_t stop = kScanIncomplete;
    // Escapes are rare in traces: a block with one is scanned byte by byte.
    if (s->escaped || (Mask64(data + p, '\\') & valid) != 0) {
      stop = ScanBytes(data, p, std::min(end, p + 64), s);
    } else {
      stop = ScanBlock(data, p, valid, s);
    }
    if (stop != kScanIncomplete) return stop;
  }
  return kScanIncomplete;
}
#else
size_t ScanComposite(const char* data, size_t i, size_t end, ScanState* s) {
  return ScanBytes(data, i, end, s);
}
#endif

}  // namespace trainscope::kineto
