// trainscope test support: an NVTX3 injection library that records NVTX calls.
//
// Loaded the way Nsight Systems attaches: the process runs with
// NVTX_INJECTION64_PATH=<this .so>; on the first NVTX call of each NVTX3 instance
// (one per executable/shared object, the NVTX globals are hidden per module) NVTX
// dlopens this library and calls InitializeInjectionNvtx2 with its
// nvtxGetExportTable.  We fetch the NVTX_ETID_CALLBACKS export table, ask it for
// the CORE and CORE2 module tables and store our hook functions in the slots
// (NVTX_CBID_CORE_* / NVTX_CBID_CORE2_*).  Slots left untouched are set to
// no-ops by NVTX after we return.  Records are read back through the C
// functions declared in injection_log.h.

// Types only: this library must not carry its own NVTX3 instance.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#define TSNVTX_NO_LOADER
#include "injection_log.h"

#define TSNVTX_EXPORT extern "C" __attribute__((visibility("default")))

// The handle types are pointers to these opaque structs, which NVTX only
// forward-declares; the tool that hands the handles out defines them.
struct nvtxDomainRegistration_st {
  uint64_t id;
  std::string name;
};
struct nvtxStringRegistration_st {
  uint64_t domain_id;
  std::string text;
};

namespace {

struct OpenRange {
  std::string message;
  uint32_t category;
};

struct State {
  std::mutex mu;
  std::vector<TsNvtxRecord> records;
  // Domains are deduplicated by name and never freed, so a handle stays valid
  // (and keeps its id) for the life of the process, even after nvtxDomainDestroy.
  std::map<std::string, nvtxDomainRegistration_st*> domains_by_name;
  std::unordered_set<const nvtxDomainRegistration_st*> domains;
  // Registered strings: deduplicated per (domain id, text), never freed.
  std::map<std::pair<uint64_t, std::string>, nvtxStringRegistration_st*> strings_by_key;
  std::unordered_set<const nvtxStringRegistration_st*> strings;
  std::map<std::pair<uint64_t, uint32_t>, std::string> category_names;
  // Push/pop stacks per (os tid, domain id).
  std::map<std::pair<uint64_t, uint64_t>, std::vector<OpenRange>> stacks;
  // Start/end ranges by id (ids are process-wide, start at 1, never reused).
  std::unordered_map<uint64_t, OpenRange> open_ranges;
  uint64_t next_domain_id = 1;
  uint64_t next_range_id = 1;
};

// Leaked on purpose: NVTX calls may still arrive from other threads or from
// static destructors while the process exits.
State& S() {
  static State* state = new State();
  return *state;
}

uint64_t CurrentTid() { return static_cast<uint64_t>(syscall(SYS_gettid)); }

void CopyStr(char* dst, size_t cap, const char* src) {
  if (cap == 0) return;
  size_t n = 0;
  if (src != nullptr) {
    while (n + 1 < cap && src[n] != '\0') ++n;
    std::memcpy(dst, src, n);
  }
  dst[n] = '\0';
}

std::string Narrow(const wchar_t* w) {
  std::string out;
  if (w == nullptr) return out;
  for (; *w != L'\0'; ++w) {
    const wchar_t c = *w;
    out.push_back((c > 0 && c < 0x80) ? static_cast<char>(c) : '?');
  }
  return out;
}

std::string Str(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

// A record pre-filled with the calling thread, the domain and the API name.
// Caller holds the mutex.
TsNvtxRecord NewRecord(int kind, const nvtxDomainRegistration_st* domain, const char* api) {
  TsNvtxRecord r;
  std::memset(&r, 0, sizeof(r));
  r.kind = kind;
  r.os_tid = CurrentTid();
  if (domain != nullptr) {
    if (S().domains.count(domain) != 0) {
      r.domain_id = domain->id;
      CopyStr(r.domain_name, sizeof(r.domain_name), domain->name.c_str());
    } else {
      r.domain_id = UINT64_MAX;  // not a handle this library returned
      CopyStr(r.domain_name, sizeof(r.domain_name), "<invalid domain handle>");
    }
  }
  CopyStr(r.api, sizeof(r.api), api);
  return r;
}

uint64_t DomainId(const nvtxDomainRegistration_st* domain) {
  if (domain == nullptr) return 0;
  return S().domains.count(domain) != 0 ? domain->id : UINT64_MAX;
}

// True when the caller-declared struct size covers the field [offset, offset + len).
bool Covers(const nvtxEventAttributes_t* a, size_t offset, size_t len) {
  return static_cast<size_t>(a->size) >= offset + len;
}
#define TSNVTX_HAS(a, field) \
  Covers((a), offsetof(nvtxEventAttributes_t, field), sizeof(nvtxEventAttributes_t::field))

// Fills attribute-derived fields; returns the resolved message.  Fields past
// attr->size are treated as unset.  Caller holds the mutex.
std::string ApplyAttributes(TsNvtxRecord* r, const nvtxEventAttributes_t* a) {
  std::string message;
  if (a == nullptr) return message;
  r->attr_version = a->version;
  r->attr_size = a->size;
  if (TSNVTX_HAS(a, category)) r->category = a->category;
  if (TSNVTX_HAS(a, colorType) && TSNVTX_HAS(a, color) && a->colorType == NVTX_COLOR_ARGB) {
    r->has_color = 1;
    r->color = a->color;
  }
  if (TSNVTX_HAS(a, payloadType) && TSNVTX_HAS(a, payload)) {
    r->payload_type = a->payloadType;
    switch (a->payloadType) {
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
        r->has_payload = 1;
        r->payload_int64 = static_cast<int64_t>(a->payload.ullValue);
        break;
      case NVTX_PAYLOAD_TYPE_INT64:
        r->has_payload = 1;
        r->payload_int64 = a->payload.llValue;
        break;
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
        r->has_payload = 1;
        r->payload_int64 = static_cast<int64_t>(a->payload.uiValue);
        break;
      case NVTX_PAYLOAD_TYPE_INT32:
        r->has_payload = 1;
        r->payload_int64 = a->payload.iValue;
        break;
      case NVTX_PAYLOAD_TYPE_DOUBLE:
        r->has_payload = 1;
        r->payload_double = a->payload.dValue;
        break;
      case NVTX_PAYLOAD_TYPE_FLOAT:
        r->has_payload = 1;
        r->payload_double = static_cast<double>(a->payload.fValue);
        break;
      default:
        break;
    }
  }
  if (TSNVTX_HAS(a, messageType) && TSNVTX_HAS(a, message)) {
    r->message_type = a->messageType;
    switch (a->messageType) {
      case NVTX_MESSAGE_TYPE_ASCII:
        message = Str(a->message.ascii);
        break;
      case NVTX_MESSAGE_TYPE_UNICODE:
        message = Narrow(a->message.unicode);
        break;
      case NVTX_MESSAGE_TYPE_REGISTERED: {
        const nvtxStringRegistration_st* h = a->message.registered;
        if (h != nullptr && S().strings.count(h) != 0) {
          message = h->text;
        } else {
          message = "<invalid string handle>";
        }
        break;
      }
      default:
        break;
    }
  }
  CopyStr(r->message, sizeof(r->message), message.c_str());
  return message;
}

void Append(const TsNvtxRecord& r) { S().records.push_back(r); }

// ---- event functions, shared by the global-domain and domain APIs ----

void DoMark(const nvtxDomainRegistration_st* domain, const nvtxEventAttributes_t* a,
            const std::string* ascii, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxMark, domain, api);
  if (ascii != nullptr) {
    r.message_type = NVTX_MESSAGE_TYPE_ASCII;
    CopyStr(r.message, sizeof(r.message), ascii->c_str());
  } else {
    ApplyAttributes(&r, a);
  }
  Append(r);
}

int DoPush(const nvtxDomainRegistration_st* domain, const nvtxEventAttributes_t* a,
           const std::string* ascii, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxPush, domain, api);
  std::string message;
  if (ascii != nullptr) {
    r.message_type = NVTX_MESSAGE_TYPE_ASCII;
    message = *ascii;
    CopyStr(r.message, sizeof(r.message), message.c_str());
  } else {
    message = ApplyAttributes(&r, a);
  }
  std::vector<OpenRange>& stack = s.stacks[{r.os_tid, DomainId(domain)}];
  r.depth = static_cast<int>(stack.size());
  stack.push_back(OpenRange{message, r.category});
  Append(r);
  return r.depth;
}

