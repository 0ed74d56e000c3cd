// sdk/ground/json_writer.h: the one JSON writer of trainscope.
//
//   JsonWriter json(JsonWriter::kPretty);
//   json.BeginObject().Key("run").BeginObject().Key("name").String("a").EndObject();
//   json.EndObject();
//   Write(json.str());
//
// Appends to an in-memory string; commas and (optionally) indentation are
// managed for the caller. Non-finite numbers are written as null.
#ifndef TRAINSCOPE_SDK_GROUND_JSON_WRITER_H_
#define TRAINSCOPE_SDK_GROUND_JSON_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainscope::ground {

// Appends `text` as a JSON string literal (quotes and escapes included).
void AppendJsonString(std::string* out, std::string_view text);

class JsonWriter {
 public:
  enum Style { kCompact, kPretty };
  explicit JsonWriter(Style style = kCompact) : style_(style) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // An optional number or bool: null when empty.
  JsonWriter& Number(const std::optional<double>& value);
  JsonWriter& Bool(const std::optional<bool>& value);

  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void BeforeValue();
  void Newline();

  Style style_;
  std::string out_;
  std::vector<bool> has_items_;  // per open container
  bool after_key_ = false;
};

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_JSON_WRITER_H_
