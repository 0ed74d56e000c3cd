// Finding and loading libcupti. See library.h.
#include "sdk/cupti/library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
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

// The paths of the loaded libraries whose file name starts with `prefix`
// ("libcudart.so", "libcupti.so", "libtorch_cuda.so").
std::vector<std::string> LoadedLibraries(const char* prefix) {
  struct Search {
    const char* prefix;
    std::vector<std::string> paths;
  } search{prefix, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const char* name = info->dlpi_name;
        const char* base = name != nullptr ? std::strrchr(name, '/') : nullptr;
        if (base != nullptr && std::strncmp(base + 1, s->prefix, std::strlen(s->prefix)) == 0) {
          s->paths.emplace_back(name);
        }
        return 0;
      },
      &search);
  return search.paths;
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

CuptiVersion DescribeCuptiVersion(uint32_t api) {
  if (api >= 130000) {  // CUDA 13 on: xxyyzz, major, minor, CUPTI's own update
    const uint32_t major = api / 10000;
    const uint32_t minor = api / 100 % 100;
    return {fmt::format("{}.{}", major, minor), major == 13};
  }
  // Before: a small integer per release (cupti_version.h). The records of
  // 12.4 (v22) to 12.9 Update 1 (v28) match the 13.0 structs on every field
  // read; older ones were not checked.
  static const std::pair<uint32_t, const char*> kNames[] = {
      {13, "11.0"}, {14, "11.1"}, {15, "11.2"}, {16, "11.5"},         {17, "11.6"}, {18, "11.8"},
      {19, "12.0"}, {20, "12.2"}, {21, "12.3"}, {22, "12.4"},         {23, "12.5"}, {24, "12.6"},
      {25, "12.7"}, {26, "12.8"}, {27, "12.9"}, {28, "12.9 Update 1"}};
  for (const auto& [version, name] : kNames) {
    if (version == api) return {name, api >= 22};
  }
  if (api < 13) return {fmt::format("older than 11.0 (API version {})", api), false};
  return {fmt::format("12.x (API version {})", api), false};
}

std::string DescribeOtherCuptiUser(const char* subscriber_name, const char* injection_path,
                                   const char* nsys_session) {
  if (subscriber_name != nullptr && subscriber_name[0] != 0) {
    std::string name = subscriber_name;
    if (name.rfind("CUPTI for ", 0) == 0) name.erase(0, 10);
    return name;
  }
  const std::string injection = injection_path != nullptr ? injection_path : "";
  auto has = [&](const char* part) { return injection.find(part) != std::string::npos; };
  if ((nsys_session != nullptr && nsys_session[0] != 0) || has("ToolsInjection") || has("nsys") ||
      has("nsight-systems") || has("Nsight Systems")) {
    return "Nsight Systems";
  }
  if (has("InterceptorInjectionTarget") || has("ncu") || has("nsight-compute") ||
      has("Nsight Compute")) {
    return "Nsight Compute";
  }
  if (!injection.empty()) return fmt::format("the CUDA injection library {}", injection);
  return "another CUPTI client (the PyTorch profiler, Nsight, a debugger)";
}

