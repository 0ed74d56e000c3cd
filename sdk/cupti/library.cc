// Finding and loading libcupti. See library.h.
#include "sdk/cupti/library.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cctype>
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

// The paths of the loaded libraries whose file name is the library `stem`
// ("libcudart", "libcupti"), plain or hashed, or with `prefix` "libtorch".
std::vector<std::string> LoadedLibraries(const char* stem, bool prefix_only = false) {
  struct Search {
    const char* stem;
    bool prefix_only;
    std::vector<std::string> paths;
  } search{stem, prefix_only, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const char* name = info->dlpi_name;
        const char* base = name != nullptr ? std::strrchr(name, '/') : nullptr;
        if (base == nullptr) return 0;
        const bool match = s->prefix_only
                               ? std::strncmp(base + 1, s->stem, std::strlen(s->stem)) == 0
                               : IsLibraryFile(base + 1, s->stem);
        if (match) s->paths.emplace_back(name);
        return 0;
      },
      &search);
  return search.paths;
}

std::string_view FileName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

int CuptiMajor(uint32_t api) {
  if (api >= 130000) return static_cast<int>(api / 10000);
  return api >= 19 ? 12 : 11;
}

int SonameMajor(std::string_view path) {
  const std::string_view file = FileName(path);
  const size_t so = file.find(".so.");
  if (so == std::string_view::npos) return 0;
  int major = 0;
  for (size_t i = so + 4; i < file.size() && file[i] >= '0' && file[i] <= '9'; ++i) {
    major = major * 10 + (file[i] - '0');
  }
  return major;
}

bool IsLibraryFile(std::string_view file, std::string_view stem) {
  if (file.substr(0, stem.size()) != stem) return false;
  std::string_view rest = file.substr(stem.size());
  if (!rest.empty() && rest[0] == '-') {  // auditwheel's -<hash>
    size_t i = 1;
    while (i < rest.size() && std::isalnum(static_cast<unsigned char>(rest[i]))) ++i;
    if (i == 1) return false;
    rest = rest.substr(i);
  }
  return rest == ".so" || rest.substr(0, 4) == ".so.";
}

CuptiVersion DescribeCuptiVersion(uint32_t api) {
  if (api >= 130000) {  // CUDA 13 on: xxyyzz, major, minor, CUPTI's own update
    const uint32_t major = api / 10000;
    const uint32_t minor = api / 100 % 100;
    return {fmt::format("{}.{}", major, minor), major == 13};
  }
  // Before: a small integer per release (cupti_version.h). The records of
  // every 12.x release match the 13.0 structs on every field read (kernel
  // records since Kernel4); 11.x and older are not read.
  static const std::pair<uint32_t, const char*> kNames[] = {
      {13, "11.0"}, {14, "11.1"}, {15, "11.2"}, {16, "11.5"},         {17, "11.6"}, {18, "11.8"},
      {19, "12.0"}, {20, "12.2"}, {21, "12.3"}, {22, "12.4"},         {23, "12.5"}, {24, "12.6"},
      {25, "12.7"}, {26, "12.8"}, {27, "12.9"}, {28, "12.9 Update 1"}};
  for (const auto& [version, name] : kNames) {
    if (version == api) return {name, api >= 19};
  }
  if (api < 13) return {fmt::format("older than 11.0 (API version {})", api), false};
  return {fmt::format("12.x (API version {})", api), true};
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

CandidateInputs ProcessCandidateInputs(int driver_major) {
  CandidateInputs in;
  if (const char* path = std::getenv("TRAINSCOPE_CUPTI_PATH"); path != nullptr && path[0] != 0) {
    in.override_path = path;
  }
  in.loaded_cupti = LoadedLibraries("libcupti");
  in.loaded_cudart = LoadedLibraries("libcudart");
  in.loaded_torch = LoadedLibraries("libtorch", /*prefix_only=*/true);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* dir = std::getenv(var); dir != nullptr && dir[0] != 0)
      in.toolkits.emplace_back(dir);
  }
  in.toolkits.emplace_back("/usr/local/cuda");
  in.driver_major = driver_major;
  return in;
}

