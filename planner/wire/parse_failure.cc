#include "planner/wire/parse_failure.h"

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/wire_format_lite.h"
#include "planner/base/status_util.h"

namespace partplan {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

// protobuf's default recursion limit: deeper messages fail to parse.
constexpr int kMaxDepth = 100;

std::string Join(const std::string& path, absl::string_view name) {
  return path.empty() ? std::string(name) : absl::StrCat(path, ".", name);
}

class WireWalker {
 public:
  WireWalker(CodedInputStream* in, size_t size) : in_(in), size_(size) {}

  // Reads the fields of a `type` up to the current limit (or the end of the
  // bytes); the first thing wrong is an InvalidFieldError at its path.
  absl::Status Message(const Descriptor& type, const std::string& path, int depth) {
    absl::flat_hash_map<int, int> occurrences;
    while (true) {
      const uint32_t tag = in_->ReadTag();
      if (tag == 0) {
        // The end of the bytes or of the enclosing length, or a bad tag.
        if (in_->ConsumedEntireMessage()) return absl::OkStatus();
        return InvalidFieldError(path.empty() ? "" : path,
                                 "a field tag is 0, malformed, or cut short");
      }
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      const WireFormatLite::WireType wire_type = WireFormatLite::GetTagWireType(tag);
      if (number == 0) return InvalidFieldError(path, "a field is numbered 0");
      if (wire_type == WireFormatLite::WIRETYPE_END_GROUP) {
        return InvalidFieldError(path, absl::StrCat("field ", number,
                                                    " closes a group that was never opened"));
      }
      const FieldDescriptor* field = type.FindFieldByNumber(number);
      std::string here;
      if (field == nullptr) {
        here = Join(path, absl::StrCat("<unknown field ", number, ">"));
      } else if (field->is_repeated()) {
        here = absl::StrCat(Join(path, field->name()), "[", occurrences[number]++, "]");
      } else {
        here = Join(path, field->name());
      }
      if (field == nullptr || wire_type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!WireFormatLite::SkipField(in_, tag)) {
          return InvalidFieldError(here, "its value is malformed or cut short");
        }
        continue;
      }
      uint32_t length = 0;
      if (!in_->ReadVarint32(&length)) {
        return InvalidFieldError(here, "its length is malformed or cut short");
      }
      const std::string cut_short =
          absl::StrCat("announces ", length, " bytes and fewer follow");
      if (length > size_ - static_cast<size_t>(in_->CurrentPosition())) {
        return InvalidFieldError(here, cut_short);
      }
      if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
        if (depth + 1 > kMaxDepth) {
          return InvalidFieldError(here, absl::StrCat("messages nest more than ", kMaxDepth,
                                                      " deep"));
        }
        const CodedInputStream::Limit limit = in_->PushLimit(static_cast<int>(length));
        absl::Status inner = Message(*field->message_type(), here, depth + 1);
        if (inner.ok() && in_->BytesUntilLimit() > 0) inner = InvalidFieldError(here, cut_short);
        if (!inner.ok()) return inner;
        in_->PopLimit(limit);
        continue;
      }
      if (field->type() == FieldDescriptor::TYPE_STRING &&
          field->file()->syntax() == google::protobuf::FileDescriptor::SYNTAX_PROTO3) {
        std::string value;
        if (!in_->ReadString(&value, static_cast<int>(length))) {
          return InvalidFieldError(here, cut_short);
        }
        if (!google::protobuf::internal::IsStructurallyValidUTF8(value.data(),
                                                                  static_cast<int>(value.size()))) {
          return InvalidFieldError(here, "not valid UTF-8, which a proto3 string must be");
        }
        continue;
      }
      if (!in_->Skip(static_cast<int>(length))) return InvalidFieldError(here, cut_short);
    }
  }

 private:
  CodedInputStream* in_;
  size_t size_;  // of all the bytes
};

}  // namespace

absl::Status ParseFailure(const Descriptor& type, const ChunkedBytes& bytes) {
  ChunkedInputStream stream(bytes);
  CodedInputStream in(&stream);
  // The walk keeps its own depth count; the stream's must not stop it first.
  in.SetRecursionLimit(kMaxDepth + 1);
  const absl::Status found = WireWalker(&in, bytes.size()).Message(type, "", 0);
  const std::string suffix = absl::StrCat("; the bytes do not parse as ", type.full_name());
  if (found.ok()) {
    return InvalidFieldError("", absl::StrCat("protobuf refuses these bytes", suffix));
  }
  return InvalidFieldError(InvalidFieldPath(found).value_or(""),
                           absl::StrCat(InvalidFieldDescription(found), suffix));
}

}  // namespace partplan
