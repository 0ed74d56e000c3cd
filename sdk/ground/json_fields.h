// sdk/ground/json_fields.h: a JSON file's fields named once, in one list
// that both the writer and the reader walk.
//
//   template <typename R, typename V>
//   void DescribeThing(R& r, V& v) {          // R: Thing, or const Thing
//     v.Field("name", r.name, kRequired);
//     v.Object("limits", kAbsentOk, [&] { v.Field("max", r.max, kRequired); });
//   }
//   ground::JsonWriter j;  json_fields::Writer w(&j);
//   j.BeginObject(); DescribeThing(thing, w); j.EndObject();
//   absl::Status status;   json_fields::Reader r(root, "", "thing.json", &status);
//   DescribeThing(thing, r);    // status: the first field at fault, by path
//
// The lists are report_fields.h (report.json) and experiment_fields.h
// (experiment.json); tests walk them too (every documented key exists and
// round-trips). A visitor V provides, each taking the key first:
//   Field(key, T&, flags)            T: std::string, bool, double, integers,
//                                    std::optional<double / bool / string>
//   WriteOnly(key, bool)             derived from other fields: written,
//                                    not read back
//   Check(key, bool ok, problem)     a rule beyond the type (say, >= 0):
//                                    when reading, an error unless `ok`
//   Object(key, flags, fn())         an object; fn describes its fields
//   ObjectOrNull(key, bool null, flags, fn())  written as null when `null`;
//                                    read when present and not null
//   Nullable(key, std::optional<S>&, fn(S&))   null when empty
//   Keyed(key, placeholder, flags, std::vector<S>&, std::string S::*name,
//         fn(S&))                    an object of objects keyed by S::*name
//   Array(key, std::vector<S>&, fn(S&)[, flags]) an array of objects
//   Strings / Numbers(key, pairs&, flags)      objects whose keys are data
//   List(key, std::vector<std::string>&, flags) / Ints(key,
//         std::vector<int>&, flags)  arrays of strings / integers
//
// Reading: a field is required unless its flags hold kAbsentOk (then
// absent, or null for an object, keeps the default). The first field
// missing or of the wrong type sets the status to InvalidArgument
// "<source>: field '<path>' <problem>", with a path like
// "variants[1].trials[0].wall_s"; nothing after it is read. A null number
// reads as NaN (the writer writes a non-finite number as null). Integers
// must fit their type (a uint64_t is written as its int64_t bits). Cost:
// one pass over the fields and simdjson's DOM lookups; the reader keeps a
// stack of the objects open, as deep as the nesting.
#ifndef TRAINSCOPE_SDK_GROUND_JSON_FIELDS_H_
#define TRAINSCOPE_SDK_GROUND_JSON_FIELDS_H_

#include <simdjson.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::ground::json_fields {

// The error for a document that simdjson could not parse (`error` from
// parser.parse), naming `source`: "<source>: the file is empty" when
// `text` holds nothing but whitespace; else "<source>: not valid JSON
// (<why>)", where a number too large for a double (1e400, or an integer
// past 2^64) is said as such. Cost: a scan of `text` for an empty one.
// Why simdjson could not parse a document, in words: its own message, but
// for a number past a double's range, which it calls "Problem while parsing
// a number".
inline std::string_view ParseErrorWhy(simdjson::error_code error) {
  return error == simdjson::NUMBER_ERROR ? "a number is malformed or too large for a double"
                                         : simdjson::error_message(error);
}

inline absl::Status DocumentError(simdjson::error_code error, std::string_view source,
                                  std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return absl::InvalidArgumentError(fmt::format("{}: the file is empty", source));
  }
  return absl::InvalidArgumentError(
      fmt::format("{}: not valid JSON ({})", source, ParseErrorWhy(error)));
}

// Parses `json` with `parser` (which owns the result) and returns its top
// level, which must be an object. Errors: DocumentError's, or
// "<source>: the top level is not an object". Cost: simdjson's parse of a
// padded copy.
inline absl::StatusOr<simdjson::dom::object> ParseTopObject(simdjson::dom::parser& parser,
                                                            std::string_view json,
                                                            std::string_view source) {
  const simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS) {
    return DocumentError(error, source, json);
  }
  simdjson::dom::object top;
  if (root.get_object().get(top) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: the top level is not an object", source));
  }
  return top;
}

// How a field may appear in a file written by an older trainscope.
enum Flags : unsigned {
  kRequired = 0,
  // May be absent (added later: reads as its default); an object may also
  // be null.
  kAbsentOk = 1u << 0,
  // A string written as null when empty (and read so).
  kEmptyIsNull = 1u << 1,
};

