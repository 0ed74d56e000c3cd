// LossFile: see loss_file.h.
#include "sdk/session/loss_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <utility>

#include "sdk/ground/files.h"
#include "sdk/ground/locks.h"

namespace trainscope {

LossFile::LossFile(std::string dir, std::string name)
    : dir_(std::move(dir)), name_(std::move(name)) {}

LossFile::~LossFile() { (void)Close(); }

absl::Status LossFile::Open() {
  curve_.file = name_;
  path_ = dir_ + "/" + name_;
  file_ = std::fopen(path_.c_str(), "we");
  if (file_ == nullptr) return ground::ErrnoStatus(errno, "cannot create " + path_);
  constexpr size_t kBuffer = 64 << 10;
  buffer_ = std::make_unique<char[]>(kBuffer);
  std::setvbuf(file_, buffer_.get(), _IOFBF, kBuffer);
  return absl::OkStatus();
}

absl::Status LossFile::Append(int64_t step, double value, bool skipped) {
  ground::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("RecordLoss: the session has finished");
  if (status_.ok() && file_ == nullptr && curve_.file.empty()) status_ = Open();
  if (!status_.ok()) {
    ++curve_.lines_lost;
    return status_;
  }
  const bool finite = std::isfinite(value);
  char line[96];
  const int n =
      finite
          ? std::snprintf(line, sizeof(line), "{\"step\": %lld, \"loss\": %.9g%s}\n",
                          static_cast<long long>(step), value, skipped ? ", \"skipped\": true" : "")
          : std::snprintf(line, sizeof(line), "{\"step\": %lld, \"loss\": null%s}\n",
                          static_cast<long long>(step), skipped ? ", \"skipped\": true" : "");
  if (std::fwrite(line, 1, static_cast<size_t>(n), file_) != static_cast<size_t>(n)) {
    status_ = ground::ErrnoStatus(errno, "cannot write " + path_);
    ++curve_.lines_lost;
    return status_;
  }
  ++curve_.points;
  curve_.nonfinite += finite ? 0 : 1;
  curve_.skipped += skipped ? 1 : 0;
  if (finite) curve_.last = value;
  return absl::OkStatus();
}

std::optional<LossCurve> LossFile::Close() {
  ground::MutexLock lock(&mu_);
  closed_ = true;
  if (file_ != nullptr) {
    // What the buffer held and could not be written is lost with the file's
    // error: counted as lines whose writes failed, the exact number unknown,
    // so at least one.
    if (std::fclose(file_) != 0 && status_.ok()) {
      status_ = ground::ErrnoStatus(errno, "cannot write " + path_);
      curve_.lines_lost = std::max<int64_t>(curve_.lines_lost, 1);
    }
    file_ = nullptr;
    buffer_.reset();
  }
  if (curve_.file.empty()) return std::nullopt;
  return curve_;
}

}  // namespace trainscope
