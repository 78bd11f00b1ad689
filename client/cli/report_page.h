// The plan report: a response as one self-contained HTML page, drawn by
// client/report/report.html (embedded at build time), the renderer the
// Python client's partplan.show uses too. This file only fills in the data.
//
//   std::cout << partplan::cli::ReportPage(response, &request, "PlanTraining");
//
// With the request, the page labels each edge with the bytes crossing it
// and names a training plan's nodes; without, it counts values.
#ifndef PARTPLAN_CLIENT_CLI_REPORT_PAGE_H_
#define PARTPLAN_CLIENT_CLI_REPORT_PAGE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace partplan {
namespace cli {

// `request` may be null. `rpc` names the method ("PartitionGraph"); empty:
// the response type's name without "Response".
std::string ReportPage(const google::protobuf::Message& response,
                       const google::protobuf::Message* request,
                       absl::string_view rpc, absl::string_view title = "");

}  // namespace cli
}  // namespace partplan

#endif  // PARTPLAN_CLIENT_CLI_REPORT_PAGE_H_
