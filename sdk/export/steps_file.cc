// steps.jsonl. See steps_file.h.
#include "sdk/export/steps_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>

#include "fmt/format.h"
#include "sdk/ground/files.h"
#include "sdk/ground/json_fields.h"
#include "sdk/ground/json_writer.h"

namespace trainscope::exporter {

namespace {

// The row is written through a pointer into room reserved for the longest
// row (kRowRoom): one string resize a row, no bounds checks a field.
char* WriteInt(char* out, int64_t value) { return std::to_chars(out, out + 24, value).ptr; }

template <size_t N>
char* WriteLiteral(char* out, const char (&text)[N]) {
  std::memcpy(out, text, N - 1);
  return out + N - 1;
}

// A number that round-trips: `value` as a whole number of 10^-decimals
// units printed exactly ("12.5", "0.000001", "3"), when that reads back as
// the same double (values derived from integer nanoseconds always do);
// else the shortest round-trip form (at most 24 characters); null if not
// finite. About 5x faster than fmt's shortest form, and what a reader gets
// back is the same double.
// The number of decimals is a template argument: the divisions by 10^n are
// by constants.
constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

template <int kDecimals>
char* WriteNumber(char* out, double value) {
  constexpr double kScale[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
  static_assert(kDecimals >= 0 && kDecimals <= 9);
  if (!std::isfinite(value)) return WriteLiteral(out, "null");
  const double scaled = value * kScale[kDecimals];
  if (std::fabs(scaled) < 9e15) {
    const auto units = static_cast<int64_t>(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
    if (static_cast<double>(units) / kScale[kDecimals] == value) {
      const uint64_t magnitude = units < 0 ? 0 - static_cast<uint64_t>(units) : units;
      if (units < 0 || std::signbit(value)) *out++ = '-';
      constexpr auto kPow10 = static_cast<uint64_t>(kScale[kDecimals]);
      const uint64_t whole = magnitude / kPow10;
      if (whole < 10) {  // mostly: milliseconds of a step, seconds of a run
        *out++ = static_cast<char>('0' + whole);
      } else if (whole < 100) {
        std::memcpy(out, kDigitPairs + 2 * whole, 2);
        out += 2;
      } else {
        out = std::to_chars(out, out + 24, whole).ptr;
      }
      // Below 10^9: 32-bit divisions.
      auto fraction = static_cast<uint32_t>(magnitude % kPow10);
      if (fraction != 0) {
        // The digits up to the last non-zero one, right-aligned in
        // `width` places after leading zeros.
        *out++ = '.';
        int width = kDecimals;
        while (fraction % 10 == 0) {
          fraction /= 10;
          --width;
        }
        std::memcpy(out, "000000000", 9);  // the leading zeros; the row has room
        char* digit = out + width;
        while (fraction >= 100) {
          digit -= 2;
          std::memcpy(digit, kDigitPairs + 2 * (fraction % 100), 2);
          fraction /= 100;
        }
        if (fraction >= 10) {
          std::memcpy(digit - 2, kDigitPairs + 2 * fraction, 2);
        } else {
          digit[-1] = static_cast<char>('0' + fraction);
        }
        out += width;
      }
      return out;
    }
  }
  return fmt::format_to(out, "{}", value);
}

constexpr int kMsDecimals = 6;  // ms from integer ns
constexpr int kSDecimals = 9;   // s from integer ns
// Keys and punctuation (about 200) and kPhaseCount + 8 numbers of at most
// 25 characters, without top_cause (appended on its own).
constexpr size_t kRowRoom = 256 + (kPhaseCount + 8) * 25 + kPhaseCount * 16;

}  // namespace

namespace {

// The room WriteStepRow needs for `row`: the fixed part and top_cause
// escaped (at most 6 bytes a byte, and the quotes).
size_t RowBound(const Report::Step& row) { return kRowRoom + 96 + 6 * row.top_cause.size() + 2; }

// `row` as one line into `out`, which has RowBound(row) bytes of room;
// returns the end. Formatted by hand (one row a step, on the drain
// thread): fixed keys, and the phase names need no escaping.
char* WriteStepRow(char* out, const Report::Step& row) {
  out = WriteLiteral(out, "{\"step\":");
  out = WriteInt(out, row.index);
  out = WriteLiteral(out, ",\"start_s\":");
  out = WriteNumber<kSDecimals>(out, row.start_s);
  out = WriteLiteral(out, ",\"duration_ms\":");
  out = WriteNumber<kMsDecimals>(out, row.duration_ms);
  out = WriteLiteral(out, ",\"samples\":");
  out = WriteInt(out, row.samples);
  out = WriteLiteral(out, ",\"sync_ms\":");
  out = WriteNumber<kMsDecimals>(out, row.sync_ms);
  out = WriteLiteral(out, ",\"data_wait_ms\":");
  out = WriteNumber<kMsDecimals>(out, row.data_wait_ms);
  out = WriteLiteral(out, ",\"phases_ms\":{");
  bool first = true;
  for (int p = 0; p < kPhaseCount; ++p) {
    if (!(row.phase_ms[p] > 0)) continue;
    if (!first) *out++ = ',';
    first = false;
    const std::string_view name = PhaseName(static_cast<Phase>(p));
    *out++ = '"';
    std::memcpy(out, name.data(), name.size());
    out += name.size();
    out = WriteLiteral(out, "\":");
    out = WriteNumber<kMsDecimals>(out, row.phase_ms[p]);
  }
  out = WriteLiteral(out, "},\"idle_ms\":");
  out = WriteNumber<kMsDecimals>(out, row.idle_ms);
  out = WriteLiteral(out, ",\"top_cause\":");
  const std::string& cause = row.top_cause;
  const bool plain = std::all_of(cause.begin(), cause.end(), [](char c) {
    return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\';
  });
  if (plain) {  // a cause name: copied as it is
    *out++ = '"';
    std::memcpy(out, cause.data(), cause.size());
    out += cause.size();
    *out++ = '"';
  } else {
    std::string escaped;
    ground::AppendJsonString(&escaped, cause);
    std::memcpy(out, escaped.data(), escaped.size());
    out += escaped.size();
  }
  out = WriteLiteral(out, ",\"memory_bytes\":");
  out = WriteInt(out, row.memory_bytes);
  out = WriteLiteral(out, ",\"peak_memory_bytes\":");
  out = WriteInt(out, row.peak_memory_bytes);
  return WriteLiteral(out, "}\n");
}

}  // namespace

void AppendStepRowJsonLine(std::string* line, const Report::Step& row) {
  const size_t at = line->size();
  line->resize(at + RowBound(row));
  char* end = WriteStepRow(line->data() + at, row);
  line->resize(static_cast<size_t>(end - line->data()));
}

std::string StepRowToJsonLine(const Report::Step& row) {
  std::string line;
  line.reserve(320);
  AppendStepRowJsonLine(&line, row);
  return line;
}

namespace {

// ParseStepRow with the caller's parser, over `line`, which at least
// simdjson::SIMDJSON_PADDING readable bytes follow (no copy).
absl::StatusOr<Report::Step> ParsePaddedStepRow(simdjson::dom::parser& parser,
                                                std::string_view line, std::string_view where) {
  simdjson::dom::element root;
  simdjson::dom::object object;
  if (auto error = parser.parse(line.data(), line.size(), /*realloc_if_needed=*/false).get(root);
      error != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: not a JSON object ({})", where,
                                                  ground::json_fields::ParseErrorWhy(error)));
  }
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(fmt::format("{}: not a JSON object", where));
  }
  using ground::json_fields::kRequired;
  absl::Status status;
  ground::json_fields::Reader r(object, "", where, &status);
  Report::Step step;
  r.Field("step", step.index, kRequired);
  r.Field("start_s", step.start_s, kRequired);
  r.Field("duration_ms", step.duration_ms, kRequired);
  // Never negative; null (the writer's non-finite number) reads as NaN.
  r.Check("duration_ms", !(step.duration_ms < 0), "is negative");
  r.Field("samples", step.samples, kRequired);
  r.Field("sync_ms", step.sync_ms, kRequired);
  r.Field("data_wait_ms", step.data_wait_ms, kRequired);
  std::vector<std::pair<std::string, double>> phases;
  r.Numbers("phases_ms", phases, kRequired);
  for (const auto& [name, ms] : phases) {
    int p = 0;
    while (p < kPhaseCount && PhaseName(static_cast<Phase>(p)) != name) ++p;
    r.Check(fmt::format("phases_ms.{}", name), p < kPhaseCount, "is not a phase name");
    if (p < kPhaseCount) step.phase_ms[p] = ms;
  }
  r.Field("idle_ms", step.idle_ms, kRequired);
  r.Field("top_cause", step.top_cause, kRequired);
  r.Field("memory_bytes", step.memory_bytes, kRequired);
  r.Field("peak_memory_bytes", step.peak_memory_bytes, kRequired);
  if (!status.ok()) return status;
  return step;
}

}  // namespace

