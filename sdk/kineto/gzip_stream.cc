// GzipStream: ISA-L's isal_inflate, one gzip member after another.
#include "sdk/kineto/gzip_stream.h"

#include <isa-l/igzip_lib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fmt/format.h"
#include "sdk/ground/files.h"

namespace trainscope::kineto {
namespace {

constexpr size_t kInput = 256 << 10;
// Input kept in the buffer before a member after the first starts (gzip
// headers hold a name, a comment and up to 64 KiB of extra fields).
constexpr size_t kHeaderMargin = kInput / 2;

const char* Reason(int code) {
  switch (code) {
    case ISAL_INVALID_BLOCK:
      return "invalid deflate block";
    case ISAL_INVALID_SYMBOL:
      return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK:
      return "invalid back-reference distance";
    case ISAL_INVALID_WRAPPER:
      return "invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD:
      return "not deflate data (unsupported compression method)";
    case ISAL_INCORRECT_CHECKSUM:
      return "a CRC-32, length or header check failed";
    case ISAL_NEED_DICT:
      return "needs a preset dictionary";
    default:
      return "corrupt data";
  }
}

}  // namespace

struct GzipStream::State {
  inflate_state isal;
};

GzipStream::GzipStream(int fd)
    : state_(std::make_unique<State>()), in_(std::make_unique<uint8_t[]>(kInput)), fd_(fd) {
  isal_inflate_init(&state_->isal);
  state_->isal.crc_flag = ISAL_GZIP;
}

GzipStream::~GzipStream() = default;

absl::Status GzipStream::Fault(const char* what) const {
  return absl::DataLossError(fmt::format("{} (compressed byte {}, uncompressed byte {})", what,
                                         compressed_ - state_->isal.avail_in, produced_));
}

absl::StatusOr<bool> GzipStream::Refill() {
  inflate_state& s = state_->isal;
  if (in_eof_) return false;
  if (s.avail_in > 0) std::memmove(in_.get(), s.next_in, s.avail_in);
  s.next_in = in_.get();
  ssize_t got;
  do {
    got = read(fd_, in_.get() + s.avail_in, kInput - s.avail_in);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return ground::ErrnoStatus(
        errno, fmt::format("cannot read the gzip data (compressed byte {})", compressed_));
  }
  if (got == 0) {
    in_eof_ = true;
    return false;
  }
  compressed_ += static_cast<uint64_t>(got);
  s.avail_in += static_cast<uint32_t>(got);
  return true;
}

absl::StatusOr<size_t> GzipStream::Read(char* out, size_t room) {
  if (!pending_.ok()) return pending_;
  inflate_state& s = state_->isal;
  size_t wrote = 0;
  while (wrote < room && !finished_) {
    if (s.block_state == ISAL_BLOCK_FINISH) {
      // A member has ended (its checks passed): another may follow.
      // The next member's whole header must be in the buffer: ISA-L 2.30
      // does not keep a header's flags and checksum across calls, so a
      // header split between two reads can fail to parse.
      absl::Status read_status;
      while (s.avail_in < kHeaderMargin) {
        absl::StatusOr<bool> more = Refill();
        if (!more.ok()) read_status = more.status();
        if (!more.ok() || !*more) break;
      }
      if (!read_status.ok()) {
        pending_ = read_status;
        break;
      }
      if (s.avail_in < 2 || s.next_in[0] != 0x1f || s.next_in[1] != 0x8b) {
        finished_ = true;  // the end, or trailing bytes that gzip also ignores
        break;
      }
      const uint8_t* next = s.next_in;
      const uint32_t avail = s.avail_in;
      isal_inflate_reset(&s);
      s.crc_flag = ISAL_GZIP;
      s.next_in = const_cast<uint8_t*>(next);
      s.avail_in = avail;
    }
    if (s.avail_in == 0 && !in_eof_) {
      absl::StatusOr<bool> more = Refill();
      if (!more.ok()) {
        pending_ = more.status();
        break;
      }
    }
    // Even with no input left, ISA-L may hold output that did not fit.
    s.next_out = reinterpret_cast<uint8_t*>(out + wrote);
    s.avail_out = static_cast<uint32_t>(std::min<size_t>(room - wrote, 1u << 30));
    const uint32_t out_before = s.avail_out, in_before = s.avail_in;
    const int code = isal_inflate(&s);
    const size_t made = out_before - s.avail_out;
    wrote += made;
    produced_ += made;
    if (code != ISAL_DECOMP_OK) {
      pending_ = Fault(Reason(code));
      break;
    }
    if (made == 0 && s.avail_in == in_before && s.block_state != ISAL_BLOCK_FINISH) {
      pending_ = Fault(in_eof_ && s.avail_in == 0 ? "the gzip data ends early (truncated file?)"
                                                  : "inflate made no progress");
      break;
    }
  }
  if (wrote == 0 && !pending_.ok()) return pending_;
  return wrote;
}

}  // namespace trainscope::kineto
