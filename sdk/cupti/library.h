// sdk/cupti/library.h: libcupti, loaded at run time with dlopen.
//
// Nothing links against CUPTI: a binary built with the CUDA toolkit runs on a
// machine without one. The library is looked for in this order, and the first
// that loads and has every function below wins:
//   1. $TRAINSCOPE_CUPTI_PATH, if set (a full path);
//   2. "libcupti.so.13" through the loader's search (LD_LIBRARY_PATH, rpath,
//      ld.so.cache), which also finds one already loaded, e.g. by LibTorch's
//      Kineto, so the process keeps a single CUPTI;
//   3. libcupti.so.13 next to a loaded libcudart.so.* (the pip layout
//      site-packages/nvidia/cu13/lib that LibTorch wheels use), and in that
//      directory's ../extras/CUPTI/lib64 (older toolkit layout);
//   4. "libcupti.so" through the loader's search;
//   5. /usr/local/cuda/lib64 and /usr/local/cuda/extras/CUPTI/lib64.
// The library is never unloaded: CUPTI keeps threads and callbacks.
//
// Load only after checking that a CUDA driver is present: some libcupti
// builds (13.2) recurse until the stack overflows inside their first call
// when libcuda.so.1 is missing.
#ifndef TRAINSCOPE_SDK_CUPTI_LIBRARY_H_
#define TRAINSCOPE_SDK_CUPTI_LIBRARY_H_

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>

#include <string>

#include "absl/status/statusor.h"

namespace trainscope::cupti {

struct CuptiLibrary {
  std::string path;  // what was loaded, as given to dlopen
  decltype(&::cuptiActivityEnable) activity_enable = nullptr;
  decltype(&::cuptiActivityDisable) activity_disable = nullptr;
  decltype(&::cuptiActivityFlushAll) activity_flush_all = nullptr;
  decltype(&::cuptiActivityGetNextRecord) activity_get_next_record = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) activity_get_num_dropped_records = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) activity_register_callbacks = nullptr;
  decltype(&::cuptiActivityRegisterTimestampCallback) activity_register_timestamp_callback =
      nullptr;
  decltype(&::cuptiActivityEnableAllSyncRecords) activity_enable_all_sync_records = nullptr;
  decltype(&::cuptiSetThreadIdType) set_thread_id_type = nullptr;
  decltype(&::cuptiGetResultString) get_result_string = nullptr;
  decltype(&::cuptiGetCallbackName) get_callback_name = nullptr;

  // "CUPTI_ERROR_NOT_INITIALIZED", or "CUPTI error 15" if CUPTI has no text.
  std::string ResultText(CUptiResult result) const;
};

// The process's libcupti, loaded on the first successful call and kept.
// Errors: Unavailable, "CUPTI unavailable: libcupti.so.13 not found (...)"
// or naming the library that lacks a function. Thread-safe.
absl::StatusOr<const CuptiLibrary*> LoadCupti();

// Loads the library at exactly `path` (tests; TRAINSCOPE_CUPTI_PATH). Does not
// touch the process's cached library.
absl::StatusOr<CuptiLibrary> LoadCuptiFrom(const std::string& path);

}  // namespace trainscope::cupti

#endif  // TRAINSCOPE_SDK_CUPTI_LIBRARY_H_