std::vector<std::string> CuptiCandidates() {
  std::vector<std::string> paths;
  auto add = [&](std::string path) {
    if (std::find(paths.begin(), paths.end(), path) == paths.end())
      paths.push_back(std::move(path));
  };
  if (const char* path = std::getenv("TRAINSCOPE_CUPTI_PATH"); path != nullptr && path[0] != 0) {
    add(path);
  }
  for (const std::string& loaded : LoadedLibraries("libcupti.so")) add(loaded);
  for (const std::string& cudart : LoadedLibraries("libcudart.so.")) {
    const std::string major = cudart.substr(cudart.rfind("libcudart.so.") + 13, 2);
    const std::string dir = Directory(cudart);
    const std::string file = "libcupti.so." + major;
    add(dir + "/" + file);
    add(dir + "/../extras/CUPTI/lib64/" + file);
    add(dir + "/../../cuda_cupti/lib/" + file);
  }
  for (const std::string& torch : LoadedLibraries("libtorch")) {
    const std::string site = Directory(Directory(Directory(torch)));  // site/torch/lib/x.so
    add(site + "/nvidia/cu13/lib/libcupti.so.13");
    add(site + "/nvidia/cuda_cupti/lib/libcupti.so.12");
  }
  add("libcupti.so.13");
  add("libcupti.so.12");
  std::vector<std::string> toolkits;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* dir = std::getenv(var); dir != nullptr && dir[0] != 0)
      toolkits.emplace_back(dir);
  }
  toolkits.emplace_back("/usr/local/cuda");
  for (const char* major : {"13", "12"}) {
    for (const std::string& toolkit : toolkits) {
      for (const char* sub : {"/extras/CUPTI/lib64/", "/lib64/", "/lib/"}) {
        add(toolkit + sub + "libcupti.so." + major);
      }
    }
  }
  add("libcupti.so");
  return paths;
}

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
  // First, before any other call: which struct layouts its records have.
  std::string missing;
  if (!Bind(handle, "cuptiGetVersion", &lib.get_version, &missing)) {
    dlclose(handle);
    return absl::UnavailableError(fmt::format(
        "CUPTI unavailable: {} lacks cuptiGetVersion; this build reads {}", path, kReadableCupti));
  }
  Bind(handle, "cuptiGetResultString", &lib.get_result_string, &missing);
  const CUptiResult result = lib.get_version(&lib.api_version);
  if (result != CUPTI_SUCCESS) {
    const std::string text = lib.ResultText(result);
    dlclose(handle);
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: cuptiGetVersion of {} failed: {}", path, text));
  }
  const CuptiVersion version = DescribeCuptiVersion(lib.api_version);
  lib.version = version.name;
  // From here on the library ran code and may hold process state (an
  // atexit hook, threads): it stays loaded, unused, rather than be unloaded.
  if (!version.readable) {
    return absl::UnavailableError(
        fmt::format("CUPTI unavailable: CUPTI {} found ({}); this build reads {}", version.name,
                    path, kReadableCupti));
  }
  Bind(handle, "cuptiActivityEnable", &lib.activity_enable, &missing);
  Bind(handle, "cuptiActivityDisable", &lib.activity_disable, &missing);
  Bind(handle, "cuptiActivityFlushAll", &lib.activity_flush_all, &missing);
  Bind(handle, "cuptiActivityGetNextRecord", &lib.activity_get_next_record, &missing);
  Bind(handle, "cuptiActivityGetNumDroppedRecords", &lib.activity_get_num_dropped_records,
       &missing);
  Bind(handle, "cuptiActivityRegisterCallbacks", &lib.activity_register_callbacks, &missing);
  Bind(handle, "cuptiActivityRegisterTimestampCallback", &lib.activity_register_timestamp_callback,
       &missing);
  Bind(handle, "cuptiSetThreadIdType", &lib.set_thread_id_type, &missing);
  Bind(handle, "cuptiGetResultString", &lib.get_result_string, &missing);
  Bind(handle, "cuptiGetCallbackName", &lib.get_callback_name, &missing);
  Bind(handle, "cuptiSubscribe", &lib.subscribe, &missing);
  Bind(handle, "cuptiUnsubscribe", &lib.unsubscribe, &missing);
  std::string optional;
  Bind(handle, "cuptiSubscribe_v2", &lib.subscribe_v2, &optional);
  // Optional: 12.2 and 12.4 lack it; CUPTI's default sync recording applies.
  Bind(handle, "cuptiActivityEnableAllSyncRecords", &lib.activity_enable_all_sync_records,
       &optional);
  if (!missing.empty()) {
    return absl::UnavailableError(fmt::format("CUPTI unavailable: {} lacks {}; this build reads {}",
                                              path, missing, kReadableCupti));
  }
  return lib;  // the handle stays open for the life of the process
}

absl::StatusOr<const CuptiLibrary*> LoadCupti() {
  static std::mutex mu;
  static const CuptiLibrary* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded != nullptr) return loaded;
  std::string refused;  // the first library found and refused, and why
  for (const std::string& path : CuptiCandidates()) {
    // A libcupti someone else already loaded (Kineto's) is the process's
    // CUPTI: refusing it ends the search, a second one is never loaded.
    void* resident = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (resident != nullptr) dlclose(resident);
    absl::StatusOr<CuptiLibrary> lib = LoadCuptiFrom(path);
    if (lib.ok()) {
      loaded = new CuptiLibrary(*std::move(lib));  // never freed, like the library
      return loaded;
    }
    if (refused.empty() && lib.status().message().find("cannot load") == absl::string_view::npos) {
      refused = std::string(lib.status().message());
    }
    if (resident != nullptr) break;
  }
  if (!refused.empty()) return absl::UnavailableError(refused);
  return absl::UnavailableError(
      "CUPTI unavailable: libcupti not found (searched $TRAINSCOPE_CUPTI_PATH, the loaded "
      "libraries, beside libcudart and torch's NVIDIA wheels, the loader path, $CUDA_HOME, "
      "$CUDA_PATH, /usr/local/cuda)");
}

}  // namespace trainscope::cupti