// Writes each field of a list into a JsonWriter whose object is open.
class Writer {
 public:
  explicit Writer(JsonWriter* j) : j_(*j) {}

  void Field(std::string_view key, const std::string& v, unsigned flags) {
    if ((flags & kEmptyIsNull) && v.empty()) {
      j_.Key(key).Null();
    } else {
      j_.Key(key).String(v);
    }
  }
  void Field(std::string_view key, bool v, unsigned) { j_.Key(key).Bool(v); }
  void Field(std::string_view key, double v, unsigned) { j_.Key(key).Number(v); }
  void Field(std::string_view key, const std::optional<double>& v, unsigned) {
    j_.Key(key).Number(v);
  }
  void Field(std::string_view key, const std::optional<bool>& v, unsigned) {
    if (v) {
      j_.Key(key).Bool(*v);
    } else {
      j_.Key(key).Null();
    }
  }
  void Field(std::string_view key, const std::optional<std::string>& v, unsigned) {
    if (v) {
      j_.Key(key).String(*v);
    } else {
      j_.Key(key).Null();
    }
  }
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
  void Field(std::string_view key, Int v, unsigned) {
    j_.Key(key).Int(static_cast<int64_t>(v));
  }
  void WriteOnly(std::string_view key, bool v) { j_.Key(key).Bool(v); }
  // The reader's checks beyond the type; nothing to do when writing.
  void Check(std::string_view, bool, std::string_view) {}
  template <typename Fn>
  void Object(std::string_view key, unsigned, Fn&& fn) {
    j_.Key(key).BeginObject();
    fn();
    j_.EndObject();
  }
  template <typename Fn>
  void ObjectOrNull(std::string_view key, bool null, unsigned flags, Fn&& fn) {
    if (null) {
      j_.Key(key).Null();
    } else {
      Object(key, flags, fn);
    }
  }
  template <typename S, typename Fn>
  void Nullable(std::string_view key, const std::optional<S>& section, Fn&& fn) {
    if (!section) {
      j_.Key(key).Null();
      return;
    }
    j_.Key(key).BeginObject();
    fn(*section);
    j_.EndObject();
  }
  template <typename S, typename Fn>
  void Keyed(std::string_view key, std::string_view, unsigned, const std::vector<S>& items,
             std::string S::*name, Fn&& fn) {
    j_.Key(key).BeginObject();
    for (const S& item : items) {
      j_.Key(item.*name).BeginObject();
      fn(item);
      j_.EndObject();
    }
    j_.EndObject();
  }
  template <typename S, typename Fn>
  void Array(std::string_view key, const std::vector<S>& items, Fn&& fn, unsigned = kRequired) {
    j_.Key(key).BeginArray();
    for (const S& item : items) {
      j_.BeginObject();
      fn(item);
      j_.EndObject();
    }
    j_.EndArray();
  }
  void Strings(std::string_view key, const std::vector<std::pair<std::string, std::string>>& kv,
               unsigned) {
    j_.Key(key).BeginObject();
    for (const auto& [k, v] : kv) j_.Key(k).String(v);
    j_.EndObject();
  }
  void Numbers(std::string_view key, const std::vector<std::pair<std::string, double>>& kv,
               unsigned) {
    j_.Key(key).BeginObject();
    for (const auto& [k, v] : kv) j_.Key(k).Number(v);
    j_.EndObject();
  }
  void List(std::string_view key, const std::vector<std::string>& values, unsigned) {
    j_.Key(key).BeginArray();
    for (const std::string& v : values) j_.String(v);
    j_.EndArray();
  }
  void Ints(std::string_view key, const std::vector<int>& values, unsigned) {
    j_.Key(key).BeginArray();
    for (int v : values) j_.Int(v);
    j_.EndArray();
  }

 private:
  JsonWriter& j_;
};

// Reads each field of a list from a simdjson DOM object (see the top).
class Reader {
 public:
  // `root` is the object the list describes, at `path` ("" for the top of
  // the file, else its path, e.g. "variants[1]"); `source` names the file
  // in errors. The first error goes to *status, which must be OK and
  // outlive the reader.
  Reader(simdjson::dom::object root, std::string path, std::string_view source,
         absl::Status* status)
      : source_(source), status_(status) {
    stack_.push_back({root, std::move(path)});
  }

