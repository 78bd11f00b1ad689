// Reading a serialised request apart from its graph, so that the graph is
// imported straight from its bytes (GraphSource::Serialized in
// graph_import.h) and no protobuf tree of it is ever built, and reading
// bytes that arrive in pieces in place:
//
//   ChunkedBytes bytes(slices);  // e.g. the slices of a gRPC ByteBuffer
//   v1::PartitionGraphRequest request;  // every field but graph
//   std::optional<ChunkedBytes> graph = ParseAllButGraph(bytes, &request);
//   if (graph.has_value()) {
//     status = PartitionGraph(request, GraphSource::Serialized(*graph), limits, token, &response);
//   } else {
//     // Not a well-formed message, or a graph given in several pieces
//     // (protobuf merges them): parse the request whole instead.
//   }
//
// Only the top-level fields are scanned (tag and length); nothing in the
// graph is read, so splitting costs nothing next to a parse.
#ifndef PARTPLAN_PLANNER_GRAPH_SERIALIZED_REQUEST_H_
#define PARTPLAN_PLANNER_GRAPH_SERIALIZED_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/message.h"
#include "planner/base/cancellation.h"

namespace partplan {

// Bytes in pieces, read where they are: gRPC receives a large message as
// slices of some tens of kilobytes, and copying them into one block would
// hold the message twice. The pieces must outlive this object.
class ChunkedBytes {
 public:
  ChunkedBytes() = default;
  // One piece; implicit, so that a string or string_view can be passed
  // (the string must outlive this object, as any piece must).
  ChunkedBytes(absl::string_view bytes);                                              // NOLINT
  ChunkedBytes(const std::string& bytes) : ChunkedBytes(absl::string_view(bytes)) {}  // NOLINT
  ChunkedBytes(std::string&&) = delete;  // would view a temporary
  explicit ChunkedBytes(const std::vector<absl::string_view>& chunks);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The non-empty pieces, in order.
  const std::vector<absl::string_view>& chunks() const { return chunks_; }

  // The bytes [offset, offset + size), as views of these pieces.
  ChunkedBytes Sub(size_t offset, size_t size) const;
  // Copies [offset, offset + size) to `out`.
  void CopyTo(size_t offset, size_t size, char* out) const;
  // Appends [offset, offset + size) to `*out`.
  void AppendTo(size_t offset, size_t size, std::string* out) const;
  // [offset, offset + size) when it lies within one piece, else nullopt.
  // `*chunk` is the piece to look from, and is left at the one holding
  // `offset`: offsets looked up in increasing order cost O(1) each.
  std::optional<absl::string_view> Contiguous(size_t offset, size_t size, size_t* chunk) const;
  // All the bytes in one string (for tests and small messages).
  std::string Flatten() const;

 private:
  // The piece holding `offset` (< size()).
  size_t ChunkOf(size_t offset) const;

  std::vector<absl::string_view> chunks_;
  std::vector<size_t> starts_;  // offset of each piece
  size_t size_ = 0;
};

// ChunkedBytes as a protobuf input stream, for protobuf to parse them in
// place (Message::ParseFromZeroCopyStream, CodedInputStream).
class ChunkedInputStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  // What a polling stream hands out at most per Next: a parse of 64 KiB
  // takes well under a millisecond in a debug build.
  static constexpr int kPollBytes = 64 << 10;

  explicit ChunkedInputStream(const ChunkedBytes& bytes) : chunks_(bytes.chunks()) {}
  // A stream that polls `token` (which must outlive it) before each piece
  // of at most kPollBytes, and ends once the token fires: a parse from it
  // then fails, and status() is the token's.
  ChunkedInputStream(const ChunkedBytes& bytes, const CancellationToken& token)
      : chunks_(bytes.chunks()), token_(&token), max_piece_(kPollBytes) {}

  // OK unless the token fired during a Next.
  const absl::Status& status() const { return status_; }

  bool Next(const void** data, int* size) override;
  void BackUp(int count) override;
  bool Skip(int count) override;
  int64_t ByteCount() const override { return position_; }

 private:
  const std::vector<absl::string_view>& chunks_;
  const CancellationToken* token_ = nullptr;  // polled by Next, when set
  size_t max_piece_ = static_cast<size_t>(-1);
  absl::Status status_;
  size_t chunk_ = 0;     // the piece being read
  size_t in_chunk_ = 0;  // bytes of it read
  int64_t position_ = 0;
};

// Walks the top-level fields of the serialised message `message`: calls
// `on_field` with the offset and size (in `message`) of the payload of each
// length-delimited field numbered `field_number`, in order, and appends the
// bytes of every other field to `*rest` (which then parses as the message
// without that field). Returns false when `message` is not a well-formed
// message (truncated, a bad tag or length) or as soon as `on_field` returns
// false.
bool SplitField(const ChunkedBytes& message, int field_number,
                absl::FunctionRef<bool(size_t offset, size_t size)> on_field, std::string* rest);

// The payload of the length-delimited field `field_number` of `message`
// (empty when absent), with the other fields' bytes in `*rest`; nullopt when
// `message` is not well-formed or holds that field more than once.
std::optional<ChunkedBytes> ExtractField(const ChunkedBytes& message, int field_number,
                                         std::string* rest);

// Parses every field of a serialised request but its `graph` into
// `*request` and returns the graph's bytes; nullopt when the request has no
// `graph` field, does not split, or its other fields do not parse (parse it
// whole then, to report why).
std::optional<ChunkedBytes> ParseAllButGraph(const ChunkedBytes& bytes,
                                             google::protobuf::Message* request);

// The number of nodes a serialised v1::Graph lists (counted, not parsed), or
// -1 when its fields do not scan.
int64_t CountSerializedNodes(const ChunkedBytes& graph);

}  // namespace partplan

#endif  // PARTPLAN_PLANNER_GRAPH_SERIALIZED_REQUEST_H_
