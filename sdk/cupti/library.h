// sdk/cupti/library.h: libcupti, loaded at run time with dlopen.
//
// Nothing links against CUPTI: a binary built with the CUDA toolkit runs on a
// machine without one. CuptiCandidates() lists where the library is looked
// for; the first that loads, has every function below and is a version
// whose records this build reads (DescribeCuptiVersion) wins. The library
// is never unloaded: CUPTI keeps threads and callbacks.
//
// Records are read through the structs of the headers compiled against
// (records.h). The fields read (kind, times, device, stream, correlation id,
// name, cbid, process and thread, return value, copy and sync type) sit at
// the same offsets in every kernel record since Kernel4 and in the other
// records CUPTI 12.x and 13.x emit, so those versions are read and others
// refused with one line: "CUPTI unavailable: CUPTI 11.8 found (PATH); this
// build reads CUPTI 12.x and 13.x". A refused libcupti already in the
// process (Kineto's) ends the search: never a second CUPTI in a process.
// Records are only walked with cuptiActivityGetNextRecord
// (12.x records are shorter than the 13.0 structs: never copy a struct).
//
// Load only after checking that a CUDA driver is present: some libcupti
// builds (13.2) recurse until the stack overflows inside their first call
// (cuptiGetVersion too) when libcuda.so.1 is missing.
#ifndef TRAINSCOPE_SDK_CUPTI_LIBRARY_H_
#define TRAINSCOPE_SDK_CUPTI_LIBRARY_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace trainscope::cupti {

// A CUPTI API version (cuptiGetVersion) in words, and whether this build
// reads its records.
struct CuptiVersion {
  std::string name;  // the CUDA release: "12.4", "12.9 Update 1", "13.2"
  bool readable = false;
};
CuptiVersion DescribeCuptiVersion(uint32_t api_version);
// What DescribeCuptiVersion accepts, in words.
inline constexpr char kReadableCupti[] = "CUPTI 12.x and 13.x";

// The CUDA major release of a libcupti: from its API version (13 from
// 130001, 12 from 19 to 29 and unknown 12.x ones, 11 before).
int CuptiMajor(uint32_t api_version);

// The major version in a shared library's file name: 12 for
// "libcupti.so.12", "libcudart-8f6e2b1a.so.12" (the hashed names of
// auditwheel-repaired wheels) or "libcupti.so.12.8.90"; 0 for "libcupti.so".
int SonameMajor(std::string_view path);

// Whether a file name is the library `stem` ("libcudart"), plain or hashed:
// "libcudart.so.12", "libcudart-8f6e2b1a.so.12", not "libcudart_static.a".
bool IsLibraryFile(std::string_view file_name, std::string_view stem);

// What the search for libcupti starts from; ProcessCandidateInputs() reads
// it from this process.
struct CandidateInputs {
  std::string override_path;              // $TRAINSCOPE_CUPTI_PATH
  std::vector<std::string> loaded_cupti;  // loaded libcupti*, plain or hashed
  std::vector<std::string> loaded_cudart;
  std::vector<std::string> loaded_torch;  // loaded libtorch*
  std::vector<std::string> toolkits;      // $CUDA_HOME, $CUDA_PATH, /usr/local/cuda
  int driver_major = 0;                   // of cuDriverGetVersion; 0: unknown
};
CandidateInputs ProcessCandidateInputs(int driver_major);

// Where libcupti is looked for, in order:
//   1. $TRAINSCOPE_CUPTI_PATH, if set (a full path);
//   2. a libcupti already loaded into the process (LibTorch's Kineto), so
//      the process keeps a single CUPTI;
//   3. beside each loaded libcudart of major N (libcudart.so.N, or hashed
//      libcudart-<hash>.so.N): libcupti.so.N in its directory (the cu13
//      wheel layout, site-packages/nvidia/cu13/lib), any hashed
//      libcupti-<hash>.so.N there (a repaired wheel bundles both), its
//      ../extras/CUPTI/lib64 (toolkits) and ../../cuda_cupti/lib (the cu12
//      wheel layout, nvidia/cuda_runtime/lib -> nvidia/cuda_cupti/lib);
//   4. the NVIDIA wheels beside a loaded LibTorch (site-packages/torch/lib):
//      nvidia/cu13/lib/libcupti.so.13, nvidia/cuda_cupti/lib/libcupti.so.12;
//   5. "libcupti.so.13", then "libcupti.so.12", through the loader's search
//      (LD_LIBRARY_PATH, rpath, ld.so.cache);
//   6. the toolkits at $CUDA_HOME, $CUDA_PATH and /usr/local/cuda: their
//      extras/CUPTI/lib64, lib64 and lib, 13 before 12;
//   7. "libcupti.so" through the loader's search.
// Of 3 to 6, a library whose file name says a major newer than the driver's
// (libcupti.so.13 under a CUDA 12 driver) is left out. Cost: a listing of
// each libcudart's directory.
std::vector<std::string> CuptiCandidates(const CandidateInputs& inputs);

