// Durable file writes. See files.h.
#include "sdk/ground/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "fmt/format.h"

namespace trainscope::ground {

absl::Status ErrnoStatus(int error, std::string_view what) {
  const std::string message = fmt::format("{}: {}", what, std::strerror(error));
  switch (error) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case ENOTDIR:
    case EEXIST:
    case EISDIR:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status EnsureWritableDirectory(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("output directory: empty path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return ErrnoStatus(ec.value(), fmt::format("output directory '{}': cannot create it", dir));
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        fmt::format("output directory '{}': exists but is not a directory", dir));
  }
  const std::string probe = fmt::format("{}/.trainscope-write-test.{}", dir, getpid());
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return ErrnoStatus(errno, fmt::format("output directory '{}': cannot create a file", dir));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, what);
    }
    if (n == 0) return ErrnoStatus(EIO, what);  // no progress: never spin
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

namespace {
void FsyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}
}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view content) {
  const std::filesystem::path target(path);
  const std::string temp =
      (target.parent_path() / fmt::format(".{}.tmp.{}", target.filename().string(), getpid()))
          .string();
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("creating {}", temp));
  absl::Status status = WriteAll(fd, content, fmt::format("writing {}", temp));
  if (status.ok() && fsync(fd) != 0) status = ErrnoStatus(errno, fmt::format("fsync of {}", temp));
  if (close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, fmt::format("closing {}", temp));
  if (status.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, fmt::format("renaming {} to {}", temp, path));
  }
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  FsyncDirectoryOf(path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open {}", path));
  std::string content;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, fmt::format("reading {}", path));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return content;
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("opening {} to fsync it", path));
  const int rc = fsync(fd);
  const int error = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(error, fmt::format("fsync of {}", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadRegularAt(int dir_fd, const std::string& name,
                                          const std::string& shown) {
  const int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("opening {}", shown));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(fmt::format("{} is not a regular file", shown));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(fd);
      return ErrnoStatus(error, fmt::format("reading {}", shown));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return bytes;
}

absl::StatusOr<std::string> ReadRegular(const std::string& path) {
  return ReadRegularAt(AT_FDCWD, path, path);
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void RemoveFlatDirectory(const std::string& path) {
  const int dir_fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    unlink(path.c_str());  // a file or a symlink (ELOOP/ENOTDIR), or nothing
    return;
  }
  if (DIR* d = fdopendir(dir_fd)) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      unlinkat(dir_fd, name.c_str(), 0);  // removes a symlink, not its target
    }
    closedir(d);  // closes dir_fd
  } else {
    close(dir_fd);
  }
  rmdir(path.c_str());
}

}  // namespace trainscope::ground