int DoPop(const nvtxDomainRegistration_st* domain, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxPop, domain, api);
  auto it = s.stacks.find({r.os_tid, DomainId(domain)});
  if (it == s.stacks.end() || it->second.empty()) {
    r.depth = -1;
  } else {
    const OpenRange& top = it->second.back();
    r.depth = static_cast<int>(it->second.size()) - 1;
    r.category = top.category;
    CopyStr(r.message, sizeof(r.message), top.message.c_str());
    it->second.pop_back();
  }
  Append(r);
  return r.depth;
}

nvtxRangeId_t DoStart(const nvtxDomainRegistration_st* domain, const nvtxEventAttributes_t* a,
                      const std::string* ascii, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxRangeStart, domain, api);
  std::string message;
  if (ascii != nullptr) {
    r.message_type = NVTX_MESSAGE_TYPE_ASCII;
    message = *ascii;
    CopyStr(r.message, sizeof(r.message), message.c_str());
  } else {
    message = ApplyAttributes(&r, a);
  }
  r.range_id = s.next_range_id++;
  s.open_ranges[r.range_id] = OpenRange{message, r.category};
  Append(r);
  return r.range_id;
}

void DoEnd(const nvtxDomainRegistration_st* domain, nvtxRangeId_t id, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxRangeEnd, domain, api);
  r.range_id = id;
  auto it = s.open_ranges.find(id);
  if (it != s.open_ranges.end()) {
    r.category = it->second.category;
    CopyStr(r.message, sizeof(r.message), it->second.message.c_str());
    s.open_ranges.erase(it);
  }
  Append(r);
}

