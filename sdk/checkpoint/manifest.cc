// MANIFEST.json, written and read. See trainscope/checkpoint.h.
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "sdk/checkpoint/layout.h"
#include "sdk/ground/json_fields.h"
#include "sdk/ground/json_writer.h"
#include "trainscope/checkpoint.h"

namespace trainscope {
namespace {

// MANIFEST.json as it is on disk (the checksum as 16 hex digits).
struct DiskFile {
  std::string name;
  int64_t size = 0;
  std::string xxh3;
};
struct DiskManifest {
  int format_version = 1;
  int64_t step = 0;
  double wall_time_unix_s = 0;
  std::vector<DiskFile> files;
  std::vector<std::pair<std::string, std::string>> metadata;
};

bool IsHex16(std::string_view hex) {
  return hex.size() == 16 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Every field of MANIFEST.json, named once: the writer and the reader walk
// this list (ground/json_fields.h).
template <typename M, typename V>
void DescribeManifest(M& m, V& v) {
  using ground::json_fields::kAbsentOk;
  using ground::json_fields::kRequired;
  v.Field("format_version", m.format_version, kRequired);
  v.Check("format_version", m.format_version == 1, "is not 1, the format this trainscope reads");
  v.Field("step", m.step, kRequired);
  v.Check("step", m.step >= 0, "is negative");
  v.Field("wall_time_unix_s", m.wall_time_unix_s, kRequired);
  v.Array("files", m.files, [&v](auto& f) {
    v.Field("name", f.name, kRequired);
    const bool plain = checkpoint::ValidFileName(f.name);
    v.Check("name", plain,
            plain ? ""
                  : fmt::format("\"{}\" is not a plain file name inside the store (no '/', no "
                                "'..', no leading '.')",
                                f.name));
    v.Field("size", f.size, kRequired);
    v.Check("size", f.size >= 0, "is negative");
    v.Field("xxh3", f.xxh3, kRequired);
    v.Check("xxh3", IsHex16(f.xxh3), "is not 16 lowercase hex digits");
  });
  v.Strings("metadata", m.metadata, kAbsentOk);
}

}  // namespace

std::string ManifestToJson(const CheckpointManifest& m) {
  DiskManifest disk;
  disk.format_version = m.format_version;
  disk.step = m.step;
  disk.wall_time_unix_s = m.wall_time_unix_s;
  for (const ManifestEntry& f : m.files) {
    disk.files.push_back({f.name, static_cast<int64_t>(f.size), fmt::format("{:016x}", f.xxh3)});
  }
  disk.metadata = m.metadata;
  ground::JsonWriter j(ground::JsonWriter::kPretty);
  ground::json_fields::Writer w(&j);
  j.BeginObject();
  DescribeManifest(static_cast<const DiskManifest&>(disk), w);
  j.EndObject();
  return j.Take() + "\n";
}

absl::StatusOr<CheckpointManifest> ParseManifest(std::string_view json, std::string_view source) {
  simdjson::dom::parser parser;
  absl::StatusOr<simdjson::dom::object> top =
      ground::json_fields::ParseTopObject(parser, json, source);
  if (!top.ok()) return top.status();
  absl::Status status;
  DiskManifest disk;
  ground::json_fields::Reader reader(*top, "", source, &status);
  DescribeManifest(disk, reader);
  if (!status.ok()) return status;
  CheckpointManifest m;
  m.format_version = disk.format_version;
  m.step = disk.step;
  m.wall_time_unix_s = disk.wall_time_unix_s;
  for (DiskFile& f : disk.files) {
    ManifestEntry e;
    e.name = std::move(f.name);
    e.size = static_cast<uint64_t>(f.size);
    for (char c : f.xxh3)
      e.xxh3 = e.xxh3 << 4 | static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    m.files.push_back(std::move(e));
  }
  m.metadata = std::move(disk.metadata);
  return m;
}

}  // namespace trainscope
