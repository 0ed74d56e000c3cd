// report.json writer and reader. See report_json.h.
#include "sdk/export/report_json.h"

#include <simdjson.h>

#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/export/report_fields.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::exporter {

namespace {

// Writes each field report_fields.h describes.
class Writer {
 public:
  explicit Writer(ground::JsonWriter* j) : j_(*j) {}

  void Field(std::string_view key, const std::string& v, unsigned flags) {
    if ((flags & report_fields::kEmptyIsNull) && v.empty()) {
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
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
  void Field(std::string_view key, Int v, unsigned) {
    j_.Key(key).Int(static_cast<int64_t>(v));
  }
  template <typename Fn>
  void Object(std::string_view key, unsigned, Fn&& fn) {
    j_.Key(key).BeginObject();
    fn();
    j_.EndObject();
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
  void Array(std::string_view key, const std::vector<S>& items, Fn&& fn) {
    j_.Key(key).BeginArray();
    for (const S& item : items) {
      j_.BeginObject();
      fn(item);
      j_.EndObject();
    }
    j_.EndArray();
  }
  void Strings(std::string_view key, const std::vector<std::pair<std::string, std::string>>& kv) {
    j_.Key(key).BeginObject();
    for (const auto& [k, v] : kv) j_.Key(k).String(v);
    j_.EndObject();
  }
  void Numbers(std::string_view key, const std::vector<std::pair<std::string, double>>& kv) {
    j_.Key(key).BeginObject();
    for (const auto& [k, v] : kv) j_.Key(k).Number(v);
    j_.EndObject();
  }
  void Ints(std::string_view key, const std::vector<int>& values) {
    j_.Key(key).BeginArray();
    for (int v : values) j_.Int(v);
    j_.EndArray();
  }

 private:
  ground::JsonWriter& j_;
};

}  // namespace

std::string ReportToJson(const Report& r) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  Writer writer(&j);
  j.BeginObject();
  report_fields::DescribeReport(r, writer);
  j.EndObject();
  std::string out = j.Take();
  out.push_back('\n');
  return out;
}

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

// Reads fields of one JSON object, remembering the first error with the
// field's full dotted path.
class FieldReader {
 public:
  FieldReader(object obj, std::string path, std::string_view source, absl::Status* status)
      : obj_(obj), path_(std::move(path)), source_(source), status_(status) {}

  // A section added after schema 1 was first released: absent is fine.
  FieldReader OptionalChild(std::string_view key) {
    if (!valid_ || IsNull(key) || !Has(key)) {
      return FieldReader(object(), Path(key), source_, status_, /*valid=*/false);
    }
    return Child(key);
  }
  bool Has(std::string_view key) {
    element e;
    return valid_ && obj_[key].get(e) == simdjson::SUCCESS;
  }
  FieldReader Child(std::string_view key) {
    object child;
    if (Get(key, "an object", [&](element e) { return e.get_object().get(child); })) {
      return FieldReader(child, Path(key), source_, status_);
    }
    return FieldReader(object(), Path(key), source_, status_, /*valid=*/false);
  }
  void String(std::string_view key, std::string* out) {
    std::string_view v;
    if (Get(key, "a string", [&](element e) { return e.get_string().get(v); })) out->assign(v);
  }
  template <typename Int>
  void Integer(std::string_view key, Int* out) {
    int64_t v = 0;
    if (Get(key, "an integer", [&](element e) { return e.get_int64().get(v); })) {
      *out = static_cast<Int>(v);
    }
  }
  // A null number reads as NaN: the writer emits null for non-finite values.
  void Number(std::string_view key, double* out) {
    if (valid_ && IsNull(key)) {
      *out = std::numeric_limits<double>::quiet_NaN();
      return;
    }
    double v = 0;
    if (Get(key, "a number", [&](element e) { return e.get_double().get(v); })) *out = v;
  }
  void OptionalNumber(std::string_view key, std::optional<double>* out) {
    if (!valid_ || IsNull(key)) return;
    double v = 0;
    Number(key, &v);
    *out = v;
  }
  void Bool(std::string_view key, bool* out) {
    bool v = false;
    if (Get(key, "a boolean", [&](element e) { return e.get_bool().get(v); })) *out = v;
  }
  void OptionalBool(std::string_view key, std::optional<bool>* out) {
    if (!valid_ || IsNull(key)) return;
    bool v = false;
    Bool(key, &v);
    *out = v;
  }
  bool IsNull(std::string_view key) {
    if (!valid_) return true;
    element e;
    return obj_[key].get(e) == simdjson::SUCCESS && e.is_null();
  }
  object raw() const { return obj_; }
  bool valid() const { return valid_; }
  std::string Path(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }
  void Fail(std::string_view key, std::string_view problem) {
    if (status_->ok()) {
      *status_ =
          absl::InvalidArgumentError(fmt::format("{}: field '{}' {}", source_, Path(key), problem));
    }
  }