void DoNameCategory(const nvtxDomainRegistration_st* domain, uint32_t category,
                    const std::string& name, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxNameCategory, domain, api);
  r.category = category;
  CopyStr(r.message, sizeof(r.message), name.c_str());
  s.category_names[{DomainId(domain), category}] = name;
  Append(r);
}

void DoNameOsThread(uint32_t thread_id, const std::string& name, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  TsNvtxRecord r = NewRecord(kTsNvtxNameOsThread, nullptr, api);
  r.named_tid = thread_id;
  CopyStr(r.message, sizeof(r.message), name.c_str());
  Append(r);
}

nvtxDomainHandle_t DoDomainCreate(const std::string& name, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  nvtxDomainRegistration_st*& slot = s.domains_by_name[name];
  if (slot == nullptr) {
    slot = new nvtxDomainRegistration_st{s.next_domain_id++, name};
    s.domains.insert(slot);
  }
  TsNvtxRecord r = NewRecord(kTsNvtxDomainCreate, slot, api);
  CopyStr(r.message, sizeof(r.message), name.c_str());
  Append(r);
  return slot;
}

nvtxStringHandle_t DoRegisterString(const nvtxDomainRegistration_st* domain,
                                    const std::string& text, const char* api) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t domain_id = DomainId(domain);
  nvtxStringRegistration_st*& slot = s.strings_by_key[{domain_id, text}];
  if (slot == nullptr) {
    slot = new nvtxStringRegistration_st{domain_id, text};
    s.strings.insert(slot);
  }
  TsNvtxRecord r = NewRecord(kTsNvtxRegisterString, domain, api);
  CopyStr(r.message, sizeof(r.message), text.c_str());
  Append(r);
  return slot;
}

// ---- CORE module hooks (global domain) ----

