// Finding and loading libcupti. See library.h.
#include "sdk/cupti/library.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "fmt/format.h"

namespace trainscope::cupti {
namespace {

template <typename Fn>
bool Bind(void* handle, const char* symbol, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (*fn == nullptr && missing->empty()) *missing = symbol;
  return *fn != nullptr;
}

// Directories of the libcudart.so.* already loaded into the process.
std::vector<std::string> LoadedCudartDirectories() {
  std::vector<std::string> dirs;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        const char* base = name != nullptr ? std::strrchr(name, '/') : nullptr;
        if (base != nullptr && std::strncmp(base, "/libcudart.so", 13) == 0) {
          static_cast<std::vector<std::string>*>(data)->emplace_back(name, base - name);
        }
        return 0;
      },
      &dirs);
  return dirs;
}

std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  if (const char* path = std::getenv("TRAINSCOPE_CUPTI_PATH"); path != nullptr && path[0] != 0) {
    paths.emplace_back(path);
  }
  paths.emplace_back("libcupti.so.13");
  for (const std::string& dir : LoadedCudartDirectories()) {
    paths.push_back(dir + "/libcupti.so.13");
    paths.push_back(dir + "/../extras/CUPTI/lib64/libcupti.so.13");
  }
  paths.emplace_back("libcupti.so");
  paths.emplace_back("/usr/local/cuda/lib64/libcupti.so.13");
  paths.emplace_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  return paths;
}

}  // namespace

std::string CuptiLibrary::ResultText(CUptiResult result) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return fmt::format("CUPTI error {}", static_cast<int>(result));
}

absl::StatusOr<CuptiLibrary> LoadCuptiFrom(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(fmt::format("CUPTI unavailable: cannot load {}", path));
  }
  CuptiLibrary lib;
  lib.path = path;
  std::string missing;
  Bind(handle, "cuptiActivityEnable", &lib.activity_enable, &missing);
  Bind(handle, "cuptiActivityDisable", &lib.activity_disable, &missing);
  Bind(handle, "cuptiActivityFlushAll", &lib.activity_flush_all, &missing);
  Bind(handle, "cuptiActivityGetNextRecord", &lib.activity_get_next_record, &missing);
  Bind(handle, "cuptiActivityGetNumDroppedRecords", &lib.activity_get_num_dropped_records,
       &missing);
  Bind(handle, "cuptiActivityRegisterCallbacks", &lib.activity_register_callbacks, &missing);
  Bind(handle, "cuptiActivityRegisterTimestampCallback", &lib.activity_register_timestamp_callback,
       &missing);
  Bind(handle, "cuptiActivityEnableAllSyncRecords", &lib.activity_enable_all_sync_records,
       &missing);
  Bind(handle, "cuptiSetThreadIdType", &lib.set_thread_id_type, &missing);
  Bind(handle, "cuptiGetResultString", &lib.get_result_string, &missing);
  Bind(handle, "cuptiGetCallbackName", &lib.get_callback_name, &missing);
  if (!missing.empty()) {
    dlclose(handle);
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: {} lacks {} (older than CUDA 13?)", path, missing));
  }
  return lib;  // the handle stays open for the life of the process
}

absl::StatusOr<const CuptiLibrary*> LoadCupti() {
  static std::mutex mu;
  static const CuptiLibrary* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded != nullptr) return loaded;
  std::string incomplete;  // the first library found that lacked a function
  for (const std::string& path : Candidates()) {
    absl::StatusOr<CuptiLibrary> lib = LoadCuptiFrom(path);
    if (lib.ok()) {
      loaded = new CuptiLibrary(*std::move(lib));  // never freed, like the library
      return loaded;
    }
    if (incomplete.empty() && lib.status().message().find(" lacks ") != absl::string_view::npos) {
      incomplete = std::string(lib.status().message());
    }
  }
  if (!incomplete.empty()) return absl::UnavailableError(incomplete);
  return absl::UnavailableError(
      "CUPTI unavailable: libcupti.so.13 not found (searched $TRAINSCOPE_CUPTI_PATH, the loader "
      "path, next to libcudart, /usr/local/cuda)");
}

}  // namespace trainscope::cupti
