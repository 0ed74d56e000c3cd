/*
 * trainscope test support: the record log kept by the NVTX recording injection
 * (libtrainscope_nvtx_injection.so, built from injection_recorder.cc).
 *
 * Plain C header; it does not include NVTX.  A test process runs with
 *   NVTX_INJECTION64_PATH=/path/to/libtrainscope_nvtx_injection.so
 * NVTX3 loads that library lazily, on the first NVTX call made by each module
 * (executable or shared object) that contains an NVTX3 instance.  After at
 * least one NVTX call, the test reaches the log with
 *   dlopen(getenv("NVTX_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD) + dlsym,
 * or simply with tsnvtx_load_api() below.
 *
 * All records live in one process-wide, mutex-protected, append-only list in
 * call order.  Strings are truncated to fit and always NUL-terminated.
 */
#ifndef TRAINSCOPE_TESTS_NVTX_INJECTION_LOG_H_
#define TRAINSCOPE_TESTS_NVTX_INJECTION_LOG_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum TsNvtxKind {
  kTsNvtxDomainCreate = 1, /* nvtxDomainCreateA/W; domain_name/message = name */
  kTsNvtxRegisterString,   /* nvtxDomainRegisterStringA/W; message = string */
  kTsNvtxNameCategory,     /* nvtx[Domain]NameCategoryA/W; category, message = name */
  kTsNvtxPush,             /* nvtx[Domain]RangePush*; depth = level returned */
  kTsNvtxPop,              /* nvtx[Domain]RangePop; depth = level ended (-1: empty stack) */
  kTsNvtxRangeStart,       /* nvtx[Domain]RangeStart*; range_id = id returned */
  kTsNvtxRangeEnd,         /* nvtx[Domain]RangeEnd; range_id = id passed */
  kTsNvtxNameOsThread,     /* nvtxNameOsThreadA/W; named_tid, message = name */
  kTsNvtxMark,             /* nvtx[Domain]Mark* */
  kTsNvtxDomainDestroy     /* nvtxDomainDestroy; domain_id/domain_name of the domain */
};

/* Values of TsNvtxRecord.payload_type / message_type (same numbers as NVTX). */
enum TsNvtxPayloadType {
  kTsNvtxPayloadNone = 0,
  kTsNvtxPayloadUint64 = 1,
  kTsNvtxPayloadInt64 = 2,
  kTsNvtxPayloadDouble = 3,
  kTsNvtxPayloadUint32 = 4,
  kTsNvtxPayloadInt32 = 5,
  kTsNvtxPayloadFloat = 6
};
enum TsNvtxMessageType {
  kTsNvtxMessageNone = 0,
  kTsNvtxMessageAscii = 1,
  kTsNvtxMessageUnicode = 2,
  kTsNvtxMessageRegistered = 3
};

struct TsNvtxRecord {
  int kind;             /* enum TsNvtxKind */
  uint64_t os_tid;      /* gettid() of the calling thread */
  uint64_t domain_id;   /* small integer per created domain (1, 2, ...), 0 for the global domain */
  char domain_name[64]; /* "" for the global domain */
  /* Resolved text: the registered string for NVTX_MESSAGE_TYPE_REGISTERED, the
   * ASCII message, or a wide message narrowed (non-ASCII -> '?').  For Pop the
   * message of the range popped; for RangeEnd the message of the range started
   * with that id (both "" when unknown).  For naming calls, the name. */
  char message[128];
  uint32_t category;     /* event category; for Pop/RangeEnd the category of the range */
  uint32_t color;        /* ARGB, valid when has_color */
  int has_payload;       /* 1 when payloadType was one of the six NVTX payload types */
  int64_t payload_int64; /* the value for int64/uint64 (bit-cast)/int32/uint32 payloads */
  uint64_t range_id;     /* RangeStart: id returned; RangeEnd: id passed */
  uint64_t named_tid;    /* NameOsThread: the threadId argument */

  /* Additional detail (appended; the fields above are the core API). */
  int has_color;         /* 1 when colorType == NVTX_COLOR_ARGB */
  int payload_type;      /* enum TsNvtxPayloadType as given (0 when none) */
  double payload_double; /* the value for double/float payloads */
  int message_type;      /* enum TsNvtxMessageType as given (0 when none) */
  int depth;             /* Push: 0-based level returned; Pop: level ended, -1 if none open */
  uint32_t attr_version; /* nvtxEventAttributes_t.version (0 for calls without attributes) */
  uint32_t attr_size;    /* nvtxEventAttributes_t.size (0 for calls without attributes) */
  char api[40];          /* name of the NVTX function called, e.g. "nvtxDomainRangePushEx" */
};

