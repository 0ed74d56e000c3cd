// MANIFEST.json, written and read. See trainscope/checkpoint.h.
#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "fmt/format.h"
#include "sdk/checkpoint/layout.h"
#include "sdk/ground/json_writer.h"
#include "trainscope/checkpoint.h"

namespace trainscope {
namespace {

std::string Hex(uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace

std::string ManifestToJson(const CheckpointManifest& m) {
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  j.BeginObject();
  j.Key("format_version").Int(m.format_version);
  j.Key("step").Int(m.step);
  j.Key("wall_time_unix_s").Number(m.wall_time_unix_s);
  j.Key("files").BeginArray();
  for (const ManifestEntry& f : m.files) {
    j.BeginObject();
    j.Key("name").String(f.name);
    j.Key("size").Int(static_cast<int64_t>(f.size));
    j.Key("xxh3").String(Hex(f.xxh3));
    j.EndObject();
  }
  j.EndArray();
  j.Key("metadata").BeginObject();
  for (const auto& [k, v] : m.metadata) j.Key(k).String(v);
  j.EndObject();
  j.EndObject();
  return j.Take() + "\n";
}

absl::StatusOr<CheckpointManifest> ParseManifest(std::string_view json, std::string_view source) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", source, what));
  };
  if (auto error = parser.parse(padded).get(root)) {
    return bad(fmt::format("not valid JSON ({})", simdjson::error_message(error)));
  }
  CheckpointManifest m;
  int64_t version = 0;
  if (root["format_version"].get_int64().get(version)) return bad("no integer format_version");
  if (version != 1) return bad(fmt::format("format_version {} is not 1", version));
  m.format_version = 1;
  if (root["step"].get_int64().get(m.step) || m.step < 0) return bad("no step >= 0");
  if (root["wall_time_unix_s"].get_double().get(m.wall_time_unix_s)) {
    return bad("no number wall_time_unix_s");
  }
  simdjson::dom::array files;
  if (root["files"].get_array().get(files)) return bad("no files array");
  for (simdjson::dom::element f : files) {
    ManifestEntry e;
    std::string_view name, hex;
    int64_t size = 0;
    if (f["name"].get_string().get(name) || f["size"].get_int64().get(size) || size < 0 ||
        f["xxh3"].get_string().get(hex) || hex.size() != 16) {
      return bad(
          fmt::format("files[{}] needs a name, a size >= 0 and a 16-digit xxh3", m.files.size()));
    }
    if (!checkpoint::ValidFileName(name)) {
      return bad(
          fmt::format("files[{}] name \"{}\" is not a plain file name inside the store "
                      "(no '/', no '..', no leading '.')",
                      m.files.size(), name));
    }
    for (char c : hex) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return bad(fmt::format("files[{}] xxh3 is not hex", m.files.size()));
      e.xxh3 = e.xxh3 << 4 | static_cast<uint64_t>(digit);
    }
    e.name = std::string(name);
    e.size = static_cast<uint64_t>(size);
    m.files.push_back(std::move(e));
  }
  simdjson::dom::object metadata;
  if (root["metadata"].get_object().get(metadata) == simdjson::SUCCESS) {
    for (auto field : metadata) {
      std::string_view value;
      if (field.value.get_string().get(value)) return bad("metadata values must be strings");
      m.metadata.emplace_back(std::string(field.key), std::string(value));
    }
  }
  return m;
}

}  // namespace trainscope
