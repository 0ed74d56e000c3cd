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
// The 64 bytes at p, classified in one load of each 16 bytes.
struct Block {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0;
};
Block Classify(const char* p) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  // '{' 0x7b and '[' 0x5b, '}' 0x7d and ']' 0x5d differ only in bit 0x20.
  const __m128i lower = _mm_set1_epi8(0x20), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
  Block b;
  for (int part = 0; part < 4; ++part) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * part));
    const __m128i folded = _mm_or_si128(v, lower);
    const int shift = 16 * part;
    b.quote |=
        static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote))))
        << shift;
    b.backslash |= static_cast<uint64_t>(
                       static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash))))
                   << shift;
    b.open |= static_cast<uint64_t>(
                  static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, open))))
              << shift;
    b.close |= static_cast<uint64_t>(
                   static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, close))))
               << shift;
  }
  return b;
}

// Bit k = xor of bits 0..k: with quote bits in, the bits inside strings.
uint64_t PrefixXor(uint64_t x) {
  for (int shift = 1; shift < 64; shift *= 2) x ^= x << shift;
  return x;
}

// Scans the 64 bytes at data + p (the first `valid` bits count) when they
// hold no backslash: quotes become a string mask, and only the brackets
// outside strings are walked.
size_t ScanBlock(const Block& b, size_t p, uint64_t valid, ScanState* s) {
  const uint64_t strings = PrefixXor(b.quote & valid) ^ (s->in_string ? ~uint64_t{0} : 0);
  const uint64_t outside = valid & ~strings;
  const uint64_t open = b.open & outside;
  for (uint64_t brackets = open | (b.close & outside); brackets != 0; brackets &= brackets - 1) {
    const int bit = __builtin_ctzll(brackets);
    s->depth += (open >> bit) & 1 ? 1 : -1;
    if (s->depth == 0) return p + bit + 1;
  }
  s->in_string = (strings >> 63) & 1;
  return kScanIncomplete;
}

#endif

// ScanElements' state between blocks.
struct ElementScan {
  const char* data;
  size_t end, limit;  // limit: no element starts at or after it
  std::vector<ElementSpan>* spans;
  ScanState s;
  size_t start = 0;      // of the open element (depth > 0)
  bool escapes = false;  // the open (or next) element has a backslash
  bool done = false;

  // A bracket outside strings at position at.
  void Bracket(size_t at, bool open) {
    if (open) {
      if (s.depth++ == 0) {
        if (at >= limit) {
          done = true;
          return;
        }
        start = at;
      }
    } else if (s.depth == 0) {
      done = true;  // the array's end, or stray text: the caller's parser decides
    } else if (--s.depth == 0) {
      spans->push_back({start, at + 1, escapes});
      escapes = false;
    }
  }

  // Byte by byte over [i, stop).
  void Bytes(size_t i, size_t stop) {
    for (; i < stop && !done; ++i) {
      const char c = data[i];
      if (c == '\\') escapes = true;
      if (s.escaped) {
        s.escaped = false;
      } else if (s.in_string) {
        if (c == '\\') s.escaped = true;
        s.in_string = c != '"';
      } else if (c == '"') {
        s.in_string = true;
      } else if (c == '{' || c == '[') {
        Bracket(i, true);
      } else if (c == '}' || c == ']') {
        Bracket(i, false);
      }
    }
  }
};

}  // namespace

void ScanElements(const char* data, size_t i, size_t end, size_t max_bytes,
                  std::vector<ElementSpan>* spans) {
  ElementScan scan{data, end, i + max_bytes, spans, {}};
#ifdef __SSE2__
  for (size_t p = i; p < end && !scan.done; p += 64) {
    const uint64_t valid = end - p >= 64 ? ~uint64_t{0} : (uint64_t{1} << (end - p)) - 1;
    __builtin_prefetch(data + p + 2048);  // the next pages: the first pass over them
    const Block b = Classify(data + p);
    // Escapes are rare in traces: a block with one goes byte by byte.
    if (scan.s.escaped || (b.backslash & valid) != 0) {
      scan.Bytes(p, std::min(end, p + 64));
      continue;
    }
    const uint64_t strings = PrefixXor(b.quote & valid) ^ (scan.s.in_string ? ~uint64_t{0} : 0);
    const uint64_t outside = valid & ~strings;
    const uint64_t open = b.open & outside;
    for (uint64_t brackets = open | (b.close & outside); brackets != 0 && !scan.done;
         brackets &= brackets - 1) {
      const int bit = __builtin_ctzll(brackets);
      scan.Bracket(p + bit, (open >> bit) & 1);
    }
    scan.s.in_string = (strings >> 63) & 1;
  }
#else
  scan.Bytes(i, end);
#endif
}

#ifdef __SSE2__
size_t ScanComposite(const char* data, size_t i, size_t end, ScanState* s) {
  for (size_t p = i; p < end; p += 64) {
    const uint64_t valid = end - p >= 64 ? ~uint64_t{0} : (uint64_t{1} << (end - p)) - 1;
    size_t stop = kScanIncomplete;
    const Block b = Classify(data + p);
    // Escapes are rare in traces: a block with one is scanned byte by byte.
    if (s->escaped || (b.backslash & valid) != 0) {
      stop = ScanBytes(data, p, std::min(end, p + 64), s);
    } else {
      stop = ScanBlock(b, p, valid, s);
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
