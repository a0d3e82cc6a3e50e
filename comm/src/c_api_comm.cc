// The C API's communicators: creation (unique id, environment, a framework's store), split,
// destroy, abort, and what they report.
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "c_api.h"
#include "weft/comm/store_rendezvous.h"

namespace weft::capi {

CommCore::~CommCore() {
  comm.reset();  // finishes every issued operation (each bounded by its deadline)
  shared->callbacks().Stop();
}

weftComm_t NewHandle(std::unique_ptr<Communicator> comm) {
  auto core = std::make_shared<CommCore>();
  core->shared = std::make_shared<CommShared>(comm->rank());
  core->comm = std::move(comm);
  return new weftComm{std::move(core)};
}

void Release(weftComm_t comm) {
  if (comm->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete comm;
}

Use::Use(weftComm_t comm, const char* function) : comm_(comm) {
  if (comm == nullptr) {
    SetError(weftInvalidArgument, absl::StrCat(function, ": comm is NULL"));
    return;
  }
  comm->refs.fetch_add(1, std::memory_order_relaxed);  // the caller holds a reference already
}

CommCore& Use::core() const { return *comm_->core; }
const std::shared_ptr<CommCore>& Use::shared_core() const { return comm_->core; }

namespace {

// `status` as a C result, with "<function>: " leading the last error.
weftResult_t Fail(const char* function, const absl::Status& status) {
  return SetError(ToResult(status), absl::StrCat(function, ": ", status.message()));
}

weftResult_t Invalid(const char* function, const std::string& what) {
  return SetError(weftInvalidArgument, absl::StrCat(function, ": ", what));
}

// CommOptions from a C configuration (NULL: every field from the environment).
weftResult_t ToOptions(const char* function, const weftConfig_t* config, CommOptions* options) {
  if (config == nullptr) return weftSuccess;
  if (config->magic != WEFT_CONFIG_MAGIC || config->size < sizeof(weftConfig_t)) {
    return Invalid(function, "the config was not initialised with WEFT_CONFIG_INITIALIZER");
  }
  if (config->timeout_ms < 0) {
    return Invalid(function, absl::StrCat("config timeout_ms ", config->timeout_ms, " < 0"));
  }
  if (config->shared_buffers < -1 || config->shared_buffers > 1) {
    return Invalid(function, absl::StrCat("config shared_buffers ", config->shared_buffers,
                                          " is not -1, 0 or 1"));
  }
  options->timeout = absl::Milliseconds(config->timeout_ms);
  if (config->algorithm != nullptr) options->algorithm = config->algorithm;
  if (config->transport != nullptr) options->transport = config->transport;
  if (config->shared_buffers >= 0) options->shared_buffers = config->shared_buffers == 1;
  return weftSuccess;
}

// Finishes a creation: the handle, or the error with the C function's name.
weftResult_t Created(const char* function, absl::StatusOr<std::unique_ptr<Communicator>> made,
                     weftComm_t* comm) {
  if (!made.ok()) return Fail(function, made.status());
  *comm = NewHandle(*std::move(made));
  return weftSuccess;
}

// A framework's C callbacks as the ExternalStore that CreateWithStore takes.
class CallbackStore final : public ExternalStore {
 public:
  explicit CallbackStore(const weftStore_t& store) : store_(store) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    return Check("set", key, store_.set(store_.ctx, key.c_str(), value.data(), value.size()));
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    std::string value(kMaxValue, '\0');
    size_t len = 0;
    const weftResult_t r = store_.get(store_.ctx, key.c_str(), value.data(), value.size(), &len,
                                      absl::ToInt64Milliseconds(timeout));
    if (absl::Status s = Check("get", key, r); !s.ok()) return s;
    if (len > value.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the store's value under '", key, "' has ", len, " bytes: not a unique id"));
    }
    value.resize(len);
    return value;
  }

  // The first failure a callback returned: what the creation then returns.
  weftResult_t failed() const { return failed_; }

 private:
  static constexpr size_t kMaxValue = 4096;  // unique ids are far shorter

  absl::Status Check(const char* call, const std::string& key, weftResult_t r) {
    if (r == weftSuccess) return absl::OkStatus();
    if (failed_ == weftSuccess) failed_ = r;
    const std::string message =
        absl::StrCat("the store's ", call, " callback for key '", key, "' returned ",
                     static_cast<int>(r), " (", weftGetErrorString(r), ")");
    return r == weftTimeout ? absl::DeadlineExceededError(message)
                            : absl::UnavailableError(message);
  }

  const weftStore_t store_;
  weftResult_t failed_ = weftSuccess;
};

// What every creation does first: checks the output handle (`out`, named `out_name`) and
// converts `config`, then returns what `make` does with the options.
template <typename Make>
weftResult_t Init(const char* function, weftComm_t* out, const char* out_name,
                  const weftConfig_t* config, Make&& make) {
  if (out == nullptr) return Invalid(function, absl::StrCat(out_name, " is NULL"));
  *out = nullptr;
  return Guarded(function, [&] {
    CommOptions options;
    if (weftResult_t r = ToOptions(function, config, &options); r != weftSuccess) return r;
    return make(options);
  });
}

// "weft/unique_id/<n>": n counts this process's communicators made from a store with this ctx.
std::string NextStoreKey(void* ctx) {
  static std::mutex mu;
  static auto* made = new std::map<void*, long>();
  std::lock_guard<std::mutex> lock(mu);
  return absl::StrCat("weft/unique_id/", (*made)[ctx]++);
}

}  // namespace
}  // namespace weft::capi