 private:
  FieldReader(object obj, std::string path, std::string_view source, absl::Status* status,
              bool valid)
      : obj_(obj), path_(std::move(path)), source_(source), status_(status), valid_(valid) {}

  template <typename Fn>
  bool Get(std::string_view key, std::string_view type, Fn&& read) {
    if (!valid_) return false;
    element e;
    if (obj_[key].get(e) != simdjson::SUCCESS) {
      Fail(key, "is missing");
      return false;
    }
    if (read(e) != simdjson::SUCCESS) {
      Fail(key, fmt::format("is not {}", type));
      return false;
    }
    return true;
  }

  object obj_;
  std::string path_;
  std::string_view source_;
  absl::Status* status_;
  bool valid_ = true;
};

// Reads each field report_fields.h describes, into the section open at
// the top of a stack of FieldReaders.
class Reader {
 public:
  Reader(FieldReader root, std::string_view source, absl::Status* status)
      : source_(source), status_(status) {
    stack_.push_back(std::move(root));
  }

  template <typename T>
  void Field(std::string_view key, T& out, unsigned flags) {
    FieldReader& r = stack_.back();
    if (!r.valid() || ((flags & report_fields::kAbsentOk) && !r.Has(key))) return;
    Read(r, key, out, flags);
  }
  template <typename Fn>
  void Object(std::string_view key, unsigned flags, Fn&& fn) {
    FieldReader child = (flags & report_fields::kAbsentOk) ? stack_.back().OptionalChild(key)
                                                           : stack_.back().Child(key);
    stack_.push_back(std::move(child));
    fn();
    stack_.pop_back();
  }
  template <typename S, typename Fn>
  void Nullable(std::string_view key, std::optional<S>& section, Fn&& fn) {
    FieldReader child = stack_.back().OptionalChild(key);
    if (!child.valid()) return;
    S& s = section.emplace();
    stack_.push_back(std::move(child));
    fn(s);
    stack_.pop_back();
  }
  template <typename S, typename Fn>
  void Keyed(std::string_view key, std::string_view, unsigned flags, std::vector<S>& items,
             std::string S::*name, Fn&& fn) {
    FieldReader keyed = (flags & report_fields::kAbsentOk) ? stack_.back().OptionalChild(key)
                                                           : stack_.back().Child(key);
    if (!keyed.valid()) return;
    for (auto field : keyed.raw()) {
      object obj;
      if (field.value.get_object().get(obj) != simdjson::SUCCESS) {
        keyed.Fail(field.key, "is not an object");
        return;
      }
      S item;
      item.*name = std::string(field.key);
      stack_.emplace_back(obj, keyed.Path(field.key), source_, status_);
      fn(item);
      stack_.pop_back();
      items.push_back(std::move(item));
    }
  }
  template <typename S, typename Fn>
  void Array(std::string_view key, std::vector<S>& items, Fn&& fn) {
    FieldReader& r = stack_.back();
    if (!r.valid()) return;
    simdjson::dom::array array;
    if (!Elements(r, key, &array)) return;
    const std::string path = r.Path(std::string(key) + "[]");
    // `r` is not used past here: emplace_back below may move it.
    for (element e : array) {
      object obj;
      if (e.get_object().get(obj) != simdjson::SUCCESS) {
        stack_.back().Fail(key, "holds a value that is not an object");
        return;
      }
      S item;
      stack_.emplace_back(obj, path, source_, status_);
      fn(item);
      stack_.pop_back();
      items.push_back(std::move(item));
    }
  }
  // An object of strings, in file order.
  void Strings(std::string_view key, std::vector<std::pair<std::string, std::string>>& out) {
    FieldReader pairs = stack_.back().Child(key);
    if (!pairs.valid()) return;
    for (auto field : pairs.raw()) {
      std::string_view value;
      if (field.value.get_string().get(value) != simdjson::SUCCESS) {
        pairs.Fail(field.key, "is not a string");
        return;
      }
      out.emplace_back(std::string(field.key), std::string(value));
    }
  }
  // An object of numbers, in file order ({"data_wait": 1.5, ...}).
  void Numbers(std::string_view key, std::vector<std::pair<std::string, double>>& out) {
    FieldReader pairs = stack_.back().Child(key);
    if (!pairs.valid()) return;
    for (auto field : pairs.raw()) {
      double value = 0;
      if (field.value.get_double().get(value) != simdjson::SUCCESS) {
        pairs.Fail(field.key, "is not a number");
        return;
      }
      out.emplace_back(std::string(field.key), value);
    }
  }
  void Ints(std::string_view key, std::vector<int>& out) {
    FieldReader& r = stack_.back();
    if (!r.valid()) return;
    simdjson::dom::array array;
    if (!Elements(r, key, &array)) return;
    for (element e : array) {
      int64_t v = 0;
      if (e.get_int64().get(v) != simdjson::SUCCESS || v < std::numeric_limits<int>::min() ||
          v > std::numeric_limits<int>::max()) {
        r.Fail(key, "holds a value that is not an integer");
        return;
      }
      out.push_back(static_cast<int>(v));
    }
  }

