// WireWriter: protobuf's wire format written by hand, into a Cord of pieces,
// for responses too large to build as messages first (a plan by name lists
// a million names; building a std::string and a message per name, then
// serialising them, cost more than planning).
//
// The caller works out every length before writing (protobuf writes a
// message's length before its fields), then writes exactly that many bytes:
//
//   const size_t payload = FieldSize(name.size());       // Part{name}
//   PARTPLAN_RETURN_IF_ERROR(WriteResponseBytes(
//       FieldSize(payload), kResponsePieceBytes, &bytes, [&](WireWriter& out) {
//         out.Reserve(FieldSize(payload));
//         out.FieldHeader(Tag(1, kLengthDelimited), payload);
//         out.Field(Tag(1, kLengthDelimited), name);
//       }));
//
// Fields must go in number order, as protobuf writes them, for the bytes to
// be the same as protobuf's serialisation of the message; callers check
// that against protobuf in their tests.
#ifndef PARTPLAN_PLANNER_WIRE_WIRE_WRITER_H_
#define PARTPLAN_PLANNER_WIRE_WIRE_WRITER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/coded_stream.h"

namespace partplan {

// The size of the pieces the server's responses are written in.
inline constexpr size_t kResponsePieceBytes = size_t{1} << 20;

enum WireType : uint8_t { kVarint = 0, kLengthDelimited = 2 };

// A field's tag, for fields numbered below 16 (whose tag is one byte).
constexpr uint8_t Tag(int field, WireType type) { return static_cast<uint8_t>(field << 3 | type); }

// The bytes of a length-delimited field's tag and length, and of the whole
// field, whose payload is `payload` bytes (for fields numbered below 16).
inline size_t FieldHeaderSize(size_t payload) {
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize32(static_cast<uint32_t>(payload));
}
inline size_t FieldSize(size_t payload) { return FieldHeaderSize(payload) + payload; }

// Writes `size` bytes into pieces of about `piece_bytes` each, appended to
// a Cord. The fields written after a Reserve are whole within one piece (a
// piece ends early rather than split them, or is as large as they are);
// Append writes bytes of any length across pieces. Finish says whether
// exactly `size` bytes were written.
//
// Why pieces: one block of a large response (above glibc's largest mmap
// threshold, 32 MiB) is mapped and page-faulted afresh on every call, where
// pieces of kResponsePieceBytes reuse memory the allocator holds; gRPC sends
// a buffer of slices as it sends one.
class WireWriter {
  using CodedOutputStream = google::protobuf::io::CodedOutputStream;

 public:
  WireWriter(size_t size, size_t piece_bytes, absl::Cord* out)
      : size_(size), piece_bytes_(piece_bytes), out_(out) {
    out_->Clear();
  }

  // Hands the last piece to the Cord; false unless `size` bytes were
  // written in all.
  bool Finish() {
    Flush();
    return flushed_ == size_;
  }

  // Makes room for `bytes` more in the current piece; the writes below
  // stay within it.
  void Reserve(size_t bytes) {
    if (static_cast<size_t>(end_ - next_) >= bytes) return;
    Flush();
    const size_t unwritten = size_ > flushed_ ? size_ - flushed_ : 0;
    const size_t size = std::max(bytes, std::min(piece_bytes_, unwritten));
    piece_.resize(size);
    next_ = reinterpret_cast<uint8_t*>(piece_.data());
    end_ = next_ + size;
  }

  void Byte(uint8_t byte) { *next_++ = byte; }
  void Varint(uint32_t value) { next_ = CodedOutputStream::WriteVarint32ToArray(value, next_); }
  void SignedVarint(int32_t value) {
    next_ = CodedOutputStream::WriteVarint32SignExtendedToArray(value, next_);
  }
  void Copy(absl::string_view bytes) {
    std::memcpy(next_, bytes.data(), bytes.size());
    next_ += bytes.size();
  }
  // A length-delimited field: tag, length, then `payload` (or, with only a
  // length, what the caller writes next).
  void Field(uint8_t tag, absl::string_view payload) {
    FieldHeader(tag, payload.size());
    Copy(payload);
  }
  void FieldHeader(uint8_t tag, size_t length) {
    Byte(tag);
    Varint(static_cast<uint32_t>(length));
  }

  // `bytes` of any length, split across pieces as they fill.
  void Append(absl::string_view bytes) {
    while (!bytes.empty()) {
      Reserve(1);
      const size_t part = std::min(bytes.size(), static_cast<size_t>(end_ - next_));
      Copy(bytes.substr(0, part));
      bytes.remove_prefix(part);
    }
  }

 private:
  // Hands the piece written so far to the Cord (which keeps it uncopied).
  void Flush() {
    const size_t written = piece_.size() - static_cast<size_t>(end_ - next_);
    if (written == 0) return;
    piece_.resize(written);
    flushed_ += written;
    out_->Append(std::move(piece_));
    piece_ = std::string();
    next_ = end_ = nullptr;
  }

  const size_t size_;
  size_t flushed_ = 0;  // bytes in the Cord
  const size_t piece_bytes_;
  absl::Cord* out_;
  std::string piece_;
  uint8_t* next_ = nullptr;
  uint8_t* end_ = nullptr;
};

// INTERNAL: a response of `bytes`, over protobuf's 2 GiB limit on a
// message (as protobuf's own serialiser refuses it).
inline absl::Status ResponseTooLargeError(size_t bytes) {
  return absl::InternalError(absl::StrCat("cannot serialise the response: it is ", bytes,
                                          " bytes, over protobuf's limit of 2 GiB on a message"));
}

// Writes a response of `size` bytes into `*bytes` (replacing what it held)
// with `write(WireWriter&)`, in pieces of about `piece_bytes`. A response
// over protobuf's limit is ResponseTooLargeError (so every length in it
// fits 32 bits); fewer or more bytes than `size` written is INTERNAL.
template <typename Write>
absl::Status WriteResponseBytes(size_t size, size_t piece_bytes, absl::Cord* bytes,
                                Write write) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return ResponseTooLargeError(size);
  }
  WireWriter out(size, piece_bytes, bytes);
  write(out);
  if (!out.Finish()) {
    return absl::InternalError(absl::StrCat("the response was sized at ", size,
                                            " bytes and written as ", bytes->size()));
  }
  return absl::OkStatus();
}

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_WIRE_WIRE_WRITER_H_