absl::StatusOr<Report::Step> ParseStepRow(std::string_view line, std::string_view where) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(line);
  return ParsePaddedStepRow(parser, padded, where);
}

absl::Status ForEachStepRow(const std::string& path,
                            const std::function<bool(const Report::Step&)>& fn) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ground::ErrnoStatus(errno, "opening " + path);
  constexpr size_t kBlock = 1 << 20;
  constexpr size_t kMaxLine = 1 << 20;
  std::string pending;  // the start of a line the last block cut
  // A block of 1 MiB, or the file's size and one byte when smaller: a small
  // file (a short run, a fuzzer's input) does not pay for a megabyte.
  struct stat st;
  const size_t room =
      fstat(fd, &st) == 0 && st.st_size >= 0 && static_cast<uint64_t>(st.st_size) < kBlock
          ? static_cast<size_t>(st.st_size) + 1
          : kBlock;
  std::string block(room, '\0');
  size_t line_no = 0;
  absl::Status status;
  bool more = true;
  while (more && status.ok()) {
    const ssize_t n = ::read(fd, block.data(), block.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      status = ground::ErrnoStatus(errno, "reading " + path);
      break;
    }
    if (n == 0) break;  // a last line without its newline was cut by a crash: not a row
    size_t at = 0;
    const std::string_view got(block.data(), static_cast<size_t>(n));
    while (more) {
      const size_t newline = got.find('\n', at);
      if (newline == std::string_view::npos) {
        pending.append(got.substr(at));
        // A row is a few hundred bytes: far more without a newline is not
        // a steps file, and must not be held whole.
        if (pending.size() > kMaxLine) {
          status = absl::InvalidArgumentError(
              fmt::format("{}:{}: a line of more than {} bytes: not a steps file", path,
                          line_no + 1, kMaxLine));
          more = false;
        }
        break;
      }
      std::string_view line = got.substr(at, newline - at);
      if (!pending.empty()) {
        pending.append(line);
        line = pending;
      }
      at = newline + 1;
      ++line_no;
      if (!line.empty()) {
        absl::StatusOr<Report::Step> row = ParseStepRow(line, fmt::format("{}:{}", path, line_no));
        if (!row.ok()) {
          status = row.status();
          break;
        }
        more = fn(*row);
      }
      pending.clear();
    }
  }
  ::close(fd);
  return status;
}