  template <typename T>
  void Field(std::string_view key, T& out, unsigned flags) {
    simdjson::dom::element e;
    if (Find(key, flags, &e)) Read(key, e, out, flags);
  }
  // A check beyond the type, after the field was read: unless `ok`, the
  // error "field '<path of key>' <problem>" (if none came before).
  void Check(std::string_view key, bool ok, std::string_view problem) {
    if (!ok) Fail(key, problem);
  }
  bool ok() const { return status_->ok(); }
  void WriteOnly(std::string_view, bool) {}
  template <typename Fn>
  void Object(std::string_view key, unsigned flags, Fn&& fn) {
    simdjson::dom::object object;
    if (!Enter(key, flags, &object)) return;
    stack_.push_back({object, Path(key)});
    fn();
    stack_.pop_back();
  }
  template <typename Fn>
  void ObjectOrNull(std::string_view key, bool, unsigned flags, Fn&& fn) {
    Object(key, flags, fn);
  }
  template <typename S, typename Fn>
  void Nullable(std::string_view key, std::optional<S>& section, Fn&& fn) {
    simdjson::dom::object object;
    if (!Enter(key, kAbsentOk, &object)) return;
    S& s = section.emplace();
    stack_.push_back({object, Path(key)});
    fn(s);
    stack_.pop_back();
  }
  template <typename S, typename Fn>
  void Keyed(std::string_view key, std::string_view, unsigned flags, std::vector<S>& items,
             std::string S::*name, Fn&& fn) {
    simdjson::dom::object keyed;
    if (!Enter(key, flags, &keyed)) return;
    const std::string path = Path(key);
    for (auto field : keyed) {
      simdjson::dom::object object;
      if (field.value.get_object().get(object) != simdjson::SUCCESS) {
        return Fail(fmt::format("{}.{}", key, field.key), "is not an object");
      }
      S item;
      item.*name = std::string(field.key);
      stack_.push_back({object, fmt::format("{}.{}", path, field.key)});
      fn(item);
      stack_.pop_back();
      if (!status_->ok()) return;
      items.push_back(std::move(item));
    }
  }
  template <typename S, typename Fn>
  void Array(std::string_view key, std::vector<S>& items, Fn&& fn, unsigned flags = kRequired) {
    simdjson::dom::array array;
    if (!Elements(key, flags, &array)) return;
    const std::string path = Path(key);
    size_t index = 0;
    for (simdjson::dom::element e : array) {
      simdjson::dom::object object;
      if (e.get_object().get(object) != simdjson::SUCCESS) {
        return Fail(fmt::format("{}[{}]", key, index), "is not an object");
      }
      S item;
      stack_.push_back({object, fmt::format("{}[{}]", path, index++)});
      fn(item);
      stack_.pop_back();
      if (!status_->ok()) return;
      items.push_back(std::move(item));
    }
  }
  // An object of strings, in file order.
  void Strings(std::string_view key, std::vector<std::pair<std::string, std::string>>& out,
               unsigned flags) {
    Pairs(key, flags, out, "is not a string", [](simdjson::dom::element e, std::string* v) {
      std::string_view s;
      if (e.get_string().get(s) != simdjson::SUCCESS) return false;
      v->assign(s);
      return true;
    });
  }
  // An object of numbers, in file order ({"data_wait": 1.5, ...}).
  void Numbers(std::string_view key, std::vector<std::pair<std::string, double>>& out,
               unsigned flags) {
    Pairs(key, flags, out, "is not a number", [](simdjson::dom::element e, double* v) {
      return e.get_double().get(*v) == simdjson::SUCCESS;
    });
  }
  void List(std::string_view key, std::vector<std::string>& out, unsigned flags) {
    Values(key, flags, out, "a string", [](simdjson::dom::element e, std::string* v) {
      std::string_view s;
      if (e.get_string().get(s) != simdjson::SUCCESS) return false;
      v->assign(s);
      return true;
    });
  }
  void Ints(std::string_view key, std::vector<int>& out, unsigned flags) {
    Values(key, flags, out, "an integer", [](simdjson::dom::element e, int* v) {
      int64_t i = 0;
      if (e.get_int64().get(i) != simdjson::SUCCESS || i < std::numeric_limits<int>::min() ||
          i > std::numeric_limits<int>::max()) {
        return false;
      }
      *v = static_cast<int>(i);
      return true;
    });
  }

 private:
  struct Level {
    simdjson::dom::object object;
    std::string path;
  };