void NVTX_API HookMarkEx(const nvtxEventAttributes_t* a) {
  DoMark(nullptr, a, nullptr, "nvtxMarkEx");
}
void NVTX_API HookMarkA(const char* m) {
  const std::string s = Str(m);
  DoMark(nullptr, nullptr, &s, "nvtxMarkA");
}
void NVTX_API HookMarkW(const wchar_t* m) {
  const std::string s = Narrow(m);
  DoMark(nullptr, nullptr, &s, "nvtxMarkW");
}
nvtxRangeId_t NVTX_API HookRangeStartEx(const nvtxEventAttributes_t* a) {
  return DoStart(nullptr, a, nullptr, "nvtxRangeStartEx");
}
nvtxRangeId_t NVTX_API HookRangeStartA(const char* m) {
  const std::string s = Str(m);
  return DoStart(nullptr, nullptr, &s, "nvtxRangeStartA");
}
nvtxRangeId_t NVTX_API HookRangeStartW(const wchar_t* m) {
  const std::string s = Narrow(m);
  return DoStart(nullptr, nullptr, &s, "nvtxRangeStartW");
}
void NVTX_API HookRangeEnd(nvtxRangeId_t id) { DoEnd(nullptr, id, "nvtxRangeEnd"); }
int NVTX_API HookRangePushEx(const nvtxEventAttributes_t* a) {
  return DoPush(nullptr, a, nullptr, "nvtxRangePushEx");
}
int NVTX_API HookRangePushA(const char* m) {
  const std::string s = Str(m);
  return DoPush(nullptr, nullptr, &s, "nvtxRangePushA");
}
int NVTX_API HookRangePushW(const wchar_t* m) {
  const std::string s = Narrow(m);
  return DoPush(nullptr, nullptr, &s, "nvtxRangePushW");
}
int NVTX_API HookRangePop() { return DoPop(nullptr, "nvtxRangePop"); }
void NVTX_API HookNameCategoryA(uint32_t c, const char* n) {
  DoNameCategory(nullptr, c, Str(n), "nvtxNameCategoryA");
}
void NVTX_API HookNameCategoryW(uint32_t c, const wchar_t* n) {
  DoNameCategory(nullptr, c, Narrow(n), "nvtxNameCategoryW");
}
void NVTX_API HookNameOsThreadA(uint32_t tid, const char* n) {
  DoNameOsThread(tid, Str(n), "nvtxNameOsThreadA");
}
void NVTX_API HookNameOsThreadW(uint32_t tid, const wchar_t* n) {
  DoNameOsThread(tid, Narrow(n), "nvtxNameOsThreadW");
}

// ---- CORE2 module hooks (domains) ----

void NVTX_API HookDomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  DoMark(d, a, nullptr, "nvtxDomainMarkEx");
}
nvtxRangeId_t NVTX_API HookDomainRangeStartEx(nvtxDomainHandle_t d,
                                              const nvtxEventAttributes_t* a) {
  return DoStart(d, a, nullptr, "nvtxDomainRangeStartEx");
}
void NVTX_API HookDomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  DoEnd(d, id, "nvtxDomainRangeEnd");
}
int NVTX_API HookDomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return DoPush(d, a, nullptr, "nvtxDomainRangePushEx");
}
int NVTX_API HookDomainRangePop(nvtxDomainHandle_t d) { return DoPop(d, "nvtxDomainRangePop"); }
void NVTX_API HookDomainNameCategoryA(nvtxDomainHandle_t d, uint32_t c, const char* n) {
  DoNameCategory(d, c, Str(n), "nvtxDomainNameCategoryA");
}
void NVTX_API HookDomainNameCategoryW(nvtxDomainHandle_t d, uint32_t c, const wchar_t* n) {
  DoNameCategory(d, c, Narrow(n), "nvtxDomainNameCategoryW");
}
nvtxStringHandle_t NVTX_API HookDomainRegisterStringA(nvtxDomainHandle_t d, const char* s) {
  return DoRegisterString(d, Str(s), "nvtxDomainRegisterStringA");
}
nvtxStringHandle_t NVTX_API HookDomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t* s) {
  return DoRegisterString(d, Narrow(s), "nvtxDomainRegisterStringW");
}
nvtxDomainHandle_t NVTX_API HookDomainCreateA(const char* name) {
  return DoDomainCreate(Str(name), "nvtxDomainCreateA");
}
nvtxDomainHandle_t NVTX_API HookDomainCreateW(const wchar_t* name) {
  return DoDomainCreate(Narrow(name), "nvtxDomainCreateW");
}
void NVTX_API HookDomainDestroy(nvtxDomainHandle_t d) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  Append(NewRecord(kTsNvtxDomainDestroy, d, "nvtxDomainDestroy"));
}
void NVTX_API HookInitialize(const void* /*reserved*/) {}

// ---- attaching ----

template <typename Fn>
void SetSlot(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  // Slot 0 is NVTX_CBID_*_INVALID; `size` excludes the table's trailing null.
  if (id == 0 || id >= size || table[id] == nullptr) return;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

bool GetTable(const NvtxExportTableCallbacks* cb, NvtxCallbackModule module,
              NvtxFunctionTable* table, unsigned int* size) {
  *table = nullptr;
  *size = 0;
  return cb->GetModuleFunctionTable(module, table, size) != 0 && *table != nullptr;
}

}  // namespace

