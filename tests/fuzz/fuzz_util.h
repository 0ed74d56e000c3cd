// tests/fuzz/fuzz_util.h: what the libFuzzer targets share. Readers that
// take a path get the input through a file in a private temp folder,
// rewritten for every input.
#ifndef TRAINSCOPE_TESTS_FUZZ_FUZZ_UTIL_H_
#define TRAINSCOPE_TESTS_FUZZ_FUZZ_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace trainscope::fuzz {

// `data` as the whole content of the file `name` in this process's temp
// folder; returns its path. Aborts when it cannot write (not an input's
// fault, so not a finding).
inline std::string AsFile(const uint8_t* data, size_t size, const char* name) {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/trainscope-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    return pattern;
  }();
  const std::string path = dir + "/" + name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  close(fd);
  return path;
}

}  // namespace trainscope::fuzz

#endif  // TRAINSCOPE_TESTS_FUZZ_FUZZ_UTIL_H_