  std::string Path(std::string_view key) const {
    const std::string& path = stack_.back().path;
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }
  void Fail(std::string_view key, std::string_view problem) {
    if (status_->ok()) {
      *status_ =
          absl::InvalidArgumentError(fmt::format("{}: field '{}' {}", source_, Path(key), problem));
    }
  }
  // The member `key` of the open object: false when it is absent (an
  // error unless kAbsentOk) or an earlier field failed.
  bool Find(std::string_view key, unsigned flags, simdjson::dom::element* e) {
    if (!status_->ok()) return false;
    if (stack_.back().object[key].get(*e) == simdjson::SUCCESS) return true;
    if (!(flags & kAbsentOk)) Fail(key, "is missing");
    return false;
  }
  // The object `key`: false when absent or null with kAbsentOk, or at an
  // error.
  bool Enter(std::string_view key, unsigned flags, simdjson::dom::object* object) {
    simdjson::dom::element e;
    if (!Find(key, flags, &e) || ((flags & kAbsentOk) && e.is_null())) return false;
    if (e.get_object().get(*object) == simdjson::SUCCESS) return true;
    Fail(key, "is not an object");
    return false;
  }
  bool Elements(std::string_view key, unsigned flags, simdjson::dom::array* array) {
    simdjson::dom::element e;
    if (!Find(key, flags, &e)) return false;
    if (e.get_array().get(*array) == simdjson::SUCCESS) return true;
    Fail(key, "is not an array");
    return false;
  }
  template <typename T, typename Get>
  void Pairs(std::string_view key, unsigned flags, std::vector<std::pair<std::string, T>>& out,
             std::string_view problem, Get&& get) {
    simdjson::dom::object object;
    if (!Enter(key, flags, &object)) return;
    out.clear();
    for (auto field : object) {
      T value{};
      if (!get(field.value, &value)) return Fail(fmt::format("{}.{}", key, field.key), problem);
      out.emplace_back(std::string(field.key), std::move(value));
    }
  }
  template <typename T, typename Get>
  void Values(std::string_view key, unsigned flags, std::vector<T>& out, std::string_view what,
              Get&& get) {
    simdjson::dom::array array;
    if (!Elements(key, flags, &array)) return;
    out.clear();
    for (simdjson::dom::element e : array) {
      T value{};
      if (!get(e, &value)) return Fail(key, fmt::format("holds a value that is not {}", what));
      out.push_back(std::move(value));
    }
  }

  void Read(std::string_view key, simdjson::dom::element e, std::string& out, unsigned flags) {
    if ((flags & kEmptyIsNull) && e.is_null()) return out.clear();
    std::string_view v;
    if (e.get_string().get(v) != simdjson::SUCCESS) return Fail(key, "is not a string");
    out.assign(v);
  }
  void Read(std::string_view key, simdjson::dom::element e, std::optional<std::string>& out,
            unsigned flags) {
    if (e.is_null()) return out.reset();
    Read(key, e, out.emplace(), flags);
  }
  void Read(std::string_view key, simdjson::dom::element e, bool& out, unsigned) {
    if (e.get_bool().get(out) != simdjson::SUCCESS) Fail(key, "is not a boolean");
  }
  void Read(std::string_view key, simdjson::dom::element e, std::optional<bool>& out,
            unsigned flags) {
    if (e.is_null()) return out.reset();
    Read(key, e, out.emplace(), flags);
  }
  void Read(std::string_view key, simdjson::dom::element e, double& out, unsigned) {
    if (e.is_null()) {
      out = std::numeric_limits<double>::quiet_NaN();
    } else if (e.get_double().get(out) != simdjson::SUCCESS) {
      Fail(key, "is not a number");
    }
  }
  void Read(std::string_view key, simdjson::dom::element e, std::optional<double>& out,
            unsigned flags) {
    if (e.is_null()) return out.reset();
    Read(key, e, out.emplace(), flags);
  }
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
  void Read(std::string_view key, simdjson::dom::element e, Int& out, unsigned) {
    int64_t v = 0;
    if (const auto error = e.get_int64().get(v); error != simdjson::SUCCESS) {
      // A uint64_t past INT64_MAX is simdjson's NUMBER_OUT_OF_RANGE.
      return Fail(key,
                  error == simdjson::NUMBER_OUT_OF_RANGE ? "is out of range" : "is not an integer");
    }
    if (!std::is_same_v<Int, uint64_t> &&
        (v < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
         v > static_cast<int64_t>(std::numeric_limits<Int>::max()))) {
      return Fail(key, "is out of range");
    }
    out = static_cast<Int>(v);
  }

  std::string_view source_;
  absl::Status* status_;
  std::vector<Level> stack_;
};

}  // namespace trainscope::ground::json_fields

#endif  // TRAINSCOPE_SDK_GROUND_JSON_FIELDS_H_