// Called once per NVTX3 instance (per module using NVTX) that finds this library.
// Returns nonzero on success; on 0, NVTX dlcloses us and turns all calls into no-ops.
TSNVTX_EXPORT int NVTX_API InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr) return 0;
  const auto* cb =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (cb == nullptr ||
      cb->struct_size < offsetof(NvtxExportTableCallbacks, GetModuleFunctionTable) +
                            sizeof(cb->GetModuleFunctionTable) ||
      cb->GetModuleFunctionTable == nullptr) {
    return 0;
  }
  (void)S();  // construct the state before any hook can run

  NvtxFunctionTable t = nullptr;
  unsigned int n = 0;
  bool attached = false;
  if (GetTable(cb, NVTX_CB_MODULE_CORE, &t, &n)) {
    SetSlot(t, n, NVTX_CBID_CORE_MarkEx, HookMarkEx);
    SetSlot(t, n, NVTX_CBID_CORE_MarkA, HookMarkA);
    SetSlot(t, n, NVTX_CBID_CORE_MarkW, HookMarkW);
    SetSlot(t, n, NVTX_CBID_CORE_RangeStartEx, HookRangeStartEx);
    SetSlot(t, n, NVTX_CBID_CORE_RangeStartA, HookRangeStartA);
    SetSlot(t, n, NVTX_CBID_CORE_RangeStartW, HookRangeStartW);
    SetSlot(t, n, NVTX_CBID_CORE_RangeEnd, HookRangeEnd);
    SetSlot(t, n, NVTX_CBID_CORE_RangePushEx, HookRangePushEx);
    SetSlot(t, n, NVTX_CBID_CORE_RangePushA, HookRangePushA);
    SetSlot(t, n, NVTX_CBID_CORE_RangePushW, HookRangePushW);
    SetSlot(t, n, NVTX_CBID_CORE_RangePop, HookRangePop);
    SetSlot(t, n, NVTX_CBID_CORE_NameCategoryA, HookNameCategoryA);
    SetSlot(t, n, NVTX_CBID_CORE_NameCategoryW, HookNameCategoryW);
    SetSlot(t, n, NVTX_CBID_CORE_NameOsThreadA, HookNameOsThreadA);
    SetSlot(t, n, NVTX_CBID_CORE_NameOsThreadW, HookNameOsThreadW);
    attached = true;
  }
  if (GetTable(cb, NVTX_CB_MODULE_CORE2, &t, &n)) {
    SetSlot(t, n, NVTX_CBID_CORE2_DomainMarkEx, HookDomainMarkEx);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, HookDomainRangeStartEx);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, HookDomainRangeEnd);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, HookDomainRangePushEx);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainRangePop, HookDomainRangePop);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainNameCategoryA, HookDomainNameCategoryA);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainNameCategoryW, HookDomainNameCategoryW);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, HookDomainRegisterStringA);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, HookDomainRegisterStringW);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainCreateA, HookDomainCreateA);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainCreateW, HookDomainCreateW);
    SetSlot(t, n, NVTX_CBID_CORE2_DomainDestroy, HookDomainDestroy);
    SetSlot(t, n, NVTX_CBID_CORE2_Initialize, HookInitialize);
    attached = true;
  }
  if (!attached) return 0;

  // Tools are asked to report the NVTX version they implement (currently ignored by NVTX).
  const auto* vi =
      static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
  if (vi != nullptr &&
      vi->struct_size >= offsetof(NvtxExportTableVersionInfo, SetInjectionNvtxVersion) +
                             sizeof(vi->SetInjectionNvtxVersion) &&
      vi->SetInjectionNvtxVersion != nullptr) {
    vi->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  return 1;
}

// ---- log accessors (injection_log.h) ----

TSNVTX_EXPORT size_t tsnvtx_record_count(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.records.size();
}

TSNVTX_EXPORT int tsnvtx_get_record(size_t index, TsNvtxRecord* out) {
  if (out == nullptr) return 0;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (index >= s.records.size()) return 0;
  *out = s.records[index];
  return 1;
}

TSNVTX_EXPORT void tsnvtx_clear(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.records.clear();
}

TSNVTX_EXPORT int tsnvtx_category_name(uint64_t domain_id, uint32_t category, char* out, size_t n) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.category_names.find({domain_id, category});
  if (out != nullptr) CopyStr(out, n, it != s.category_names.end() ? it->second.c_str() : "");
  return it != s.category_names.end() ? 1 : 0;
}

TSNVTX_EXPORT size_t tsnvtx_record_size(void) { return sizeof(TsNvtxRecord); }