using weft::Communicator;
using weft::capi::Guarded;
using weft::capi::Init;
using weft::capi::Invalid;
using weft::capi::SetError;

extern "C" {

weftResult_t weftGetUniqueId(weftUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Invalid("weftGetUniqueId", "uniqueId is NULL");
  return Guarded("weftGetUniqueId", [&] {
    absl::StatusOr<std::string> id = Communicator::CreateUniqueId();
    if (!id.ok()) return weft::capi::Fail("weftGetUniqueId", id.status());
    if (id->size() >= sizeof(uniqueId->internal)) {
      return SetError(weftInternalError, "weftGetUniqueId: the id does not fit weftUniqueId");
    }
    std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
    std::memcpy(uniqueId->internal, id->data(), id->size());
    return weftSuccess;
  });
}

weftResult_t weftCommInitRankConfig(weftComm_t* comm, int nranks, weftUniqueId commId, int rank,
                                    const weftConfig_t* config) {
  constexpr const char* kFunction = "weftCommInitRank";
  return Init(kFunction, comm, "comm", config, [&](const weft::CommOptions& options) {
    const size_t length = strnlen(commId.internal, sizeof(commId.internal));
    if (length == sizeof(commId.internal)) {
      return Invalid(kFunction, "the unique id is not NUL-terminated (not from weftGetUniqueId?)");
    }
    return weft::capi::Created(
        kFunction,
        Communicator::Create(std::string(commId.internal, length), rank, nranks, options), comm);
  });
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank) {
  return weftCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm, const weftConfig_t* config) {
  return Init("weftCommInitFromEnv", comm, "comm", config, [&](const weft::CommOptions& options) {
    return weft::capi::Created("weftCommInitFromEnv", Communicator::CreateFromEnvironment(options),
                               comm);
  });
}

weftResult_t weftCommInitWithStoreConfig(weftComm_t* comm, const weftStore_t* store, int rank,
                                         int nranks, const weftConfig_t* config) {
  constexpr const char* kFunction = "weftCommInitWithStore";
  return Init(kFunction, comm, "comm", config, [&](const weft::CommOptions& options) {
    if (store == nullptr || store->set == nullptr || store->get == nullptr) {
      return Invalid(kFunction, "store, or its set or get callback, is NULL");
    }
    // Checked before a key is used up: every rank's n-th store communicator must share one.
    if (nranks < 1 || rank < 0 || rank >= nranks) {
      return Invalid(kFunction, absl::StrCat("rank ", rank, " is not in [0, ", nranks, ")"));
    }
    weft::capi::CallbackStore adapter(*store);
    absl::StatusOr<std::unique_ptr<Communicator>> made =
        weft::CreateWithStore(adapter, weft::capi::NextStoreKey(store->ctx), rank, nranks, options);
    if (!made.ok() && adapter.failed() != weftSuccess) {
      return SetError(adapter.failed(), absl::StrCat(kFunction, ": ", made.status().message()));
    }
    return weft::capi::Created(kFunction, std::move(made), comm);
  });
}

weftResult_t weftCommInitWithStore(weftComm_t* comm, const weftStore_t* store, int rank,
                                   int nranks) {
  return weftCommInitWithStoreConfig(comm, store, rank, nranks, nullptr);
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm,
                           const weftConfig_t* config) {
  constexpr const char* kFunction = "weftCommSplit";
  return Init(kFunction, newcomm, "newcomm", config, [&](const weft::CommOptions& options) {
    const weft::capi::Use use(comm, kFunction);
    if (!use) return weftInvalidArgument;
    if (weft::capi::InGroup()) {
      return SetError(weftInvalidUsage, "weftCommSplit: not inside a group");
    }
    Communicator& parent = *use.core().comm;
    absl::StatusOr<std::unique_ptr<Communicator>> child =
        config == nullptr ? parent.Split(color, key) : parent.Split(color, key, options);
    if (!child.ok()) return weft::capi::Fail(kFunction, child.status());
    if (*child == nullptr) return weftSuccess;  // WEFT_SPLIT_NOCOLOR
    return weft::capi::Created(kFunction, std::move(child), newcomm);
  });
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  return Guarded("weftCommDestroy", [&] {
    const weft::capi::Use use(comm, "weftCommDestroy");
    if (!use) return weftInvalidArgument;
    if (use.core().shared->callbacks().OnThisThread()) {
      return SetError(weftInvalidUsage,
                      "weftCommDestroy: called from one of the communicator's own callbacks");
    }
    weft::capi::Release(comm);  // the handle's own: the communicator goes as this call returns
    return weftSuccess;
  });
}

weftResult_t weftCommAbort(weftComm_t comm) {
  return Guarded("weftCommAbort", [&] {
    const weft::capi::Use use(comm, "weftCommAbort");
    if (!use) return weftInvalidArgument;
    use.core().comm->Abort();
    weft::capi::Release(comm);  // the handle's own: the last call inside frees it
    return weftSuccess;
  });
}

weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError) {
  if (asyncError == nullptr) return Invalid("weftCommGetAsyncError", "asyncError is NULL");
  return Guarded("weftCommGetAsyncError", [&] {
    const weft::capi::Use use(comm, "weftCommGetAsyncError");
    if (!use) return weftInvalidArgument;
    std::string message;
    *asyncError = use.core().shared->AsyncError(&message);
    if (*asyncError != weftSuccess) SetError(*asyncError, message);
    return weftSuccess;
  });
}

weftResult_t weftCommCount(weftComm_t comm, int* count) {
  if (count == nullptr) return Invalid("weftCommCount", "count is NULL");
  const weft::capi::Use use(comm, "weftCommCount");
  if (!use) return weftInvalidArgument;
  *count = use.core().comm->size();
  return weftSuccess;
}

weftResult_t weftCommUserRank(weftComm_t comm, int* rank) {
  if (rank == nullptr) return Invalid("weftCommUserRank", "rank is NULL");
  const weft::capi::Use use(comm, "weftCommUserRank");
  if (!use) return weftInvalidArgument;
  *rank = use.core().comm->rank();
  return weftSuccess;
}

}  // extern "C"
