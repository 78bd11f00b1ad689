#include "planner/api/planner_request.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "planner/base/status_util.h"
#include "planner/wire/parse_failure.h"

namespace partplan {
namespace {

// Every request of kPlannerRpcs has a `graph` (planner_rpcs_test checks).
const google::protobuf::FieldDescriptor& GraphField(const google::protobuf::Message& request) {
  return *request.GetDescriptor()->FindFieldByName("graph");
}

// `failure`, why a request of `rpc` did not parse, naming the message it
// should have been.
absl::Status Unparsable(const PlannerRpcMethod& rpc, const absl::Status& failure) {
  return InvalidFieldError(InvalidFieldPath(failure).value_or(""),
                           absl::StrCat(InvalidFieldDescription(failure),
                                        ", the request message of /", kPlannerServiceName, "/",
                                        rpc.name));
}

}  // namespace

PlannerRequest::PlannerRequest(google::protobuf::Message* message, GraphSource graph)
    : message_(message),
      graph_(std::move(graph)),
      imported_nodes_(std::make_unique<int64_t>(-1)) {
  graph_.set_node_count_out(imported_nodes_.get());
}

int64_t PlannerRequest::CountNodes() const {
  if (*imported_nodes_ >= 0) return *imported_nodes_;
  if (graph_.parsed() == nullptr) return CountSerializedNodes(graph_.serialized());
  return graph_.parsed()->nodes_size();
}

int PlannerRequest::device_count() const {
  const google::protobuf::FieldDescriptor* devices =
      message_->GetDescriptor()->FindFieldByName("devices");
  if (devices == nullptr || devices->message_type() != v1::DeviceInventory::descriptor()) return 0;
  const auto& inventory = static_cast<const v1::DeviceInventory&>(
      message_->GetReflection()->GetMessage(*message_, devices));
  return inventory.devices_size();
}

absl::StatusOr<PlannerRequest> ReadPlannerRequest(const PlannerRpcMethod& rpc,
                                                  const ChunkedBytes* bytes,
                                                  google::protobuf::Arena* arena) {
  const google::protobuf::Message& prototype = rpc.request_prototype();
  google::protobuf::Message* request = prototype.New(arena);
  if (bytes == nullptr) {
    return Unparsable(rpc, InvalidFieldError("", absl::StrCat(
                                                 "the call carried no message; expected a ",
                                                 prototype.GetDescriptor()->full_name())));
  }
  // The fields but the graph parsed, the graph's bytes kept.
  if (std::optional<ChunkedBytes> graph = ParseAllButGraph(*bytes, request)) {
    return PlannerRequest(request, GraphSource::Serialized(*std::move(graph)));
  }
  // Parsed whole, to read a graph sent in pieces or to say what is wrong.
  request->Clear();
  ChunkedInputStream whole(*bytes);
  if (!request->ParseFromZeroCopyStream(&whole)) {
    return Unparsable(rpc, ParseFailure(*prototype.GetDescriptor(), *bytes));
  }
  const auto& graph = static_cast<const v1::Graph&>(
      request->GetReflection()->GetMessage(*request, &GraphField(*request)));
  return PlannerRequest(request, GraphSource(graph));
}

}  // namespace partplan
