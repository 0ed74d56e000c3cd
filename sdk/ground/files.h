// sdk/ground/files.h: durable file writes and errno-to-Status (internal).
#ifndef TRAINSCOPE_SDK_GROUND_FILES_H_
#define TRAINSCOPE_SDK_GROUND_FILES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainscope::ground {

// A Status for errno `error` while doing `what` ("writing /out/report.json"):
// ENOSPC and EDQUOT map to ResourceExhausted, EACCES/EPERM/EROFS to
// PermissionDenied, ENOENT to NotFound, ENOTDIR/EEXIST/EISDIR to
// FailedPrecondition, anything else to Internal. The message ends with
// strerror's text.
absl::Status ErrnoStatus(int error, std::string_view what);

// Creates `dir` and its parents if missing and checks that a file can be
// created in it. Errors name the directory and the failing step.
absl::Status EnsureWritableDirectory(const std::string& dir);

// Writes `content` to `path` so that readers see the old file or the whole
// new one, never a part: a temporary file beside it, fsync, rename, fsync of
// the directory. On error the temporary is removed and `path` is untouched.
absl::Status WriteFileAtomically(const std::string& path, std::string_view content);

// Writes all of `data` to `fd`, retrying short writes and EINTR; a write
// that makes no progress is EIO. Errors name `what`.
absl::Status WriteAll(int fd, std::string_view data, std::string_view what);

// Reads a whole file. Errors name the path.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Opens `path` with `flags` (O_RDONLY, or O_RDONLY | O_DIRECTORY for a
// directory) and fsyncs it. Errors name the path and the failing call.
absl::Status FsyncPath(const std::string& path, int flags);

// Reads the regular file `name` in the directory `dir_fd` (AT_FDCWD: `name`
// is a path) without following a symlink. Errors name `shown`:
// InvalidArgument when it is not a regular file, else the errno's.
absl::StatusOr<std::string> ReadRegularAt(int dir_fd, const std::string& name,
                                          const std::string& shown);
absl::StatusOr<std::string> ReadRegular(const std::string& path);

// The names in `dir` but "." and "..", sorted; none when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir);

// Removes `path` and, if it is a directory, the entries in it (one level:
// for directories without subdirectories). A symlink is removed itself,
// never followed. Best effort: errors are ignored.
void RemoveFlatDirectory(const std::string& path);

}  // namespace trainscope::ground

#endif  // TRAINSCOPE_SDK_GROUND_FILES_H_
