#include "planner/graph/serialized_request.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "partplan/v1/graph.pb.h"

namespace partplan {

ChunkedBytes::ChunkedBytes(absl::string_view bytes)
    : ChunkedBytes(std::vector<absl::string_view>{bytes}) {}

ChunkedBytes::ChunkedBytes(const std::vector<absl::string_view>& chunks) {
  for (absl::string_view chunk : chunks) {
    if (chunk.empty()) continue;
    chunks_.push_back(chunk);
    starts_.push_back(size_);
    size_ += chunk.size();
  }
}

size_t ChunkedBytes::ChunkOf(size_t offset) const {
  return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                             starts_.begin()) -
         1;
}

ChunkedBytes ChunkedBytes::Sub(size_t offset, size_t size) const {
  std::vector<absl::string_view> pieces;
  if (size > 0) {
    for (size_t c = ChunkOf(offset); size > 0; ++c) {
      const size_t from = offset - starts_[c];
      const size_t take = std::min(size, chunks_[c].size() - from);
      pieces.push_back(chunks_[c].substr(from, take));
      offset += take;
      size -= take;
    }
  }
  return ChunkedBytes(pieces);
}

void ChunkedBytes::CopyTo(size_t offset, size_t size, char* out) const {
  if (size == 0) return;
  for (size_t c = ChunkOf(offset); size > 0; ++c) {
    const size_t from = offset - starts_[c];
    const size_t take = std::min(size, chunks_[c].size() - from);
    std::memcpy(out, chunks_[c].data() + from, take);
    out += take;
    offset += take;
    size -= take;
  }
}

void ChunkedBytes::AppendTo(size_t offset, size_t size, std::string* out) const {
  const size_t at = out->size();
  out->resize(at + size);
  CopyTo(offset, size, out->data() + at);
}

std::optional<absl::string_view> ChunkedBytes::Contiguous(size_t offset, size_t size,
                                                          size_t* chunk) const {
  if (size == 0) return absl::string_view();
  size_t c = *chunk < chunks_.size() && starts_[*chunk] <= offset ? *chunk : ChunkOf(offset);
  while (offset >= starts_[c] + chunks_[c].size()) ++c;
  *chunk = c;
  const size_t from = offset - starts_[c];
  if (from + size > chunks_[c].size()) return std::nullopt;
  return chunks_[c].substr(from, size);
}

std::string ChunkedBytes::Flatten() const {
  std::string bytes;
  AppendTo(0, size_, &bytes);
  return bytes;
}

bool ChunkedInputStream::Next(const void** data, int* size) {
  while (chunk_ < chunks_.size() && in_chunk_ == chunks_[chunk_].size()) {
    ++chunk_;
    in_chunk_ = 0;
  }
  if (chunk_ == chunks_.size()) return false;
  if (token_ != nullptr) {
    status_ = token_->Check();
    if (!status_.ok()) return false;
  }
  const absl::string_view chunk = chunks_[chunk_];
  const size_t piece = std::min(chunk.size() - in_chunk_, max_piece_);
  *data = chunk.data() + in_chunk_;
  *size = static_cast<int>(piece);  // pieces of a message below 2 GiB
  position_ += *size;
  in_chunk_ += piece;
  return true;
}

void ChunkedInputStream::BackUp(int count) {
  // Within the piece the last Next returned, as the interface requires.
  in_chunk_ -= static_cast<size_t>(count);
  position_ -= count;
}

bool ChunkedInputStream::Skip(int count) {
  while (count > 0) {
    if (chunk_ == chunks_.size()) return false;
    const size_t left = chunks_[chunk_].size() - in_chunk_;
    if (left == 0) {
      ++chunk_;
      in_chunk_ = 0;
      continue;
    }
    const size_t take = std::min(left, static_cast<size_t>(count));
    in_chunk_ += take;
    position_ += static_cast<int64_t>(take);
    count -= static_cast<int>(take);
  }
  return true;
}

bool SplitField(const ChunkedBytes& message, int field_number,
                absl::FunctionRef<bool(size_t offset, size_t size)> on_field, std::string* rest) {
  using google::protobuf::internal::WireFormatLite;
  // CodedInputStream counts in int; gRPC bounds messages to 2 GiB anyway.
  if (message.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
  const uint32_t wanted_tag =
      WireFormatLite::MakeTag(field_number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  ChunkedInputStream stream(message);
  google::protobuf::io::CodedInputStream input(&stream);
  for (;;) {
    const size_t start = static_cast<size_t>(input.CurrentPosition());
    const uint32_t tag = input.ReadTag();
    if (tag == 0) return start == message.size();  // the end, or tag 0
    if (tag == wanted_tag) {
      uint32_t size = 0;
      if (!input.ReadVarint32(&size)) return false;
      const size_t offset = static_cast<size_t>(input.CurrentPosition());
      if (size > message.size() - offset || !input.Skip(static_cast<int>(size))) return false;
      if (!on_field(offset, size)) return false;
    } else {
      if (!WireFormatLite::SkipField(&input, tag)) return false;
      message.AppendTo(start, static_cast<size_t>(input.CurrentPosition()) - start, rest);
    }
  }
}

std::optional<ChunkedBytes> ExtractField(const ChunkedBytes& message, int field_number,
                                         std::string* rest) {
  std::optional<ChunkedBytes> found;
  const bool split = SplitField(
      message, field_number,
      [&](size_t offset, size_t size) {
        if (found.has_value()) return false;
        found = message.Sub(offset, size);
        return true;
      },
      rest);
  if (!split) return std::nullopt;
  if (!found.has_value()) return ChunkedBytes();
  return found;
}

std::optional<ChunkedBytes> ParseAllButGraph(const ChunkedBytes& bytes,
                                             google::protobuf::Message* request) {
  const google::protobuf::FieldDescriptor* graph =
      request->GetDescriptor()->FindFieldByName("graph");
  if (graph == nullptr) return std::nullopt;
  std::string rest;
  std::optional<ChunkedBytes> graph_bytes = ExtractField(bytes, graph->number(), &rest);
  if (!graph_bytes.has_value() || !request->ParseFromString(rest)) return std::nullopt;
  return graph_bytes;
}

int64_t CountSerializedNodes(const ChunkedBytes& graph) {
  int64_t count = 0;
  std::string header;
  const bool split = SplitField(
      graph, v1::Graph::kNodesFieldNumber,
      [&](size_t, size_t) {
        ++count;
        return true;
      },
      &header);
  return split ? count : -1;
}

}  // namespace partplan
