// sdk/kineto/trace_input.h: the bytes of one trace file as the trace reader
// sees them, a window [begin, end) over a buffer followed by zeroed padding
// (simdjson and the scanner read past what they parse). Internal to
// sdk/kineto.
//
//   TraceInput in;
//   if (absl::Status s = in.Open(path, /*max_threads=*/0, &stats); !s.ok()) ...
//   while (...) {
//     ... parse in.data[in.begin, in.end), advance in.begin ...
//     if (!in.eof) { if (absl::Status s = in.Fill(); !s.ok()) ... }
//   }
//   absl::Status rest = in.Finish(/*read_rest=*/true);  // gzip checks
//
// Where the bytes come from is decided at Open: a plain regular file is
// mapped whole (no copy; pages already parsed are handed back); a gzip file
// is inflated by ISA-L, ahead of the parse on a thread of its own when it
// will be parsed in shares, else here in a buffer that stays in cache; a
// pipe or anything else goes through zlib. Memory: a mapped file's
// resident pages stay within about 8 MiB behind `begin`; a streamed one
// uses a 2 MiB buffer (bigger only while one element is bigger); one
// inflated ahead, its whole inflated size (at most 64 MiB plus 64 KiB).
#ifndef TRAINSCOPE_SDK_KINETO_TRACE_INPUT_H_
#define TRAINSCOPE_SDK_KINETO_TRACE_INPUT_H_

#include <simdjson.h>
#include <sys/types.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "sdk/kineto/gzip_stream.h"
#include "sdk/kineto/trace_reader.h"

namespace trainscope::kineto {

// Zeroed bytes after the data, always readable. ScanComposite reads whole
// 64-byte blocks past it.
inline constexpr size_t kInputPadding = simdjson::SIMDJSON_PADDING;
static_assert(kInputPadding >= 64);

class TraceInput {
 public:
  TraceInput();
  TraceInput(const TraceInput&) = delete;
  TraceInput& operator=(const TraceInput&) = delete;
  // Stops an inflater still running and closes and unmaps the input.
  ~TraceInput();

  // Opens `path` and reads or maps its first bytes' worth (a mapped file
  // is all read at once). `max_threads` as TraceReader::set_max_threads:
  // whether a gzip file is inflated ahead. `stats` (bytes, compressed,
  // inflate_s, inflated_ahead) is updated from now on and must outlive
  // this. Errors: open(2)'s, naming the file; ResourceExhausted when zlib
  // cannot start.
  absl::Status Open(const std::string& path, int max_threads, ReadStats* stats);

  // Keeps [begin, end), moves it to the front of the buffer, grows the
  // buffer when it is full, and reads more; sets eof at the end of the
  // file. With an inflater, waits for it to get further. Errors: DataLoss
  // (or what the gzip stream says) naming the file and byte.
  absl::Status Fill();

  // After the parse. With `read_rest`, inflates what is left of a gzip file
  // (after the closing '}', usually a newline and the trailer) so that its
  // CRC-32 and length checks run: a failed check is the error. Without,
  // stops the inflater. Either way no thread outlives it, and the stats
  // count the bytes inflated.
  absl::Status Finish(bool read_rest);

  // With a mapped file: hands back the pages wholly before `before` once
  // 8 MiB have piled up. Nothing before `before` may be read again.
  void Release(size_t before);

  // A thread is inflating the file ahead (Fill waits for it).
  bool inflating() const { return inflater_ != nullptr; }
  // ... and has stopped: the next Fill hands over all it has.
  bool inflated() const;
  // All of the file is in data[0, end), none of it streamed through a
  // buffer that Fill refills: other threads may read it.
  bool held_whole() const { return eof && file_ == nullptr && gzip_ == nullptr; }

  // InvalidArgument "<path>: byte <offset>: <what>" for data[index].
  absl::Status Error(size_t index, std::string_view what) const;

  // The window. data[begin, end) is read and not yet consumed; the caller
  // advances begin. data[end, end + kInputPadding) is readable (zeros once
  // a Fill or Open put them there; a caller may write around a batch and
  // restore it). `cap` is the bytes usable from data. `consumed` is the
  // offset of data[0] in the uncompressed file.
  char* data = nullptr;
  size_t cap = 0;
  size_t begin = 0;
  size_t end = 0;
  uint64_t consumed = 0;
  bool eof = false;

 private:
  struct Inflater;

  bool MapWhole(int fd);
  bool StartInflater(off_t file_size, int max_threads);
  void JoinInflater();
  absl::Status AwaitInflater();
  absl::Status InflateError(const absl::Status& fault) const;

  std::string path_;
  ReadStats* stats_ = nullptr;
  int fd_ = -1;                         // the gzip file, while it streams
  std::unique_ptr<GzipStream> gzip_;    // streams it into the buffer (Fill)
  std::unique_ptr<Inflater> inflater_;  // or inflates it ahead (StartInflater)
  gzFile file_ = nullptr;               // any other input that is not a mapped file
  std::unique_ptr<char[]> buf_;         // the bytes, when read or inflated
  void* map_ = nullptr;                 // MapWhole's mapping, when there is one
  size_t map_size_ = 0;
  size_t released_ = 0;  // mapped bytes before this were handed back
};

}  // namespace trainscope::kineto

#endif  // TRAINSCOPE_SDK_KINETO_TRACE_INPUT_H_