std::vector<std::string> CuptiCandidates(const CandidateInputs& in) {
  std::vector<std::string> paths;
  auto add = [&](std::string path) {
    if (std::find(paths.begin(), paths.end(), path) == paths.end())
      paths.push_back(std::move(path));
  };
  // Searched, not already loaded: never one newer than the driver.
  auto add_searched = [&](std::string path) {
    const int major = SonameMajor(path);
    if (in.driver_major > 0 && major > in.driver_major) return;
    add(std::move(path));
  };
  if (!in.override_path.empty()) add(in.override_path);
  for (const std::string& loaded : in.loaded_cupti) add(loaded);
  for (const std::string& cudart : in.loaded_cudart) {
    const int major = SonameMajor(cudart);
    if (major == 0) continue;
    const std::string dir = Directory(cudart);
    const std::string file = fmt::format("libcupti.so.{}", major);
    add_searched(dir + "/" + file);
    std::vector<std::string> hashed;  // a repaired wheel's libcupti-<hash>.so.N
    if (DIR* listing = opendir(dir.c_str()); listing != nullptr) {
      while (const dirent* entry = readdir(listing)) {
        const std::string_view name = entry->d_name;
        if (name != file && IsLibraryFile(name, "libcupti") && SonameMajor(name) == major) {
          hashed.push_back(dir + "/" + std::string(name));
        }
      }
      closedir(listing);
    }
    std::sort(hashed.begin(), hashed.end());
    for (std::string& path : hashed) add_searched(std::move(path));
    add_searched(dir + "/../extras/CUPTI/lib64/" + file);
    add_searched(dir + "/../../cuda_cupti/lib/" + file);
  }
  for (const std::string& torch : in.loaded_torch) {
    const std::string site = Directory(Directory(Directory(torch)));  // site/torch/lib/x.so
    add_searched(site + "/nvidia/cu13/lib/libcupti.so.13");
    add_searched(site + "/nvidia/cuda_cupti/lib/libcupti.so.12");
  }
  add_searched("libcupti.so.13");
  add_searched("libcupti.so.12");
  for (const char* major : {"13", "12"}) {
    for (const std::string& toolkit : in.toolkits) {
      for (const char* sub : {"/extras/CUPTI/lib64/", "/lib64/", "/lib/"}) {
        add_searched(toolkit + sub + "libcupti.so." + major);
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

absl::StatusOr<CuptiLibrary> LoadCuptiFrom(const std::string& path, int driver_version) {
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
  if (driver_version > 0 && CuptiMajor(lib.api_version) > driver_version / 1000) {
    return absl::UnavailableError(fmt::format(
        "CUPTI unavailable: CUPTI {} found ({}) needs a CUDA {} driver; this one is {}.{}",
        version.name, path, CuptiMajor(lib.api_version), driver_version / 1000,
        driver_version % 1000 / 10));
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
  Bind(handle, "cuptiEnableCallback", &lib.enable_callback, &missing);
  std::string optional;
#if CUPTI_API_VERSION >= 130000
  Bind(handle, "cuptiSubscribe_v2", &lib.subscribe_v2, &optional);
#endif
  Bind(handle, "cuptiActivitySetAttribute", &lib.activity_set_attribute, &optional);
  Bind(handle, "cuptiActivityEnableRuntimeApi", &lib.activity_enable_runtime_api, &optional);
  Bind(handle, "cuptiActivityEnableDriverApi", &lib.activity_enable_driver_api, &optional);
  // Optional: 12.2 and 12.4 lack it; CUPTI's default sync recording applies.
  Bind(handle, "cuptiActivityEnableAllSyncRecords", &lib.activity_enable_all_sync_records,
       &optional);
  if (!missing.empty()) {
    return absl::UnavailableError(fmt::format("CUPTI unavailable: {} lacks {}; this build reads {}",
                                              path, missing, kReadableCupti));
  }
  return lib;  // the handle stays open for the life of the process
}

absl::StatusOr<const CuptiLibrary*> LoadCupti(int driver_version) {
  static std::mutex mu;
  static const CuptiLibrary* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded != nullptr) return loaded;
  std::string refused;  // the first library found and refused, and why
  for (const std::string& path : CuptiCandidates(ProcessCandidateInputs(driver_version / 1000))) {
    // A libcupti someone else already loaded (Kineto's) is the process's
    // CUPTI: refusing it ends the search, a second one is never loaded.
    void* resident = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (resident != nullptr) dlclose(resident);
    absl::StatusOr<CuptiLibrary> lib = LoadCuptiFrom(path, driver_version);
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
