// sdk/kineto/value_decoding.h: how the trace reader reads one JSON value
// of an event with simdjson On Demand: keys, strings, numbers and
// microsecond times as exact nanoseconds (the fast paths for Kineto's
// plain integers, and the refusals). Inline: called once per member of
// every event. Internal to sdk/kineto.
#ifndef TRAINSCOPE_SDK_KINETO_VALUE_DECODING_H_
#define TRAINSCOPE_SDK_KINETO_VALUE_DECODING_H_

#include <simdjson.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "sdk/ground/timeline.h"

namespace trainscope::kineto {

inline bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// A member name as text. Without a backslash in it, the raw name is the
// name, and reading it in place skips unescaped_key()'s copy. `escapes`:
// the event is known to hold one, so go straight to unescaped_key().
inline simdjson::error_code KeyOf(simdjson::ondemand::field& field, bool escapes,
                                  std::string_view* key) {
  if (!escapes) {
    const char* raw = field.key().raw();
    // simdjson has checked that the closing quote is there; a backslash
    // before the first quote found means an escape (maybe of that quote).
    // Eight bytes at a time (the input is padded past its end): the lowest
    // byte flagged by the has-zero-byte test on x ^ c is exact.
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the lowest byte comes first");
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
    for (size_t at = 0;; at += 8) {
      uint64_t word;
      std::memcpy(&word, raw + at, 8);
      const uint64_t quote = word ^ (kOnes * '"'), slash = word ^ (kOnes * '\\');
      const uint64_t hits =
          ((quote - kOnes) & ~quote & kHighs) | ((slash - kOnes) & ~slash & kHighs);
      if (hits == 0) continue;
      const size_t length = at + static_cast<size_t>(__builtin_ctzll(hits)) / 8;
      if (raw[length] == '\\') return field.unescaped_key().get(*key);
      *key = std::string_view(raw, length);
      return simdjson::SUCCESS;
    }
  }
  return field.unescaped_key().get(*key);
}

// Eight ASCII digits at p as their value, or false for anything else. Two
// digits, then four, then eight are combined by multiplies inside the word
// (little-endian: the first digit is the lowest byte).
inline bool EightDigits(const char* p, uint64_t* out) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  // Every byte is 0x30..0x39: its high nibble is 3, and adding 6 keeps it 3.
  if ((((v & 0xF0F0F0F0F0F0F0F0) | (((v + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) >> 4))) !=
      0x3333333333333333) {
    return false;
  }
  v -= 0x3030303030303030;
  v = v * 10 + (v >> 8);  // pairs: byte 2k holds digits 2k, 2k+1
  const uint64_t mask = 0x000000FF000000FF;
  v = ((v & mask) * (100 + (1000000ULL << 32)) + ((v >> 16) & mask) * (1 + (10000ULL << 32))) >> 32;
  *out = v;
  return true;
}

// `count` ASCII digits at p (count <= 19) as their value, or false for
// anything else. Eight at a time while they last.
[[gnu::always_inline]] inline bool Digits(const char* p, size_t count, uint64_t* out) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    uint64_t eight;
    if (!EightDigits(p + i, &eight)) return false;
    v = v * 100000000 + eight;
  }
  for (; i < count; ++i) {
    const unsigned digit = static_cast<unsigned char>(p[i]) - '0';
    if (digit > 9) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

// The token's text, less the whitespace after it, if what follows it ends a
// number (simdjson refuses "5\"9" too); else an empty view.
[[gnu::always_inline]] inline std::string_view NumberText(simdjson::ondemand::value& value) {
  const std::string_view raw = value.raw_json_token();
  size_t n = raw.size();
  while (n > 0 && IsSpace(raw[n - 1])) --n;
  const char after = raw.data()[n];
  if (!IsSpace(after) && after != ',' && after != '}' && after != ']') return {};
  return raw.substr(0, n);
}

// A plain JSON integer of up to 18 digits (Kineto's timestamps, ids and
// durations), read from the token's text without consuming the value (the
// object's iteration skips it). False for anything else, which then takes
// simdjson's own path, errors included.
inline bool FastInteger(simdjson::ondemand::value& value, int64_t* out) {
  const std::string_view text = NumberText(value);
  const char* p = text.data();
  size_t n = text.size();
  const bool negative = n > 0 && p[0] == '-';
  if (negative) ++p, --n;
  if (n == 0 || n > 18 || (p[0] == '0' && n > 1)) return false;
  uint64_t v = 0;
  if (!Digits(p, n, &v)) return false;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// Times of 2^53 us and more (ground::kMaxTraceNanos) are refused, after
// rounding to the nanosecond: 9007199254740991.9995 reads as 2^53 us, so it
// is refused too (the bound is exclusive).
inline constexpr auto kMaxNanos = static_cast<uint64_t>(ground::kMaxTraceNanos);

// A JSON number of microseconds, sign already taken (p, n: the rest), as
// whole nanoseconds in *magnitude: exact, digits past the nanosecond rounded
// to the nearest (halves away from zero). Any shape of the grammar,
// (0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, with no double in between.
// *is_float: written with a point or an exponent. kNotANumber for what the
// grammar refuses.
enum class FastTime { kRead, kOutOfRange, kNotANumber };
inline FastTime ExactMicros(const char* p, size_t n, uint64_t* magnitude, bool* is_float) {
  auto is_digit = [](char c) { return static_cast<unsigned>(c - '0') <= 9; };
  size_t i = 0;
  while (i < n && is_digit(p[i])) ++i;
  const size_t int_digits = i;
  if (int_digits == 0 || (p[0] == '0' && int_digits > 1)) return FastTime::kNotANumber;
  size_t frac_at = i, frac_digits = 0;
  if (i < n && p[i] == '.') {
    frac_at = ++i;
    while (i < n && is_digit(p[i])) ++i;
    frac_digits = i - frac_at;
    if (frac_digits == 0) return FastTime::kNotANumber;
  }
  int64_t exponent = 0;
  if (i < n && (p[i] == 'e' || p[i] == 'E')) {
    ++i;
    const bool negative = i < n && p[i] == '-';
    if (i < n && (p[i] == '+' || p[i] == '-')) ++i;
    const size_t exponent_at = i;
    for (; i < n && is_digit(p[i]); ++i) {
      if (exponent < 1000000000) exponent = exponent * 10 + (p[i] - '0');  // saturates
    }
    if (i == exponent_at) return FastTime::kNotANumber;
    if (negative) exponent = -exponent;
  }
  if (i != n) return FastTime::kNotANumber;
  // The mantissa's digits without the point, and how many of them come
  // before the point of the value in nanoseconds.
  const auto total = static_cast<int64_t>(int_digits + frac_digits);
  auto digit = [&](int64_t k) -> uint64_t {
    if (k < 0 || k >= total) return 0;
    const auto at = static_cast<size_t>(k);
    return static_cast<uint64_t>(p[at < int_digits ? at : frac_at + (at - int_digits)] - '0');
  };
  const int64_t point = static_cast<int64_t>(int_digits) + exponent + 3;
  int64_t first = 0;  // the first digit that is not a leading zero
  while (first < total && digit(first) == 0) ++first;
  uint64_t whole = 0;
  if (first < total) {                                     // else zero, whatever the exponent
    if (point - first > 19) return FastTime::kOutOfRange;  // 10^19 ns and more
    for (int64_t k = first; k < point; ++k) whole = whole * 10 + digit(k);
    if (digit(point) >= 5) ++whole;
    if (whole >= kMaxNanos) return FastTime::kOutOfRange;
  }
  *magnitude = whole;
  *is_float = i != int_digits;  // a point or an exponent followed the digits
  return FastTime::kRead;
}

// A time in microseconds, as whole nanoseconds (see ExactMicros), from the
// token's text. Kineto's two shapes, "{us}" ("1683564901548726") and
// "{us}.{ns:03}" ("1712195495505772.800"), take a short path; every other
// number ("2.75", "5e-05") the general one. *is_float: written with a point
// or an exponent, as Python's json reads a float. kNotANumber for what is not
// a number, which simdjson then reads as another value or an error.
inline FastTime FastMicros(simdjson::ondemand::value& value, int64_t* ns, bool* is_float) {
  const std::string_view text = NumberText(value);
  const char* p = text.data();
  size_t n = text.size();
  const bool negative = n > 0 && p[0] == '-';
  if (negative) ++p, --n;
  uint64_t whole = 0, fraction = 0, magnitude = 0;
  bool point = false;
  if (n > 0 && n <= 16 && (p[0] != '0' || n == 1) && Digits(p, n, &whole)) {
    magnitude = whole * 1000;
  } else if (n > 4 && n <= 20 && p[n - 4] == '.' && (p[0] != '0' || n == 5) &&
             Digits(p, n - 4, &whole) && Digits(p + n - 3, 3, &fraction)) {
    magnitude = whole * 1000 + fraction;
    point = true;
  } else {
    const FastTime read = ExactMicros(p, n, &magnitude, &point);
    if (read != FastTime::kRead) return read;
  }
  if (magnitude >= kMaxNanos) return FastTime::kOutOfRange;
  *ns = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  *is_float = point;
  return FastTime::kRead;
}

// A member's value for GetNumber and GetMicros: a number, another JSON value
// (a string, null, ...: the field counts as absent), or a malformed number or
// token ("12a", "-", "+5"), which is an error at the event; a time past the
// range is kOutOfRange.
enum class NumberRead { kNumber, kOther, kMalformed, kOutOfRange };

// A time in microseconds ("ts", "dur") as whole nanoseconds into *ns, and
// whether it was written as a floating-point literal into *is_float (both
// untouched unless kNumber). kOutOfRange past kMaxTraceNanos. FastMicros
// reads the whole number grammar, so what it refuses is another JSON value
// (kOther) or a malformed one (kMalformed).
inline NumberRead GetMicros(simdjson::ondemand::value& value, int64_t* ns, bool* is_float) {
  switch (FastMicros(value, ns, is_float)) {
    case FastTime::kRead:
      return NumberRead::kNumber;
    case FastTime::kOutOfRange:
      return NumberRead::kOutOfRange;
    case FastTime::kNotANumber:
      break;
  }
  simdjson::ondemand::json_type type;
  if (value.type().get(type) == simdjson::SUCCESS &&
      type != simdjson::ondemand::json_type::number) {
    return NumberRead::kOther;
  }
  return NumberRead::kMalformed;
}

// An id (pid, tid, args.stream, args.correlation, ...) into *out, exactly,
// never through a double: a JSON integer in the int64 range, or one written
// with a point or an exponent whose value is a whole number below 2^53
// ("4515.0", as pandas writes an integer column with gaps). Any other JSON
// value (strings such as Kineto's named tracks, null) reads as -1. A
// number that is no such id is refused: NUMBER_OUT_OF_RANGE with *what
// saying why ("3.5", "1e300", "9223372036854775808"); NUMBER_ERROR for a
// malformed one ("12a"), *what untouched.
inline simdjson::error_code AsInt(simdjson::ondemand::value& value, int64_t* out,
                                  const char** what) {
  if (FastInteger(value, out)) return simdjson::SUCCESS;
  simdjson::ondemand::json_type type;
  if (value.type().get(type) != simdjson::SUCCESS) return simdjson::NUMBER_ERROR;
  if (type != simdjson::ondemand::json_type::number) {
    *out = -1;
    return simdjson::SUCCESS;
  }
  // Not get_number(): in simdjson 3.0.1 it reads some long floats wrong and
  // accepts numbers that run into a stray byte ("5\"9"), which get_int64()
  // and get_double() refuse. A failed get_int64() does not consume the value.
  int64_t integer = 0;
  const simdjson::error_code as_int = value.get_int64().get(integer);
  if (as_int == simdjson::SUCCESS) {
    *out = integer;
    return simdjson::SUCCESS;
  }
  if (as_int == simdjson::NUMBER_ERROR) return simdjson::NUMBER_ERROR;
  const std::string_view text = NumberText(value);
  const bool is_float = text.find_first_of(".eE") != std::string_view::npos;
  if (!is_float) {  // digits only, past 64 bits
    *what = "is out of the int64 range (ids are read exactly)";
    return simdjson::NUMBER_OUT_OF_RANGE;
  }
  double number = 0;
  if (value.get_double().get(number) != simdjson::SUCCESS) {
    // Past a double's range ("1e400"), or not a number ("1.e5"): the
    // grammar tells which.
    const std::string_view digits = text.substr(text.size() > 0 && text[0] == '-' ? 1 : 0);
    uint64_t magnitude = 0;
    bool point = false;
    if (ExactMicros(digits.data(), digits.size(), &magnitude, &point) == FastTime::kNotANumber) {
      return simdjson::NUMBER_ERROR;
    }
    *what = "is out of the int64 range (ids are read exactly)";
    return simdjson::NUMBER_OUT_OF_RANGE;
  }
  constexpr double kExact = 9007199254740992.0;     // 2^53: past it a double skips integers
  constexpr double kInt64 = 9223372036854775808.0;  // 2^63
  if (!(std::fabs(number) < kInt64)) {
    *what = "is out of the int64 range (ids are read exactly)";
    return simdjson::NUMBER_OUT_OF_RANGE;
  }
  if (number != std::trunc(number)) {
    *what = "is not an integer (an id)";
    return simdjson::NUMBER_OUT_OF_RANGE;
  }
  if (!(std::fabs(number) < kExact)) {
    *what = "is 2^53 or more written as a float, which cannot be read exactly (an id)";
    return simdjson::NUMBER_OUT_OF_RANGE;
  }
  *out = static_cast<int64_t>(number);
  return simdjson::SUCCESS;
}

// A string's text, or "" for anything else. Without a backslash in it, the
// text between the quotes is the string: a view of the input, with no copy
// into the parser. The token is looked at without being read (the object's
// iteration skips it), so the escaped case can still read it.
inline void GetString(simdjson::ondemand::value& value, bool escapes, std::string_view* out) {
  if (!escapes) {
    // From the opening quote to the next structural character: the string
    // and any spaces after it.
    const std::string_view token = value.raw_json_token();
    if (token.empty() || token[0] != '"') {
      *out = {};
      return;
    }
    if (std::memchr(token.data(), '\\', token.size()) == nullptr) {
      const char* quote = static_cast<const char*>(memrchr(token.data(), '"', token.size()));
      if (quote != token.data()) {  // simdjson has checked that the closing quote is there
        *out = std::string_view(token.data() + 1, static_cast<size_t>(quote - token.data() - 1));
        return;
      }
    }
  }
  if (value.get_string().get(*out) != simdjson::SUCCESS) *out = {};
}

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_VALUE_DECODING_H_
