// MessagePartReader: a partplan.v1.MessagePart received by gRPC, read where
// gRPC put it. Its `data` stays as slices of the message's own, so that
// PartitionPlannerInParts joins a request's parts without copying them (a
// copy would also touch as many fresh pages as the request has bytes). Fields
// are read as protobuf reads them: the last of a field given twice wins, and
// fields of other numbers are skipped.
//
//   MessagePartReader part;
//   std::string error;
//   if (!part.Read(&received, &error)) return InvalidArgument(error);
//   if (part.method() != "") ...;
//   part.MoveDataTo(&request_slices);
//
// JoinedParts: the data of a request's parts, in order, as one ByteBuffer.
// Slices of 4 KiB or more are kept as they are; smaller ones are copied
// together, so that a request sent in many tiny parts costs the server its
// bytes, not a slice (32 bytes and a reference) per part.
//
//   JoinedParts request;
//   request.Append(std::move(data_slices));   // per part
//   grpc::ByteBuffer whole = request.Take();
#ifndef PARTPLAN_SERVER_MESSAGE_PART_READER_H_
#define PARTPLAN_SERVER_MESSAGE_PART_READER_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace partplan {

class MessagePartReader {
 public:
  // Reads the message in `*buffer` (which then holds nothing). False, with
  // `*error` saying what is wrong, when its bytes are no MessagePart.
  bool Read(grpc::ByteBuffer* buffer, std::string* error);

  const std::string& method() const { return method_; }
  uint64_t data_bytes() const { return data_bytes_; }
  // Moves the data's slices to the end of `*to`.
  void MoveDataTo(std::vector<grpc::Slice>* to);

 private:
  bool AtEnd() const { return slice_ == slices_.size(); }
  bool ReadVarint(uint64_t* value);
  // Skips `length` bytes, appending them to `*pieces` (when not null) as
  // slices of the message's own; false when fewer are left.
  bool Take(uint64_t length, std::vector<grpc::Slice>* pieces);
  void Advance(size_t bytes);

  std::vector<grpc::Slice> slices_;  // the message's, none empty
  size_t slice_ = 0;
  size_t offset_ = 0;  // into slices_[slice_]
  std::string method_;
  std::vector<grpc::Slice> data_;
  uint64_t data_bytes_ = 0;
};

class JoinedParts {
 public:
  // Slices shorter than this are copied together.
  static constexpr size_t kCopyBelowBytes = 4096;

  void Append(std::vector<grpc::Slice> data);
  // Slices held so far (the copied bytes not yet made one counted as one).
  size_t slice_count() const { return slices_.size() + (pending_.empty() ? 0 : 1); }
  // The data joined; leaves this empty.
  grpc::ByteBuffer Take();

 private:
  void Flush();

  std::vector<grpc::Slice> slices_;
  std::string pending_;  // small slices' bytes, copied together
};

}  // namespace partplan

#endif  // PARTPLAN_SERVER_MESSAGE_PART_READER_H_