absl::StatusOr<std::vector<Report::Step>> ReadStepsFile(const std::string& path) {
  std::vector<Report::Step> rows;
  absl::Status status = ForEachStepRow(path, [&rows](const Report::Step& row) {
    rows.push_back(row);
    return true;
  });
  if (!status.ok()) return status;
  return rows;
}

struct StepRowReader::Parser {
  simdjson::dom::parser parser;
};

absl::StatusOr<std::unique_ptr<StepRowReader>> StepRowReader::Open(const std::string& path,
                                                                   size_t block_bytes) {
  std::unique_ptr<StepRowReader> reader(new StepRowReader());
  reader->path_ = path;
  reader->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader->fd_ < 0) return ground::ErrnoStatus(errno, "opening " + path);
  // A line inside the block has the rest of the block and the padding
  // after it: simdjson reads it in place.
  reader->block_.resize(std::max<size_t>(block_bytes, 1) + simdjson::SIMDJSON_PADDING);
  reader->parser_ = std::make_unique<Parser>();
  return reader;
}

StepRowReader::~StepRowReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status StepRowReader::Rewind() {
  if (::lseek(fd_, 0, SEEK_SET) < 0) return ground::ErrnoStatus(errno, "rewinding " + path_);
  at_ = got_ = 0;
  pending_.clear();
  pending_size_ = 0;
  eof_ = false;
  line_no_ = rows_ = 0;
  status_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::StatusOr<bool> StepRowReader::NextLine(std::string_view* line) {
  constexpr size_t kMaxLine = 1 << 20;  // as ForEachStepRow's
  if (pending_size_ > 0) {              // handed out last time
    pending_.clear();
    pending_size_ = 0;
  }
  const size_t block_bytes = block_.size() - simdjson::SIMDJSON_PADDING;
  for (;;) {
    const std::string_view got(block_.data() + at_, got_ - at_);
    const size_t newline = got.find('\n');
    if (newline != std::string_view::npos) {
      ++line_no_;
      at_ += newline + 1;
      if (pending_.empty()) {
        *line = got.substr(0, newline);
        return true;
      }
      pending_.append(got.substr(0, newline));
      pending_size_ = pending_.size();
      pending_.reserve(pending_size_ + simdjson::SIMDJSON_PADDING);
      *line = std::string_view(pending_.data(), pending_size_);
      return true;
    }
    pending_.append(got);
    at_ = got_;
    // A row is a few hundred bytes: far more without a newline is not a
    // steps file, and must not be held whole.
    if (pending_.size() > kMaxLine) {
      return absl::InvalidArgumentError(fmt::format(
          "{}:{}: a line of more than {} bytes: not a steps file", path_, line_no_ + 1, kMaxLine));
    }
    if (eof_) return false;
    const ssize_t n = ::read(fd_, block_.data(), block_bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ground::ErrnoStatus(errno, "reading " + path_);
    }
    at_ = 0;
    got_ = static_cast<size_t>(n);
    // At the end, a last line without its newline was cut by a crash: not
    // a row.
    if (n == 0) eof_ = true;
  }
}

absl::StatusOr<bool> StepRowReader::Next(Report::Step* row) {
  if (!status_.ok()) return status_;
  for (;;) {
    std::string_view line;
    absl::StatusOr<bool> got = NextLine(&line);
    if (!got.ok()) {
      status_ = got.status();
      return status_;
    }
    if (!*got) return false;
    if (line.empty()) continue;
    where_.assign(path_);
    where_ += ':';
    char digits[24];
    where_.append(digits, std::to_chars(digits, digits + sizeof digits, line_no_).ptr);
    absl::StatusOr<Report::Step> parsed = ParsePaddedStepRow(parser_->parser, line, where_);
    if (!parsed.ok()) {
      status_ = parsed.status();
      return status_;
    }
    *row = std::move(*parsed);
    ++rows_;
    return true;
  }
}

std::string StepsFileForReport(const std::string& report_path) {
  const size_t slash = report_path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  std::string name = report_path.substr(base);
  if (name.rfind("report", 0) == 0) name.replace(0, 6, "steps");
  if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) name += "l";
  return report_path.substr(0, base) + name;
}