typedef size_t (*TsNvtxCountFn)(void);
typedef int (*TsNvtxGetFn)(size_t, struct TsNvtxRecord*);
typedef void (*TsNvtxClearFn)(void);
typedef int (*TsNvtxCategoryNameFn)(uint64_t, uint32_t, char*, size_t);
typedef size_t (*TsNvtxRecordSizeFn)(void);

/* Exported by the injection library (all thread-safe). */
/* Number of records logged so far. */
size_t tsnvtx_record_count(void);
/* Copies record `index` into *out; returns 1, or 0 if index is out of range or out is NULL. */
int tsnvtx_get_record(size_t index, struct TsNvtxRecord* out);
/* Drops all records.  Domains, registered strings, category names, open ranges
 * and push/pop stacks are kept (handles stay valid); range ids keep increasing. */
void tsnvtx_clear(void);
/* If `category` was named in domain `domain_id` (0 = global domain, for
 * nvtxNameCategoryA), copies the latest name into out[0..n) and returns 1;
 * otherwise returns 0 (out, when n > 0, is set to ""). */
int tsnvtx_category_name(uint64_t domain_id, uint32_t category, char* out, size_t n);
/* sizeof(struct TsNvtxRecord) as compiled into the library (a header/library mismatch check). */
size_t tsnvtx_record_size(void);

#ifndef TSNVTX_NO_LOADER
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

struct TsNvtxApi {
  TsNvtxCountFn record_count;
  TsNvtxGetFn get_record;
  TsNvtxClearFn clear;
  TsNvtxCategoryNameFn category_name;
};

/* dlsym into a function pointer without the object-to-function pointer cast
 * that -Wpedantic rejects; returns nonzero when found. */
static inline int tsnvtx_sym_(void* handle, const char* name, void* fnptr_out, size_t size) {
  void* sym = dlsym(handle, name);
  if (sym == NULL || size != sizeof(sym)) return 0;
  memcpy(fnptr_out, &sym, size);
  return 1;
}

/* Finds the already-loaded injection named by NVTX_INJECTION64_PATH and fills
 * *api.  Returns 1 on success; 0 if the variable is unset, the library was not
 * (yet) loaded by NVTX -- make any NVTX call first, e.g. nvtxInitialize(NULL) --
 * a symbol is missing, or the record layout differs from this header's.
 * The dlopen reference taken here is deliberately never released. */
static inline int tsnvtx_load_api(struct TsNvtxApi* api) {
  const char* path = getenv("NVTX_INJECTION64_PATH");
  void* handle;
  TsNvtxRecordSizeFn record_size = NULL;
  struct TsNvtxApi found;
  if (api == NULL) return 0;
  memset(api, 0, sizeof(*api));
  if (path == NULL || path[0] == '\0') return 0;
  handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL) return 0;
  memset(&found, 0, sizeof(found));
  if (!tsnvtx_sym_(handle, "tsnvtx_record_size", &record_size, sizeof(record_size)) ||
      record_size() != sizeof(struct TsNvtxRecord) ||
      !tsnvtx_sym_(handle, "tsnvtx_record_count", &found.record_count,
                   sizeof(found.record_count)) ||
      !tsnvtx_sym_(handle, "tsnvtx_get_record", &found.get_record, sizeof(found.get_record)) ||
      !tsnvtx_sym_(handle, "tsnvtx_clear", &found.clear, sizeof(found.clear)) ||
      !tsnvtx_sym_(handle, "tsnvtx_category_name", &found.category_name,
                   sizeof(found.category_name))) {
    return 0;
  }
  *api = found;
  return 1;
}
#endif /* TSNVTX_NO_LOADER */

static inline const char* tsnvtx_kind_name(int kind) {
  switch (kind) {
    case kTsNvtxDomainCreate:
      return "DomainCreate";
    case kTsNvtxRegisterString:
      return "RegisterString";
    case kTsNvtxNameCategory:
      return "NameCategory";
    case kTsNvtxPush:
      return "Push";
    case kTsNvtxPop:
      return "Pop";
    case kTsNvtxRangeStart:
      return "RangeStart";
    case kTsNvtxRangeEnd:
      return "RangeEnd";
    case kTsNvtxNameOsThread:
      return "NameOsThread";
    case kTsNvtxMark:
      return "Mark";
    case kTsNvtxDomainDestroy:
      return "DomainDestroy";
    default:
      return "?";
  }
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TRAINSCOPE_TESTS_NVTX_INJECTION_LOG_H_ */
