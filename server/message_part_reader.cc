#include "server/message_part_reader.h"

#include <algorithm>
#include <utility>

namespace partplan {
namespace {

bool Malformed(std::string* error, const char* what) {
  *error = what;
  return false;
}

}  // namespace

bool MessagePartReader::Read(grpc::ByteBuffer* buffer, std::string* error) {
  std::vector<grpc::Slice> slices;
  if (!buffer->Valid() || !buffer->Dump(&slices).ok()) {
    *error = "no message";
    return false;
  }
  buffer->Clear();
  for (grpc::Slice& slice : slices) {
    if (slice.size() > 0) slices_.push_back(std::move(slice));
  }
  while (!AtEnd()) {
    uint64_t key;
    if (!ReadVarint(&key)) return Malformed(error, "a field's tag is cut short");
    const uint64_t number = key >> 3;
    if (number == 0) return Malformed(error, "a field's tag is 0");
    switch (key & 7) {
      case 0: {  // varint
        uint64_t unused;
        if (!ReadVarint(&unused)) return Malformed(error, "a varint is cut short");
        break;
      }
      case 1:  // 64-bit
        if (!Take(8, nullptr)) return Malformed(error, "a fixed64 is cut short");
        break;
      case 5:  // 32-bit
        if (!Take(4, nullptr)) return Malformed(error, "a fixed32 is cut short");
        break;
      case 2: {  // length-delimited
        uint64_t length;
        if (!ReadVarint(&length)) return Malformed(error, "a length is cut short");
        if (number == 2) {
          data_.clear();
          data_bytes_ = 0;
          if (!Take(length, &data_)) return Malformed(error, "data is cut short");
          data_bytes_ = length;
        } else if (number == 1) {
          std::vector<grpc::Slice> pieces;
          if (!Take(length, &pieces)) return Malformed(error, "method is cut short");
          method_.clear();
          for (const grpc::Slice& piece : pieces) {
            method_.append(reinterpret_cast<const char*>(piece.begin()), piece.size());
          }
        } else if (!Take(length, nullptr)) {
          return Malformed(error, "a field is cut short");
        }
        break;
      }
      default:
        return Malformed(error, "a field has a wire type MessagePart cannot hold");
    }
  }
  slices_.clear();  // data_ keeps what it needs
  return true;
}

void MessagePartReader::MoveDataTo(std::vector<grpc::Slice>* to) {
  for (grpc::Slice& slice : data_) to->push_back(std::move(slice));
  data_.clear();
}

bool MessagePartReader::ReadVarint(uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (AtEnd()) return false;
    const uint8_t byte = slices_[slice_].begin()[offset_];
    Advance(1);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;  // longer than 10 bytes
}

bool MessagePartReader::Take(uint64_t length, std::vector<grpc::Slice>* pieces) {
  while (length > 0) {
    if (AtEnd()) return false;
    const grpc::Slice& slice = slices_[slice_];
    const size_t take = static_cast<size_t>(std::min<uint64_t>(length, slice.size() - offset_));
    if (pieces != nullptr) pieces->push_back(slice.sub(offset_, offset_ + take));
    Advance(take);
    length -= take;
  }
  return true;
}

void MessagePartReader::Advance(size_t bytes) {
  offset_ += bytes;
  if (offset_ == slices_[slice_].size()) {
    ++slice_;
    offset_ = 0;
  }
}

void JoinedParts::Append(std::vector<grpc::Slice> data) {
  for (grpc::Slice& slice : data) {
    if (slice.size() >= kCopyBelowBytes) {
      Flush();
      slices_.push_back(std::move(slice));
      continue;
    }
    pending_.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    if (pending_.size() >= 16 * kCopyBelowBytes) Flush();
  }
}

void JoinedParts::Flush() {
  if (pending_.empty()) return;
  slices_.emplace_back(pending_);
  pending_.clear();
}

grpc::ByteBuffer JoinedParts::Take() {
  Flush();
  grpc::ByteBuffer joined(slices_.data(), slices_.size());
  slices_.clear();
  return joined;
}

}  // namespace partplan