absl::StatusOr<std::unique_ptr<StepsWriter>> StepsWriter::Open(const std::string& dir,
                                                               std::string_view file,
                                                               size_t queue_bytes) {
  std::unique_ptr<StepsWriter> writer(new StepsWriter());
  writer->path_ = fmt::format("{}/{}", dir, file);
  writer->queue_bytes_ = std::max(queue_bytes, kBufferLimit + kRowSlack);
  writer->fd_ = ::open(writer->path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (writer->fd_ < 0) return ground::ErrnoStatus(errno, "creating " + writer->path_);
  StepsWriter* w = writer.get();
  writer->thread_ = std::thread([w] { w->WriteLoop(); });
  return writer;
}

StepsWriter::~StepsWriter() { (void)Close(); }

void StepsWriter::WriteLoop() {
  pthread_setname_np(pthread_self(), "ts-steps");  // as top and gdb show it
  std::vector<char> writing;                       // swapped with queued_
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return !queued_.empty() || closing_; });
    if (queued_.empty()) break;  // closing, and all written
    writing.swap(queued_);
    const int64_t rows = queued_rows_;
    queued_rows_ = 0;
    const bool failed = !status_.ok();
    lock.unlock();
    absl::Status written =
        failed ? absl::OkStatus()
               : ground::WriteAll(fd_, std::string_view(writing.data(), writing.size()),
                                  "writing " + path_);
    writing.clear();
    if (writing.capacity() > kKeptRoom) {  // a stall is over: give its room back
      writing.shrink_to_fit();
      writing.reserve(kKeptRoom);
    }
    lock.lock();
    // After an error, nothing more is written: the rows count as dropped.
    if (failed || !written.ok()) dropped_ += rows;
    status_.Update(written);
  }
}