struct CuptiLibrary {
  std::string path;          // what was loaded, as given to dlopen
  uint32_t api_version = 0;  // cuptiGetVersion: 22 for 12.4, 130001 for 13.0 Update 1
  std::string version;       // DescribeCuptiVersion(api_version).name
  decltype(&::cuptiActivityEnable) activity_enable = nullptr;
  decltype(&::cuptiActivityDisable) activity_disable = nullptr;
  decltype(&::cuptiActivityFlushAll) activity_flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) activity_get_next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) activity_get_num_dropped_records = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) activity_register_callbacks = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) activity_register_timestamp_callback =
      nullptr;
  // Null where the library lacks it (12.4 and older).
  decltype(&::cuptiActivityEnableAllSyncRecords) activity_enable_all_sync_records = nullptr;
  decltype(&::cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiGetCallbackName) get_callback_name = nullptr;
  decltype(&::cuptiGetVersion) get_version = nullptr;
  decltype(&::cuptiSubscribe) subscribe = nullptr;
  decltype(&::cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&::cuptiEnableCallback) enable_callback = nullptr;
  // Null where the library lacks them: cuptiActivitySetAttribute, and
  // cuptiActivityEnableRuntimeApi/EnableDriverApi (12.5 on).
  decltype(&::cuptiActivitySetAttribute) activity_set_attribute = nullptr;
  decltype(&::cuptiActivityEnableRuntimeApi) activity_enable_runtime_api = nullptr;
  decltype(&::cuptiActivityEnableDriverApi) activity_enable_driver_api = nullptr;
#if CUPTI_API_VERSION >= 130000
  // cuptiSubscribe_v2 (13.x; null before, and absent from 12.x headers):
  // also names the other subscriber.
  decltype(&::cuptiSubscribe_v2) subscribe_v2 = nullptr;
#endif

  // "CUPTI_ERROR_NOT_INITIALIZED", or "CUPTI error 15" if CUPTI has no text.
  std::string ResultText(CUptiResult result) const;
};

// Who else holds CUPTI, for "CUPTI in use by WHO": the name CUPTI gave for
// the other subscriber (cuptiSubscribe_v2; "CUPTI for " dropped), else what
// the environment says: Nsight Systems ($NSYS_PROFILING_SESSION_ID, or an
// injection library of nsys in $CUDA_INJECTION64_PATH), Nsight Compute,
// another injection library by its path, else "another CUPTI client (the
// PyTorch profiler, Nsight, a debugger)". Arguments may be null.
std::string DescribeOtherCuptiUser(const char* subscriber_name, const char* injection_path,
                                   const char* nsys_session);

// The process's libcupti, loaded on the first successful call and kept.
// `driver_version`: cuDriverGetVersion's (12080 for 12.8; 0: unknown), so
// that no libcupti newer than the driver is taken. Errors: Unavailable,
// "CUPTI unavailable: libcupti not found (...)", or the first refusal: a
// version this build does not read, one newer than the driver, or a
// library that lacks a function. Thread-safe.
absl::StatusOr<const CuptiLibrary*> LoadCupti(int driver_version = 0);

// Loads the library at exactly `path` (tests; TRAINSCOPE_CUPTI_PATH) and
// checks its version. Does not touch the process's cached library. Errors:
// Unavailable naming the path: cannot load, lacks a function, cuptiGetVersion
// failed, "CUPTI unavailable: CUPTI 11.8 found (PATH); this build reads
// ...", or "CUPTI unavailable: CUPTI 13.0 found (PATH) needs a CUDA 13
// driver; this one is 12.8" (a library whose cuptiGetVersion ran stays
// loaded, unused).
absl::StatusOr<CuptiLibrary> LoadCuptiFrom(const std::string& path, int driver_version = 0);

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_LIBRARY_H_
