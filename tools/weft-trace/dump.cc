#include "dump.h"

#include "absl/strings/str_cat.h"
#include "weft/comm/json.h"

namespace weft::trace {
namespace {

// Reads the members of one JSON object into typed fields, remembering the first problem.
class Fields {
 public:
  Fields(const JsonValue& object, std::string where) : object_(object), where_(std::move(where)) {}

  void Int(absl::string_view key, int64_t* out) {
    const JsonValue* v = Get(key, JsonValue::Type::kNumber);
    if (v == nullptr) return;
    if (!v->is_integer) {
      Fail(absl::StrCat("'", key, "' is not an integer"));
      return;
    }
    *out = v->integer;
  }
  void Unsigned(absl::string_view key, uint64_t* out) {
    int64_t value = 0;
    Int(key, &value);
    if (value < 0) Fail(absl::StrCat("'", key, "' is negative"));
    *out = static_cast<uint64_t>(value);
  }
  void Text(absl::string_view key, std::string* out) {
    if (const JsonValue* v = Get(key, JsonValue::Type::kString)) *out = v->text;
  }
  void OptionalText(absl::string_view key, std::string* out) {
    if (object_.Find(key) != nullptr) Text(key, out);
  }
  void Bool(absl::string_view key, bool* out) {
    if (const JsonValue* v = Get(key, JsonValue::Type::kBool)) *out = v->boolean;
  }
  const JsonValue* Array(absl::string_view key) { return Get(key, JsonValue::Type::kArray); }

  const absl::Status& status() const { return status_; }

 private:
  const JsonValue* Get(absl::string_view key, JsonValue::Type type) {
    if (!status_.ok()) return nullptr;
    const JsonValue* v = object_.Find(key);
    if (v == nullptr) {
      Fail(absl::StrCat("no '", key, "'"));
      return nullptr;
    }
    if (v->type != type) {
      Fail(absl::StrCat("'", key, "' has the wrong type"));
      return nullptr;
    }
    return v;
  }
  void Fail(absl::string_view why) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(absl::StrCat(where_, ": ", why));
  }

  const JsonValue& object_;
  const std::string where_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<RankDump> ParseDump(absl::string_view text, absl::string_view source) {
  absl::StatusOr<JsonValue> root = ParseJson(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", root.status().message()));
  }
  const JsonValue* format = root->Find("format");
  if (format == nullptr || format->type != JsonValue::Type::kString ||
      format->text != "weft-flight-recorder") {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": not a Weft flight-recorder dump (no \"format\": "
                     "\"weft-flight-recorder\")"));
  }
  RankDump dump;
  dump.source = std::string(source);
  Fields fields(*root, std::string(source));
  int64_t version = 0;
  fields.Int("version", &version);
  if (fields.status().ok() && version != kSupportedVersion) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": dump format version ", version,
                                                   "; this weft-trace reads version ",
                                                   kSupportedVersion));
  }
  fields.Int("rank", &dump.rank);
  fields.Int("size", &dump.size);
  fields.Int("pid", &dump.pid);
  fields.Text("host", &dump.host);
  fields.Text("comm", &dump.comm);
  fields.Text("reason", &dump.reason);
  fields.Int("dumped_ns", &dump.dumped_ns);
  const JsonValue* ops = fields.Array("ops");
  if (!fields.status().ok()) return fields.status();
  if (dump.size < 1 || dump.size > kMaxRanks || dump.rank < 0 || dump.rank >= dump.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": rank ", dump.rank, " is not in a communicator of ", dump.size));
  }
  for (size_t i = 0; i < ops->items.size(); ++i) {
    const JsonValue& item = ops->items[i];
    if (item.type != JsonValue::Type::kObject) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ops[", i, "] is not an object"));
    }
    OpRecord op;
    Fields f(item, absl::StrCat(source, ": ops[", i, "]"));
    f.Unsigned("id", &op.id);
    f.Unsigned("seq", &op.seq);
    f.Bool("collective", &op.collective);
    f.Text("op", &op.op);
    f.Text("dtype", &op.dtype);
    f.Text("reduce_op", &op.reduce_op);
    f.Unsigned("count", &op.count);
    f.Unsigned("bytes", &op.bytes);
    f.Int("root", &op.root);
    f.Int("peer", &op.peer);
    f.Text("algorithm", &op.algorithm);
    f.Text("state", &op.state);
    f.Int("enqueue_ns", &op.enqueue_ns);
    f.Int("start_ns", &op.start_ns);
    f.Int("end_ns", &op.end_ns);
    f.OptionalText("error", &op.error);
    if (!f.status().ok()) return f.status();
    dump.ops.push_back(std::move(op));
  }
  return dump;
}

}  // namespace weft::trace