 private:
  static bool Elements(FieldReader& r, std::string_view key, simdjson::dom::array* array) {
    if (!r.Has(key)) {
      r.Fail(key, "is missing");
      return false;
    }
    if (r.raw()[key].get_array().get(*array) != simdjson::SUCCESS) {
      r.Fail(key, "is not an array");
      return false;
    }
    return true;
  }
  static void Read(FieldReader& r, std::string_view key, std::string& out, unsigned flags) {
    if ((flags & report_fields::kEmptyIsNull) && r.IsNull(key)) {
      out.clear();
    } else {
      r.String(key, &out);
    }
  }
  static void Read(FieldReader& r, std::string_view key, bool& out, unsigned) { r.Bool(key, &out); }
  static void Read(FieldReader& r, std::string_view key, double& out, unsigned) {
    r.Number(key, &out);
  }
  static void Read(FieldReader& r, std::string_view key, std::optional<double>& out, unsigned) {
    r.OptionalNumber(key, &out);
  }
  static void Read(FieldReader& r, std::string_view key, std::optional<bool>& out, unsigned) {
    r.OptionalBool(key, &out);
  }
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int>>>
  static void Read(FieldReader& r, std::string_view key, Int& out, unsigned) {
    r.Integer(key, &out);
  }

  std::string_view source_;
  absl::Status* status_;
  std::vector<FieldReader> stack_;
};

}  // namespace

absl::StatusOr<Report> ParseReportJson(std::string_view json, std::string_view source) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  element root;
  if (auto error = parser.parse(padded).get(root); error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        fmt::format("{}: not valid JSON ({})", source, simdjson::error_message(error)));
  }
  object top;
  if (root.get_object().get(top) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: the top level is not an object", source));
  }
  absl::Status status;
  Report r;
  FieldReader doc(top, "", source, &status);
  // The version first: a newer report may lack what this reader expects.
  doc.Integer("schema_version", &r.schema_version);
  if (!status.ok()) return status;
  if (r.schema_version > kReportSchemaVersion || r.schema_version < 1) {
    return absl::FailedPreconditionError(
        fmt::format("{}: schema_version {} is not one this trainscope (reads up to {}) understands",
                    source, r.schema_version, kReportSchemaVersion));
  }
  Reader reader(doc, source, &status);
  report_fields::DescribeReport(r, reader);
  if (!status.ok()) return status;
  if (r.idle.share < 0 || r.idle.share > 1) {
    return absl::InvalidArgumentError(
        fmt::format("{}: field 'idle.share' is {}, outside 0..1", source, r.idle.share));
  }
  return r;
}

absl::StatusOr<Report> ReadReportFile(const std::string& path) {
  absl::StatusOr<std::string> content = ground::ReadFileToString(path);
  if (!content.ok()) return content.status();
  return ParseReportJson(*content, path);
}

}  // namespace trainscope::exporter