void StepsWriter::Queue(std::string_view lines, int64_t rows) {
  if (lines.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  const size_t needed = queued_.size() + lines.size();
  if (needed > queue_bytes_ || !status_.ok()) {
    dropped_ += rows;
    return;
  }
  // Room grows by doubling up to queue_bytes, never past it.
  if (needed > queued_.capacity()) {
    queued_.reserve(std::min(queue_bytes_, std::max(needed, 2 * queued_.capacity())));
  }
  queued_.insert(queued_.end(), lines.begin(), lines.end());
  queued_rows_ += rows;
  wake_.notify_all();
}

void StepsWriter::Append(const Report::Step& row) {
  if (fd_ < 0) return;
  // Rows are written into room sized once (no zero-fill a row, as a
  // string's resize would do).
  if (buffer_.empty()) buffer_.resize(kBufferLimit + kRowSlack);
  const size_t bound = RowBound(row);
  ++rows_;
  if (bound > kRowSlack) {  // an odd top_cause of thousands of bytes
    (void)Flush();
    std::string line;
    AppendStepRowJsonLine(&line, row);
    Queue(line, 1);
    return;
  }
  used_ = static_cast<size_t>(WriteStepRow(buffer_.data() + used_, row) - buffer_.data());
  ++buffered_rows_;
  if (used_ >= kBufferLimit) (void)Flush();
}

absl::Status StepsWriter::Flush() {
  Queue(std::string_view(buffer_.data(), used_), buffered_rows_);
  used_ = 0;
  buffered_rows_ = 0;
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

int64_t StepsWriter::rows_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

absl::Status StepsWriter::Close() {
  if (fd_ < 0) {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  (void)Flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  // EINVAL: a file that cannot be synced (a pipe), not an error.
  if (::fsync(fd_) != 0 && errno != EINVAL && status_.ok()) {
    status_ = ground::ErrnoStatus(errno, "syncing " + path_);
  }
  ::close(fd_);
  fd_ = -1;
  return status_;
}

}  // namespace trainscope::exporter
